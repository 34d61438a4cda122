"""The FLA-shaped layer (gdn_prefill.fla) takes what FLA 0.6.0 takes (issue 55, part 1).

Layouts: a tensor the kernels cannot read where it is (last dim not contiguous, strides or base
that TMA cannot read, [B, T] dims that are no view of one, a state block that is not whole) gets
one contiguous copy, of that tensor only; explain_copies() names each copy and why; the check of
the call as a whole comes before any copy.  Keywords: FLA's are accepted, those whose value the
kernels cannot honour rejected by name, those whose value cannot change the result ignored; a
keyword FLA 0.6.0 does not know is rejected by name.

The launches are routed to explain() (a recorder standing in for the extension), so everything
here runs on the CPU; tests/test_gpu_fla_layout.py runs the same layouts on a Hopper GPU, bit for
bit against the contiguous call.
"""
from __future__ import annotations

import inspect

import numpy as np
import pytest
import torch

import gdn_prefill
from conftest import offset_view
from gdn_prefill import errors, fla

B, T, HK, HV, D = 2, 70, 1, 2, 128


# ----------------------------------------------------------------------------- inputs
def inputs(device="cpu", *, state=True, seed=0, shape=(B, T, HK, HV)) -> dict:
    """A valid call: (by default) B = 2 sequences of T = 70 tokens, GVA 1 -> 2 heads, contiguous
    tensors, unit-norm q and k, an initial state and a final one."""
    b, t, hk, hv = shape
    gen = torch.Generator().manual_seed(seed)
    q = torch.nn.functional.normalize(torch.randn(b, t, hk, D, generator=gen), dim=-1)
    k = torch.nn.functional.normalize(torch.randn(b, t, hk, D, generator=gen), dim=-1)
    a = dict(q=q.bfloat16(), k=k.bfloat16(), v=torch.randn(b, t, hv, D, generator=gen).bfloat16(),
             g=torch.nn.functional.logsigmoid(3 + torch.randn(b, t, hv, generator=gen)),
             beta=torch.rand(b, t, hv, generator=gen),
             initial_state=0.1 * torch.randn(b, hv, D, D, generator=gen) if state else None,
             output_final_state=True)
    return {n: (x.to(device) if isinstance(x, torch.Tensor) else x) for n, x in a.items()}


def conv_views(a: dict) -> dict:
    """q, k, v as transformers' Qwen3-Next / Qwen3.5 layers make them: one causal-convolution
    output [B, C, T] transposed to [B, T, C] and split along C (each last dim has stride T)."""
    parts = [a[n].flatten(2) for n in ("q", "k", "v")]
    conv = torch.cat(parts, -1).transpose(1, 2).contiguous()           # [B, C, T], as the conv writes it
    views = torch.split(conv.transpose(1, 2), [p.shape[-1] for p in parts], dim=-1)
    return {**a, **{n: x.unflatten(2, a[n].shape[2:]) for n, x in zip(("q", "k", "v"), views)}}


def _padded(x: torch.Tensor, dim: int, extra: int) -> torch.Tensor:
    """x's values in a view of a buffer `extra` elements longer in `dim` (so every stride above
    dim grows)."""
    shape = list(x.shape)
    shape[dim] += extra
    buf = torch.zeros(shape, dtype=x.dtype, device=x.device)
    view = buf.narrow(dim, 0, x.shape[dim])
    view.copy_(x)
    return view


def _bt_swapped(x: torch.Tensor) -> torch.Tensor:
    """x's values in a [B, T, ...] view of a [T, B, ...] buffer: no [B * T] view exists."""
    return x.transpose(0, 1).contiguous().transpose(0, 1)


