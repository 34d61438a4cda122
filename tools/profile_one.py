"""One prefill for a profiler to look at (Hk/Hv = 16/32, wgmma spine), run twice:
    ncu -k regex:... python tools/profile_one.py [BxT]        (default 1x8192)"""
import sys

import torch

import gdn_prefill
from gdn_prefill import reference as ref

b, t = (int(x) for x in (sys.argv[1] if len(sys.argv) > 1 else "1x8192").split("x"))
inp = ref.make_inputs([t] * b, 16, 32, seed=0, device="cuda", state="dense", l2norm_inputs=True)
out = torch.empty_like(inp["v"])
for _ in range(2):
    gdn_prefill.prefill(inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], out, inp["state"],
                        cu_seqlens=inp["cu_seqlens"], spine="wgmma")
torch.cuda.synchronize()
print("done")
