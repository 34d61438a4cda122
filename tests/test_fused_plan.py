"""The fused-output plan: which launches prefill() makes, and why (CPU only: explain()).

spine="wgmma" with q, k, v and out 16-byte aligned (token / head strides multiples of 8
elements) runs two kernels: recompute_wu's _pqk build (it writes the in-chunk attention and
Tu = (I + A)^-1 and beta32 instead of W and U) and spine_rs_o* (the spine forms Vnew from Tu and V
and computes the chunk output itself: no h, no vnew, no fwd_o).  Anything else runs the unfused plan, and explain() says why.
"""
from __future__ import annotations

import math

import pytest
import torch

import gdn_prefill
from gdn_prefill import _ext, errors, grids

D = 128


def problem(T=200, Hk=2, Hv=4, beta=torch.float32, odd=(), device="cpu"):
    bf = torch.bfloat16

    def tensor(H, name):
        if name in odd:     # token stride H*D + 3: rows 2-byte aligned only
            return torch.zeros(T, H * D + 3, dtype=bf, device=device)[:, :H * D].view(T, H, D)
        return torch.zeros(T, H, D, dtype=bf, device=device)
    q, k, v, out = tensor(Hk, "q"), tensor(Hk, "k"), tensor(Hv, "v"), tensor(Hv, "out")
    return ((q, k, v, torch.zeros(T, Hv, device=device), torch.zeros(T, Hv, dtype=beta, device=device), out),
            torch.tensor([0, 70, T], dtype=torch.int32, device=device))


def names(plan):
    return [k["name"] for k in plan["kernels"]]


@pytest.mark.parametrize("layout", ["kv", "vk"])
@pytest.mark.parametrize("spine", ["auto", "wgmma"])
def test_aligned_inputs_run_two_kernels(spine, layout):
    args, cu = problem()
    st = torch.empty(2, 4, D, D)
    plan = gdn_prefill.explain(*args, st, cu_seqlens=cu, spine=spine, state_layout=layout)
    assert plan["chosen"] == "wgmma" and plan["fused_output"] == "runs"
    assert names(plan) == ["recompute_wu_bf16_betaf32_a16_pqk", f"spine_rs_o_{layout}"]


def test_bf16_beta_takes_its_pqk_build():
    args, cu = problem(beta=torch.bfloat16)
    assert names(gdn_prefill.explain(*args, cu_seqlens=cu, spine="wgmma"))[0] == "recompute_wu_bf16_betabf16_a16_pqk"


@pytest.mark.parametrize("odd", ["q", "v", "out"])
def test_unaligned_tensor_runs_three_kernels_and_says_which(odd):
    args, cu = problem(odd=(odd,))
    plan = gdn_prefill.explain(*args, cu_seqlens=cu, spine="wgmma")
    assert plan["chosen"] == "wgmma"
    assert plan["fused_output"].startswith(f"{odd}: the fused output needs a 16-byte aligned base")
    assert names(plan) == ["recompute_wu_bf16_betaf32", "spine_wgmma_kv", "fwd_o_bf16"]


def test_scalar_spine_runs_three_kernels():
    args, cu = problem()
    plan = gdn_prefill.explain(*args, cu_seqlens=cu, spine="scalar")
    assert "only the wgmma spine" in plan["fused_output"]
    assert names(plan)[1:] == ["spine_scalar_kv", "fwd_o_bf16_a16"]