# (id, argument, make the argument's new layout, fragment of explain_copies' reason)
COPIED = [
    ("q.conv_transposed", "q", None, "last dim has stride 70"),
    ("k.last_dim_strided", "k", lambda x: _padded(x.unsqueeze(-1), 4, 1)[..., 0], "last dim has stride 2"),
    ("v.token_stride_odd", "v", lambda x: _padded(x.flatten(2), 2, 4).unflatten(2, (HV, D)), "token stride 260"),
    ("k.head_stride_odd", "k", lambda x: _padded(x, 3, 4)[..., :D], "head stride 132"),
    ("q.base_unaligned", "q", offset_view, "base not 16-byte aligned"),
    ("v.bt_no_view", "v", _bt_swapped, "no view of one [B * T] dim"),
    ("g.bt_no_view", "g", _bt_swapped, "no view of one [B * T] dim"),
    ("beta.bt_no_view", "beta", _bt_swapped, "no view of one [B * T] dim"),
    ("g.bfloat16", "g", lambda x: x.bfloat16(), "converted to float32"),
    ("initial_state.last_dim_strided", "initial_state", lambda x: _padded(x.unsqueeze(-1), 4, 1)[..., 0],
     "block whole"),
    ("initial_state.transposed_blocks", "initial_state", lambda x: x.transpose(2, 3), "block whole"),
    ("initial_state.base_unaligned", "initial_state", offset_view, "16-byte aligned"),
    ("initial_state.bfloat16", "initial_state", lambda x: x.bfloat16(), "converted to float32"),
    # FLA's layer keeps FLA's contract (an fp32 final state) for every pool type prefill() takes
    ("initial_state.float16", "initial_state", lambda x: x.half(), "converted to float32"),
    ("initial_state.float8_e4m3fn", "initial_state", lambda x: x.to(torch.float8_e4m3fn), "converted to float32"),
]
# layouts the kernels read where they are: no copy
IN_PLACE = [
    ("qkv.fused_projection", None),
    ("q.padded_heads", lambda a: {**a, "q": _padded(a["q"], 3, 8)[..., :D]}),
    ("v.padded_tokens", lambda a: {**a, "v": _padded(a["v"].flatten(2), 2, 16).unflatten(2, (HV, D))}),
    ("g.interleaved", lambda a: {**a, "g": _padded(a["g"].unsqueeze(-1), 3, 1)[..., 0]}),
    ("beta.bfloat16_strided", lambda a: {**a, "beta": _padded(a["beta"].bfloat16().unsqueeze(-1), 3, 2)[..., 0]}),
    ("beta.offset", lambda a: {**a, "beta": offset_view(a["beta"])}),
    ("initial_state.expand_heads", lambda a: {**a, "initial_state": a["initial_state"][:, :1].expand_as(
        a["initial_state"])}),
    ("one_sequence", lambda a: {n: (x[:1] if isinstance(x, torch.Tensor) else x) for n, x in a.items()}),
]


def fused_projection(a: dict) -> dict:
    """q, k, v as slices of one [B, T, (2 Hk + Hv) D] projection (the serving layout)."""
    parts = [a[n].flatten(2) for n in ("q", "k", "v")]
    views = torch.split(torch.cat(parts, -1), [p.shape[-1] for p in parts], dim=-1)
    return {**a, **{n: x.unflatten(2, a[n].shape[2:]) for n, x in zip(("q", "k", "v"), views)}}


def copied_case(case_id: str, a: dict) -> dict:
    _, name, make, _ = next(c for c in COPIED if c[0] == case_id)
    return conv_views(a) if make is None else {**a, name: make(a[name])}


def in_place_case(case_id: str, a: dict) -> dict:
    make = dict(IN_PLACE)[case_id]
    return fused_projection(a) if make is None else make(a)


