"""One prefill for a profiler to look at (Hk/Hv = 16/32 unless given, wgmma spine), run twice:
    ncu -k regex:... python tools/profile_one.py [BxT] [fused|unfused|rule] [Hk/Hv]   (default 1x8192, the rule's plan)
("unfused" runs spine_wgmma + fwd_o, the spine of issue 4's microbenchmark; "fused" the fused
plan serially with the spine_rs_o build the prefill runs at that shape: pair at B=1, dual at B=8)"""
import sys

import torch

import gdn_prefill
from gdn_prefill import _ext
from gdn_prefill import reference as ref

b, t = (int(x) for x in (sys.argv[1] if len(sys.argv) > 1 else "1x8192").split("x"))
fused = {"fused": 1, "unfused": 0}.get(sys.argv[2] if len(sys.argv) > 2 else "", -1)
hk, hv = (int(x) for x in (sys.argv[3] if len(sys.argv) > 3 else "16/32").split("/"))
inp = ref.make_inputs([t] * b, hk, hv, seed=0, device="cuda", state="dense", l2norm_inputs=True)
out = torch.empty_like(inp["v"])
args = (inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], out, inp["state"])
ws = None if fused < 0 else torch.empty(gdn_prefill.workspace_bytes(b * t, b, hv), dtype=torch.uint8, device="cuda")
for _ in range(2):
    if fused < 0:
        gdn_prefill.prefill(*args, cu_seqlens=inp["cu_seqlens"], spine="wgmma")
    else:   # the stage hook (bench_spine's): one plan forced; the fused one serial (stage 1 wholly
        # first: ncu runs kernels one at a time, and the overlap plan's spine waits for stage 1's flags)
        _ext._launch_stages(("recompute_wu", "spine") + (() if fused else ("fwd_o",)), *args, cu_seqlens=inp["cu_seqlens"],
                            spine="wgmma", workspace=ws, fused=fused, overlap_split=0 if fused else -1,
                            rs_build=-1)   # the rule's build (its overlap plan's at B=1: pair)
torch.cuda.synchronize()
print("done")
