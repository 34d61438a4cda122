"""compute-sanitizer memcheck over a small varlen prefill with a pool and padding, and one in the
overlap plan."""
from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

pytestmark = pytest.mark.gpu

CASE = r"""
import torch, gdn_prefill
from gdn_prefill import reference as ref
inp = ref.make_inputs([1, 63, 64, 65, 0, 130], 2, 4, seed=5, device="cuda", state="pool", pad_every=3,
                      l2norm_inputs=True)
for spine in [s for s in ("scalar", "wgmma") if any(v.startswith("spine_" + s) for v in gdn_prefill.compiled_variants())]:
    for layout in ("kv",):
        out = torch.empty(inp["v"].shape, dtype=torch.bfloat16, device="cuda")
        st = inp["state"].clone()
        gdn_prefill.prefill(inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], out, st,
                            cu_seqlens=inp["cu_seqlens"], state_indices=inp["state_indices"], spine=spine)
        if spine == "wgmma":   # prefill() fused the output; the unfused plan too
            from gdn_prefill import _ext
            ws = torch.empty(gdn_prefill.workspace_bytes(inp["q"].shape[0], 6, 4), dtype=torch.uint8, device="cuda")
            _ext._launch_stages(("recompute_wu", "spine", "fwd_o"), inp["q"], inp["k"], inp["v"],
                                inp["g"], inp["beta"], out, st, cu_seqlens=inp["cu_seqlens"],
                                state_indices=inp["state_indices"], spine=spine, workspace=ws, fused=0)
# the overlap plan (2 sequences, 35 chunk slots: stage 1 split around the spine, ready flags)
inp = ref.make_inputs([2100, 70], 2, 4, seed=6, device="cuda", state="dense", l2norm_inputs=True)
if "spine_rs_o_kv" in gdn_prefill.compiled_variants():
    out = torch.empty(inp["v"].shape, dtype=torch.bfloat16, device="cuda")
    st = inp["state"].clone()
    assert gdn_prefill.explain(inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], out, st,
                               cu_seqlens=inp["cu_seqlens"])["overlap_split"] is not None
    gdn_prefill.prefill(inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], out, st, cu_seqlens=inp["cu_seqlens"])
torch.cuda.synchronize()
print("case done")
"""


def test_memcheck_clean():
    sanitizer = shutil.which("compute-sanitizer")
    if sanitizer is None:
        pytest.skip("compute-sanitizer is not on PATH")
    run = subprocess.run([sanitizer, "--tool", "memcheck", "--error-exitcode", "3", sys.executable, "-c", CASE],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0 and "case done" in run.stdout, run.stdout[-3000:] + run.stderr[-3000:]
    assert "ERROR SUMMARY: 0 errors" in run.stdout + run.stderr