# ----------------------------------------------------------------------------- the extension, recorded
class Recorder:
    """The layer's view of the extension with every launch replaced by explain(): the same checks
    on CPU tensors; records the tensors each call hands to the kernels."""

    def __init__(self):
        self.calls: list[dict] = []

    def _prefill_fla(self, q, k, v, g, beta, out, final, init, has_init, cu, scale, l2, spine):
        self.calls.append(dict(q=q, k=k, v=v, g=g, beta=beta, initial_state=init, cu_seqlens=cu, out=out,
                               final=final, state_layout="kv"))
        flat = [x.flatten(0, 1) for x in (q, k, v, g, beta, out)]
        return gdn_prefill.explain(*flat, final, cu_seqlens=cu, scale=scale, use_qk_l2norm=l2, spine=spine,
                                   initial_state=init, has_initial_state=has_init)["chosen"]

    def prefill(self, q, k, v, g, beta, out, state=None, **kw):
        self.calls.append(dict(q=q, k=k, v=v, g=g, beta=beta, initial_state=kw.get("initial_state"),
                               cu_seqlens=kw.get("cu_seqlens"), out=out, final=state,
                               state_layout=kw.get("state_layout", "kv")))
        return gdn_prefill.explain(q, k, v, g, beta, out, state, **kw)["chosen"]

    def _release_fla_workspaces(self):
        pass


@pytest.fixture
def rec(monkeypatch):
    r = Recorder()
    monkeypatch.setattr(fla, "_ext", r)
    return r


@pytest.fixture
def copies_made(monkeypatch):
    """Every Tensor.copy_ made while the test runs (the layer's copies are copy_ into new tensors)."""
    made: list[tuple] = []
    real = torch.Tensor.copy_

    def spy(self, src, *args, **kwargs):
        made.append((tuple(self.shape), self.dtype))
        return real(self, src, *args, **kwargs)
    monkeypatch.setattr(torch.Tensor, "copy_", spy)
    return made


def _bits(x: torch.Tensor) -> torch.Tensor:
    return x.contiguous().view(torch.int16 if x.element_size() == 2 else torch.int32)


# ----------------------------------------------------------------------------- layouts
def test_contiguous_call_copies_nothing(rec, copies_made):
    a = inputs()
    assert fla.explain_copies(**a) == {}
    o, s = fla.chunk_gated_delta_rule(**a)
    (call,) = rec.calls
    for name in ("q", "k", "v", "g", "beta", "initial_state"):
        assert call[name] is a[name], name
    assert copies_made == []
    assert o.shape == a["v"].shape and o.is_contiguous() and s.shape == (B, HV, D, D) and s.dtype == torch.float32


@pytest.mark.parametrize("case_id", [c[0] for c in COPIED])
def test_unreadable_layout_gets_one_copy_of_that_tensor(case_id, rec, copies_made):
    """The tensor the kernels cannot read reaches them as one contiguous copy with its values (or,
    for a dtype the layer converts, its values converted); every other tensor as it was passed;
    the caller's tensor untouched; explain_copies() names exactly that tensor and the rule."""
    _, name, _, why = next(c for c in COPIED if c[0] == case_id)
    a = copied_case(case_id, inputs())
    names = ("q", "k", "v") if case_id == "q.conv_transposed" else (name,)
    before = {n: a[n].clone() for n in names}
    copies_made.clear()
    copies = fla.explain_copies(**a)
    assert set(copies) == set(names), copies
    assert all(why in copies[n] for n in names), copies
    assert copies_made == []                       # explain_copies makes none
    fla.chunk_gated_delta_rule(**a)
    (call,) = rec.calls
    assert len(copies_made) == len(names)
    for n in ("q", "k", "v", "g", "beta", "initial_state"):
        got = call[n]
        if n not in names:
            assert got is a[n], n
            continue
        assert got.data_ptr() != a[n].data_ptr() and got.is_contiguous(), n
        assert got.dtype == (torch.float32 if n in ("g", "initial_state") else a[n].dtype)
        assert torch.equal(got, a[n].to(got.dtype)), n
        assert torch.equal(a[n], before[n]), f"{n}: the caller's tensor was written"
        if n in ("q", "k", "v"):
            assert fla._rows_why(got) is None, n