def test_workspace_of_each_plan():
    """Each plan carves only its own tensors: the fused plan gcum, rq, rk, ready, tu, pqk, order and beta32;
    the segmented plan those and maps, seg_state; the unfused plan gcum, rq, rk, ready, w, u, vnew
    and h.  Within a plan they do not overlap and fit in its workspace bytes; workspace_bytes()
    without a plan serves every one, the segmented plan at any segment length the planner may pick
    (at most GDN_SEG_MAX_CTAS / 2 segment slots x heads)."""
    T, N, Hv = 300, 3, 4
    fused_set = {"gcum", "rq", "rk", "ready", "tu", "pqk", "order", "beta32"}
    want = {"fused": fused_set, "segmented": fused_set | {"maps", "seg_state"},
            "unfused": {"gcum", "rq", "rk", "ready", "w", "u", "vnew", "h"}}
    M = grids.segment_slots(T, N, 1)          # one chunk per segment: the most slots
    kw = {"fused": dict(fused=True), "segmented": dict(fused=True, seg_chunks=1), "unfused": dict(fused=False)}
    for name in want:
        lay = gdn_prefill.workspace_layout(T, N, Hv, **kw[name])
        assert set(lay) == want[name]
        size = {"float32": 4, "int32": 4, "bfloat16": 2}
        spans = sorted((off, off + size[dt] * math.prod(shape)) for off, shape, dt in lay.values())
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))           # disjoint
        bound = (_ext._segmented_workspace_bytes(T, N, Hv, 1) if name == "segmented"
                 else gdn_prefill.workspace_bytes(T, N, Hv, fused=kw[name]["fused"]))
        assert spans[-1][1] <= bound
    seg = gdn_prefill.workspace_layout(T, N, Hv, seg_chunks=1)
    assert seg["maps"][1:] == ((2 * M, Hv, 128, 128), "float32") and seg["seg_state"][1:] == ((M, Hv, 128, 128), "float32")
    for name in ("tu", "pqk"):
        assert gdn_prefill.workspace_layout(T, N, Hv)[name][1:] == ((T, Hv, 64), "bfloat16")
    assert gdn_prefill.workspace_layout(T, N, Hv)["order"][1:] == ((N,), "int32")   # one per sequence
    need = {f: gdn_prefill.workspace_bytes(T, N, Hv, fused=f) for f in (True, False)}
    assert need[True] < need[False] <= gdn_prefill.workspace_bytes(T, N, Hv)
    # the segmented plan at the planner's smallest segments for this call fits the bound
    assert _ext._segmented_workspace_bytes(T, N, Hv, 1) <= gdn_prefill.workspace_bytes(T, N, Hv)
    # without two chunks of tokens nothing is segmented: the bound is the larger plan's
    assert gdn_prefill.workspace_bytes(100, 1, Hv) == max(gdn_prefill.workspace_bytes(100, 1, Hv, fused=f)
                                                          for f in (True, False))
    # at 1 x 65536, Hv = 32: the fused plan needs about a fifth of the unfused plan's bytes
    assert gdn_prefill.workspace_bytes(65536, 1, 32, fused=True) < 0.25 * gdn_prefill.workspace_bytes(65536, 1, 32)


@pytest.mark.gpu
@pytest.mark.parametrize("odd", ["q", "out"])
def test_stage_hook_forcing_a_fused_plan_the_guard_rejects_raises_the_guards_reason(odd):
    """The fused plan forced through the stage hook on inputs its guard rejects (rows 2-byte
    aligned): GdnSpineError with the guard's reason, not a missing-build error, raised before any
    launch (out untouched)."""
    args, cu = problem(odd=(odd,), device="cuda")
    out = args[-1]
    out.fill_(7.0)
    ws = torch.empty(gdn_prefill.workspace_bytes(200, 2, 4), dtype=torch.uint8, device="cuda")
    with pytest.raises(errors.GdnSpineError, match=f"fused: {odd}: the fused output needs a 16-byte aligned base"):
        _ext._launch_stages(("recompute_wu", "spine"), *args, cu_seqlens=cu, workspace=ws, fused=1)
    torch.cuda.synchronize()
    assert bool((out == 7.0).all())


def test_stage_hook_rejects_a_bad_fused_code_before_anything_else():
    args, cu = problem()
    with pytest.raises(errors.GdnArgumentError, match="fused: must be -1"):
        _ext._launch_stages(("spine",), *args, cu_seqlens=cu, workspace=torch.empty(1), fused=3)
