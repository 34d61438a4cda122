"""The FLA-shaped layer on a Hopper GPU (issue 55, part 1): a call whose tensors the kernels
cannot read where they are (the layer copies them) gives the bits of the same call on contiguous
tensors; so does a call whose strided tensors are read in place; the caller's tensors are never
written.  tests/test_fla_layout.py has the layouts and checks the same calls on the CPU.
"""
from __future__ import annotations

import pytest
import torch

import gdn_prefill
from gdn_prefill import errors, fla, reference as ref
from test_fla_layout import COPIED, IN_PLACE, conv_views, copied_case, in_place_case, inputs

pytestmark = pytest.mark.gpu


def _fresh(a: dict) -> dict:
    """The same values in fresh contiguous tensors (each its own 16-byte aligned allocation)."""
    return {n: (x.clone(memory_format=torch.contiguous_format) if isinstance(x, torch.Tensor) else x)
            for n, x in a.items()}


def _bits(x: torch.Tensor) -> torch.Tensor:
    return x.contiguous().view(torch.int16 if x.element_size() == 2 else torch.int32)


def _same(a, b) -> bool:
    return (a is None and b is None) or torch.equal(_bits(a), _bits(b))


def _check_against_contiguous(a: dict, **kw) -> None:
    want_o, want_s = fla.chunk_gated_delta_rule(**_fresh(a), **kw)
    before = {n: x.clone() for n, x in a.items() if isinstance(x, torch.Tensor)}
    o, s = fla.chunk_gated_delta_rule(**a, **kw)
    torch.cuda.synchronize()
    assert _same(o, want_o) and _same(s, want_s)
    for n, x in before.items():
        assert torch.equal(a[n], x), f"{n}: the caller's tensor was written"


@pytest.mark.parametrize("case_id", [c[0] for c in COPIED])
def test_copied_layout_gives_the_contiguous_bits(case_id):
    a = copied_case(case_id, inputs("cuda"))
    assert fla.explain_copies(**a)
    _check_against_contiguous(a)


@pytest.mark.parametrize("case_id", [c[0] for c in IN_PLACE])
def test_in_place_layout_gives_the_contiguous_bits(case_id):
    a = in_place_case(case_id, inputs("cuda"))
    assert fla.explain_copies(**a) == {}
    _check_against_contiguous(a)


@pytest.mark.parametrize("shape", [(1, 3000, 2, 4), (2, 1000, 1, 2), (1, 1, 2, 4)])
def test_model_layout_gives_the_contiguous_bits(shape):
    """The issue's call: q, k, v views of a transposed convolution output ([1, 3000] prompt), g
    and beta as the model makes them (beta bf16), no initial state; and a batch of two, and one
    token."""
    a = inputs("cuda", shape=shape, state=False)
    a = conv_views(a)
    a["beta"] = a["beta"].bfloat16()
    assert set(fla.explain_copies(**a)) == ({"q", "k", "v"} if shape[1] > 1 else set())
    _check_against_contiguous(a)
    _check_against_contiguous(a, use_qk_l2norm_in_kernel=True)


def test_every_copy_at_once_on_packed_sequences():
    """Two sequences packed along T: the model's q/k/v, a bf16 g, a transposed initial state and
    int64 offsets in a strided view, against the contiguous fp32 / int32 call."""
    a = {n: (x.flatten(0, 1)[None] if isinstance(x, torch.Tensor) and n != "initial_state" else x)
         for n, x in inputs("cuda").items()}
    a = conv_views(a)
    a["g"] = a["g"].bfloat16()
    a["initial_state"] = a["initial_state"].transpose(2, 3).contiguous().transpose(2, 3)
    T = a["q"].shape[1]
    cu = torch.zeros(6, dtype=torch.int64, device="cuda")[::2]
    cu[1], cu[2] = 50, T
    assert set(fla.explain_copies(**a, cu_seqlens=cu)) == {"q", "k", "v", "g", "initial_state", "cu_seqlens"}
    want = {**_fresh(a), "g": a["g"].float(), "initial_state": a["initial_state"].contiguous()}
    want_o, want_s = fla.chunk_gated_delta_rule(**want, cu_seqlens=cu.to(torch.int32).contiguous())
    o, s = fla.chunk_gated_delta_rule(**a, cu_seqlens=cu)
    torch.cuda.synchronize()
    assert _same(o, want_o) and _same(s, want_s)


def test_fla_keywords_change_nothing():
    """FLA's keywords at their defaults: the same bits; a model's keyword FLA does not know
    (use_cache) is refused by name, nothing written."""
    a = inputs("cuda")
    want_o, want_s = fla.chunk_gated_delta_rule(**a)
    o, s = fla.chunk_gated_delta_rule(**a, chunk_size=32, cu_seqlens_cpu=None, chunk_indices=None,
                                      head_first=False, state_v_first=False, use_gate_in_kernel=False)
    torch.cuda.synchronize()
    assert _same(o, want_o) and _same(s, want_s)
    with pytest.raises(errors.GdnArgumentError, match="^use_cache: not a keyword of FLA 0.6.0"):
        fla.chunk_gated_delta_rule(**a, use_cache=True)


def test_state_v_first_is_the_vk_pool():
    """state_v_first=True: prefill() with "vk" states, bit for bit; and the transpose of the
    [K, V] call's states (within rounding)."""
    a = inputs("cuda")
    h0_vk = a["initial_state"].transpose(2, 3).contiguous()
    o, s = fla.chunk_gated_delta_rule(**{**a, "initial_state": h0_vk}, state_v_first=True)
    B, T = a["q"].shape[:2]
    out, final = torch.empty_like(a["v"]).flatten(0, 1), torch.empty_like(h0_vk)
    cu = torch.arange(0, (B + 1) * T, T, dtype=torch.int32, device="cuda")
    gdn_prefill.prefill(*(a[n].flatten(0, 1) for n in ("q", "k", "v", "g", "beta")), out, final, cu_seqlens=cu,
                        initial_state=h0_vk, state_layout="vk")
    torch.cuda.synchronize()
    assert _same(o.flatten(0, 1), out) and _same(s, final)
    o_kv, s_kv = fla.chunk_gated_delta_rule(**a)
    assert ref.rel_err(o.double(), o_kv.double()) <= 1e-3
    assert ref.rel_err(s.transpose(2, 3).double(), s_kv.double()) <= 1e-3