@pytest.mark.parametrize("case_id", [c[0] for c in IN_PLACE])
def test_readable_layouts_are_read_in_place(case_id, rec, copies_made):
    a = in_place_case(case_id, inputs())
    copies_made.clear()
    assert fla.explain_copies(**a) == {}
    fla.chunk_gated_delta_rule(**a)
    (call,) = rec.calls
    for n in ("q", "k", "v", "g", "beta", "initial_state"):
        assert call[n] is a[n], n
    assert copies_made == []


def test_cu_seqlens_converted_or_copied(rec, copies_made):
    """cu_seqlens: int64 (FLA's and transformers' dtype) converted to int32 once; a strided int32 one
    copied; a contiguous int32 one read in place."""
    a = inputs(state=False)
    a = {n: (x.flatten(0, 1)[None] if isinstance(x, torch.Tensor) else x) for n, x in a.items()}
    cu32 = torch.tensor([0, 50, 2 * T], dtype=torch.int32)
    cases = ((cu32, {}), (cu32.long(), "converted to int32"), (_padded(cu32.unsqueeze(-1), 1, 1)[:, 0], "stride 2"))
    for cu, want in cases:
        rec.calls.clear()
        copies_made.clear()
        copies = fla.explain_copies(**a, cu_seqlens=cu)
        assert (copies == {}) if want == {} else (want in copies["cu_seqlens"]), copies
        o, s = fla.chunk_gated_delta_rule(**a, cu_seqlens=cu)
        got = rec.calls[0]["cu_seqlens"]
        assert (got is cu) if want == {} else (got.dtype == torch.int32 and got.is_contiguous()
                                                and torch.equal(got, cu32) and len(copies_made) == 1)
        assert s.shape == (2, HV, D, D)


def test_every_copy_at_once(rec, copies_made):
    """Two sequences packed along T with the model's q/k/v, a bf16 g, a strided initial state and
    int64 offsets: six copies or conversions in one call, each named."""
    a = {n: (x.flatten(0, 1)[None] if isinstance(x, torch.Tensor) and n != "initial_state" else x)
         for n, x in inputs().items()}
    a = conv_views(a)
    a["g"] = a["g"].bfloat16()
    a["initial_state"] = a["initial_state"].transpose(2, 3).contiguous().transpose(2, 3)
    cu = torch.tensor([0, T, 2 * T])
    copies_made.clear()
    copies = fla.explain_copies(**a, cu_seqlens=cu)
    assert set(copies) == {"q", "k", "v", "g", "initial_state", "cu_seqlens"}, copies
    assert f"last dim has stride {2 * T}" in copies["q"]
    fla.chunk_gated_delta_rule(**a, cu_seqlens=cu)
    assert len(copies_made) == 6 and len(rec.calls) == 1


# ----------------------------------------------------------------------------- checked before copying
@pytest.mark.parametrize("bad,arg,cls", [
    (dict(k=lambda x: x.float()), "k", errors.GdnDtypeError),
    (dict(v=lambda x: x[..., :64]), "v", errors.GdnShapeError),
    (dict(initial_state=lambda x: x[:1]), "initial_state", errors.GdnShapeError),
    (dict(beta=lambda x: x.to("meta")), "beta", errors.GdnDeviceError),
    (dict(scale=lambda x: float("inf")), "scale", errors.GdnArgumentError),
])
def test_rejected_before_any_copy(bad, arg, cls, rec, copies_made):
    """A call whose q, k and v need copies (the model's layout) and one other argument wrong: the
    error names that argument, and nothing is copied or launched."""
    a = {**conv_views(inputs()), "scale": None}
    for n, f in bad.items():
        a[n] = f(a[n])
    copies_made.clear()
    with pytest.raises(cls) as e:
        fla.chunk_gated_delta_rule(**a)
    assert arg in str(e.value), str(e.value)
    with pytest.raises(cls):
        fla.explain_copies(**a)
    assert copies_made == [] and rec.calls == []


