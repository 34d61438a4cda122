"""compute-sanitizer (memcheck, racecheck, synccheck) over a small varlen prefill with a pool and
padding, and one in the overlap plan, the single plan and the segmented plan (its maps cut and
whole; its SEGMENT pass solo and dual)."""
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
# where the overlap plan runs (2 sequences, 35 chunk slots): prefill()'s overlap plan on the rule's
# workers, then forced through the stage hook on 4 workers CTAs (stage 1's workers build beside the
# pair build, ready flags); a 33-chunk sequence reuses every ring slot, so racecheck sees each hand-over of a slot back
# to its loader; then serially the solo, pair and dual builds and the unfused plan (both
# spine_wgmma builds)
inp = ref.make_inputs([2100, 70], 2, 4, seed=6, device="cuda", state="dense", l2norm_inputs=True)
if "spine_rs_o_kv" in gdn_prefill.compiled_variants():
    from gdn_prefill import _ext
    args = (inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"],
            torch.empty(inp["v"].shape, dtype=torch.bfloat16, device="cuda"), inp["state"].clone())
    assert gdn_prefill.explain(*args, cu_seqlens=inp["cu_seqlens"])["plan"]["name"] == "overlap"
    gdn_prefill.prefill(*args, cu_seqlens=inp["cu_seqlens"])
    ws = torch.empty(gdn_prefill.workspace_bytes(inp["q"].shape[0], 2, 4), dtype=torch.uint8, device="cuda")
    _ext._launch_stages(("recompute_wu", "spine"), *args, cu_seqlens=inp["cu_seqlens"], spine="wgmma",
                        workspace=ws, fused=1, overlap_wu_ctas=4)
    for rs_build in (0, 1, 2):   # solo, pair, dual
        _ext._launch_stages(("recompute_wu", "spine"), *args, cu_seqlens=inp["cu_seqlens"], spine="wgmma",
                            workspace=ws, fused=1, overlap_wu_ctas=0, rs_build=rs_build)
    for wg in (1, 2):   # the unfused plan's latency and throughput spine builds
        _ext._launch_stages(("recompute_wu", "spine", "fwd_o"), *args, cu_seqlens=inp["cu_seqlens"], spine="wgmma",
                            workspace=ws, fused=0, warpgroups=wg)
    # the single plan's kernel: every ring slot reused (33 chunks), a partial last chunk, and the
    # mixed lengths of the first case with a pool and padding
    if any(v.startswith("single_prefill_") for v in gdn_prefill.compiled_variants()):
        _ext._launch_stages(("single",), *args, cu_seqlens=inp["cu_seqlens"], spine="wgmma", workspace=ws,
                            fused=2)
        mix = ref.make_inputs([1, 63, 64, 65, 0, 130], 2, 4, seed=5, device="cuda", state="pool", pad_every=3,
                              l2norm_inputs=True)
        _ext._launch_stages(("single",), mix["q"], mix["k"], mix["v"], mix["g"], mix["beta"],
                            torch.empty(mix["v"].shape, dtype=torch.bfloat16, device="cuda"), mix["state"].clone(),
                            cu_seqlens=mix["cu_seqlens"], state_indices=mix["state_indices"], spine="wgmma",
                            workspace=ws, fused=2, use_qk_l2norm=True)
    # the segmented plan in segments of 8 chunks: make_inputs' gates decay every head within a few
    # chunks, so each MAPS CTA walks back and cuts its map (spine_rs._map_cut); then gates near 0,
    # where none is cut and the maps run whole; the SEGMENT pass solo and dual (rs_build 0, 2)
    if any(v.startswith("spine_rs_maps_") for v in gdn_prefill.compiled_variants()):
        wss = torch.empty(max(ws.numel(), _ext._segmented_workspace_bytes(inp["q"].shape[0], 2, 4, 8)),
                          dtype=torch.uint8, device="cuda")
        for g, rs_build in ((inp["g"], 0), (inp["g"] / 1000, 0), (inp["g"], 2)):
            _ext._launch_stages(("recompute_wu", "maps", "compose", "spine"), inp["q"], inp["k"], inp["v"], g,
                                inp["beta"], args[5], args[6], cu_seqlens=inp["cu_seqlens"], spine="wgmma",
                                workspace=wss, seg_chunks=8, rs_build=rs_build)
torch.cuda.synchronize()
print("case done")
"""


@pytest.mark.parametrize("tool", ["memcheck", "racecheck", "synccheck"])
def test_sanitizer_clean(tool):
    """memcheck: out-of-bounds and misaligned accesses; racecheck: shared-memory hazards between
    threads not ordered by a barrier (the mbarrier hand-overs of the TMA rings, the coefficient
    tables, the staged outputs); synccheck: barriers reached by a divergent or partial set of
    threads."""
    sanitizer = shutil.which("compute-sanitizer")
    if sanitizer is None:
        pytest.skip("compute-sanitizer is not on PATH")
    run = subprocess.run([sanitizer, "--tool", tool, "--error-exitcode", "3", sys.executable, "-c", CASE],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0 and "case done" in run.stdout, run.stdout[-3000:] + run.stderr[-3000:]
    summary = {"memcheck": "ERROR SUMMARY: 0 errors", "racecheck": "RACECHECK SUMMARY: 0 hazards",
               "synccheck": "ERROR SUMMARY: 0 errors"}[tool]
    assert summary in run.stdout + run.stderr, (run.stdout + run.stderr)[-3000:]
