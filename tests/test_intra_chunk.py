"""Issue 42's one-warpgroup stage 1 (cute_kernels/intra_chunk.py), a measurement build.

CPU: its objects are what the go / no-go assumes (one TF32 pass for the merges, no local memory,
registers within the fused kernel's budget for the role).  GPU, through the stage hook: run after
recompute_wu over the same workspace, it rewrites gcum, rq, rk, beta32, Tu and P; those must
match recompute_wu's own (Tu and P to bf16 rounding, the rest to fp32 rounding) and the spine's
outputs from them must stay within the oracle's bound.
"""
from __future__ import annotations

import os
import re

import pytest
import torch

import gdn_prefill
from gdn_prefill import _manifest
from gdn_prefill import reference as ref

from gdn_prefill import sass

needs_nvdisasm = pytest.mark.skipif(sass.nvdisasm() is None,
                                    reason="nvdisasm not installed (pip install nvidia-cuda-nvdisasm)")
VARIANTS = ("intra_chunk", "intra_chunk_smem", "intra_chunk_smem_r104")


def _built(v):
    return v in gdn_prefill.compiled_variants()


@needs_nvdisasm
@pytest.mark.parametrize("v", VARIANTS)
def test_intra_chunk_objects(v):
    """One TF32 pass (18 mma.sync per thread, FLA's precision) and 16 warpgroup MMAs (K K^T and
    Q K^T, 8 k-steps each).  No build holds local memory (test_sass checks that of every build).
    The _r104 build keeps both setmaxnreg (ptxas drops one whose region it cannot isolate), the
    I/O warpgroup at 56 registers and the role's at 104, and its role code stays within them."""
    if not _built(v):
        pytest.skip(f"{v} not in this build")
    (cubin,) = _manifest.cubins(v)
    ops = [re.sub(r"^@!?U?P\w+\s+", "", x["text"]).split()[0] for x in sass.instructions(cubin)]
    assert ops.count("HMMA.1688.F32.TF32") == 18, ops
    assert ops.count("HGMMA.64x64x16.F32.BF16") == 16, ops
    res = sass.resources(cubin)[0]
    assert res["stack_frame"] == 0, res
    if v.endswith("_r104"):
        ins = sass.instructions(cubin)
        at = [i for i, x in enumerate(ins) if "USETMAXREG" in x["text"]]
        assert [ins[i]["text"].split()[-1] for i in at] == ["0x38", "0x68"], [ins[i]["text"] for i in at]
        used = max(int(r) for x in ins[at[1]:] for r in re.findall(r"\bR(\d+)\b", x["text"]))
        assert used < 104, used


def _views(ws, T, N, Hv):
    layout = gdn_prefill.workspace_layout(T, N, Hv, fused=True)
    dt = {"int32": torch.int32, "float32": torch.float32, "bfloat16": torch.bfloat16}
    out = {}
    for name in ("gcum", "rq", "rk", "beta32", "tu", "pqk"):
        off, shape, dtype = layout[name]
        n = 1
        for s in shape:
            n *= s
        out[name] = ws[off:off + n * dt[dtype].itemsize].view(dt[dtype]).view(shape)
    return out


@pytest.mark.gpu
@pytest.mark.parametrize("l2norm", [False, True])
@pytest.mark.parametrize("build", VARIANTS)
def test_intra_chunk_matches_stage_one_and_the_oracle(build, l2norm):
    if not _built(build):
        pytest.skip(f"{build} not in this build")
    from gdn_prefill import _ext
    inp = ref.make_inputs([1, 63, 64, 65, 1000, 300], 2, 4, seed=int.from_bytes(os.urandom(4), "little"),
                          device="cuda", state="dense", l2norm_inputs=not l2norm, beta_dtype=torch.bfloat16)
    T, N, Hv = inp["q"].shape[0], 6, 4
    ws = torch.zeros(gdn_prefill.workspace_bytes(T, N, Hv, fused=True), dtype=torch.uint8, device="cuda")
    args = (inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"])
    out = torch.full((T, Hv, 128), float("nan"), dtype=torch.bfloat16, device="cuda")
    kw = dict(cu_seqlens=inp["cu_seqlens"], use_qk_l2norm=l2norm, workspace=ws, fused=1, overlap_split=0)
    _ext._launch_stages(("recompute_wu",), *args, out, inp["state"].clone(), **kw)
    torch.cuda.synchronize()
    want = {k: v.clone() for k, v in _views(ws, T, N, Hv).items()}
    for v in _views(ws, T, N, Hv).values():
        v.zero_()
    state = inp["state"].clone()
    # the build alone over stage 1's workspace (w, u and the ranking stay recompute_wu's): what it
    # rewrites is compared, so a build that wrote nothing fails here
    _ext._launch_stages((build,), *args, out, state, **kw)
    torch.cuda.synchronize()
    got = _views(ws, T, N, Hv)
    for name in ("gcum", "rq", "rk", "beta32"):
        torch.testing.assert_close(got[name], want[name], rtol=1e-5, atol=1e-6, msg=name)
    for name in ("tu", "pqk"):
        if "smem" in build:
            # these builds leave Tu and P in shared memory, as the fused kernel would: the spine
            # below reads stage 1's
            assert not got[name].any(), name
            got[name].copy_(want[name])
        else:
            torch.testing.assert_close(got[name].float(), want[name].float(), rtol=2e-2, atol=2e-3, msg=name)
    _ext._launch_stages(("spine",), *args, out, state, **kw)
    torch.cuda.synchronize()
    with torch.device("cuda"):
        o_ref, s_ref = ref.chunked(*args, cu_seqlens=inp["cu_seqlens"], state=inp["state"], use_qk_l2norm=l2norm)
    assert torch.isfinite(out).all()
    assert ref.rel_err(out.double(), o_ref) <= 1e-2 and ref.rel_err(state.double(), s_ref) <= 1e-2