def test_dtype_rules_stay_strict():
    """Only layouts (and the conversions of g, initial_state and cu_seqlens the layer always made)
    are copied: fp16 or fp32 q/k/v, and fp16 beta, are rejected as prefill() rejects them."""
    for name, dt in (("q", torch.float16), ("k", torch.float32), ("v", torch.float16), ("beta", torch.float16)):
        a = conv_views(inputs())
        a[name] = a[name].to(dt)
        with pytest.raises(errors.GdnDtypeError, match=f"^{name}: dtype"):
            fla.explain_copies(**a)


def test_prefill_itself_stays_strict():
    """prefill() does not copy: the model's layout is refused there as before."""
    a = conv_views(inputs())
    flat = [a[n][0] for n in ("q", "k", "v", "g", "beta")]
    with pytest.raises(errors.GdnLayoutError, match="q: last dim has stride 70"):
        gdn_prefill.explain(*flat, torch.empty_like(flat[2]))


# ----------------------------------------------------------------------------- keywords
# FLA 0.6.0's chunk_gated_delta_rule: its parameters in order (fla/ops/gated_delta_rule/chunk.py)
FLA_060_PARAMS = ["q", "k", "v", "g", "beta", "scale", "initial_state", "output_final_state",
                  "use_qk_l2norm_in_kernel", "use_beta_sigmoid_in_kernel", "allow_neg_eigval", "state_v_first",
                  "cu_seqlens", "cu_seqlens_cpu", "chunk_indices", "cp_context"]
# ... and the keywords its **kwargs reads
FLA_060_KWARGS = ["transpose_state_layout", "head_first", "chunk_size", "use_gate_in_kernel", "A_log", "dt_bias"]


def test_every_fla_keyword_at_its_default_is_accepted(rec):
    defaults = dict(use_beta_sigmoid_in_kernel=False, allow_neg_eigval=False, state_v_first=False,
                    cu_seqlens_cpu=torch.tensor([0, T, 2 * T]), chunk_indices=torch.zeros(4, 2, dtype=torch.int32),
                    cp_context=None, transpose_state_layout=False, head_first=False, chunk_size=64,
                    use_gate_in_kernel=False, A_log=torch.zeros(HV), dt_bias=torch.zeros(HV))
    assert set(defaults) == (set(FLA_060_PARAMS) | set(FLA_060_KWARGS)) - set(
        inspect.signature(fla.chunk_gated_delta_rule).parameters)
    # each has a documented rule: ignored, must be false, the state layout, or cp_context
    assert set(defaults) == (set(fla.IGNORED_KEYWORDS) | set(fla._FALSE_ONLY) | set(fla._STATE_KEYS)
                             | {"cp_context"})
    a = inputs()
    fla.chunk_gated_delta_rule(**a)
    fla.chunk_gated_delta_rule(**a, **defaults)
    assert len(rec.calls) == 2
    assert {n: x for n, x in rec.calls[0].items() if n not in ("out", "final")} == \
           {n: x for n, x in rec.calls[1].items() if n not in ("out", "final")}


@pytest.mark.parametrize("name", ["use_cache", "position_ids", "out", "output", "final_state", "seq_idx", "foo"])
def test_keywords_fla_does_not_know_are_refused_by_name(name, rec, copies_made):
    """A keyword FLA 0.6.0 does not take (a model's use_cache, a typo, an engine's output buffer) is
    named, never dropped; nothing is copied or launched.  (The transformers integration passes the
    layer FLA's keywords only: tests/test_transformers_wiring.py.)"""
    a = conv_views(inputs())
    copies_made.clear()
    with pytest.raises(errors.GdnArgumentError, match=f"^{name}: not a keyword of FLA 0.6.0"):
        fla.chunk_gated_delta_rule(**a, **{name: None})
    assert rec.calls == [] and copies_made == []
    # FLA's own keywords at their defaults are taken (test_every_fla_keyword_at_its_default_is_accepted)
    fla.chunk_gated_delta_rule(**inputs(), chunk_size=32, cu_seqlens_cpu=None)
    assert len(rec.calls) == 1


@pytest.mark.parametrize("kw,arg,cls", [
    (dict(head_first=True), "head_first", errors.GdnArgumentError),
    (dict(head_first=1), "head_first", errors.GdnArgumentError),
    (dict(use_gate_in_kernel=True), "use_gate_in_kernel", errors.GdnArgumentError),
    (dict(use_beta_sigmoid_in_kernel=True), "use_beta_sigmoid_in_kernel", errors.GdnArgumentError),
    (dict(allow_neg_eigval=np.bool_(True)), "allow_neg_eigval", errors.GdnArgumentError),
    (dict(cp_context=object()), "cp_context", errors.GdnArgumentError),
    (dict(chunk_size=128), "chunk_size", errors.GdnArgumentError),
    (dict(chunk_size="64"), "chunk_size", errors.GdnArgumentError),
    (dict(seq_idx=torch.zeros(1, 2 * T, dtype=torch.int32)), "seq_idx", errors.GdnArgumentError),
    (dict(state_v_first="yes"), "state_v_first", errors.GdnTypeError),
    (dict(transpose_state_layout=2), "transpose_state_layout", errors.GdnTypeError),
    (dict(state_v_first=True, transpose_state_layout=False), "state_v_first", errors.GdnArgumentError),
])
def test_values_the_kernels_cannot_honour_are_rejected(kw, arg, cls, rec, copies_made):
    a = conv_views(inputs())
    copies_made.clear()
    with pytest.raises(cls) as e:
        fla.chunk_gated_delta_rule(**a, **kw)
    assert str(e.value).startswith(f"{arg}:"), str(e.value)
    assert rec.calls == [] and copies_made == []


@pytest.mark.parametrize("key", ["state_v_first", "transpose_state_layout"])
def test_state_v_first_runs_the_vk_layout(key, rec):
    """state_v_first=True (FLA 0.6.0; transpose_state_layout its old name): states [N, Hv, V, K],
    prefill()'s "vk" pools."""
    a = inputs()
    o, s = fla.chunk_gated_delta_rule(**a, **{key: True})
    (call,) = rec.calls
    assert call["state_layout"] == "vk" and call["initial_state"] is a["initial_state"] and call["final"] is s
    assert s.shape == (B, HV, D, D)
    fla.chunk_gated_delta_rule(**a, state_v_first=True, transpose_state_layout=True)
    assert rec.calls[1]["state_layout"] == "vk"


def test_explain_copies_takes_the_layers_arguments():
    """explain_copies has the layer's signature, so a call is explained by renaming the function."""
    assert inspect.signature(fla.explain_copies).parameters == inspect.signature(
        fla.chunk_gated_delta_rule).parameters


def test_copies_are_logged(rec, caplog):
    a = conv_views(inputs())
    with caplog.at_level("DEBUG", logger="gdn_prefill"):
        fla.chunk_gated_delta_rule(**a)
    msgs = [r.getMessage() for r in caplog.records if "copied" in r.getMessage()]
    assert len(msgs) == 1 and all(f"{n}: last dim has stride {T}" in msgs[0] for n in "qkv"), msgs


def test_recorder_matches_the_extension_entry():
    """The recorder stands in for the extension's _prefill_fla: the same parameters, in order (a
    change there must change the recorder, or these tests would route a call the layer no longer
    makes)."""
    from gdn_prefill import _ext
    ours = list(inspect.signature(Recorder._prefill_fla).parameters)[1:]
    theirs = list(inspect.signature(_ext._prefill_fla).parameters)
    assert len(ours) == len(theirs) == 13
    assert theirs[:6] == ["q", "k", "v", "g", "beta", "out"] and theirs[9] == "cu_seqlens"
