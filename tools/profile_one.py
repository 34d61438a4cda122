"""One prefill (B=1, T=8192, Hk/Hv=16/32) for a profiler to look at: ncu -k regex:... python tools/profile_one.py"""
import torch

import gdn_prefill
from gdn_prefill import reference as ref

inp = ref.make_inputs([8192], 16, 32, seed=0, device="cuda", state="dense", l2norm_inputs=True)
out = torch.empty_like(inp["v"])
for _ in range(2):
    gdn_prefill.prefill(inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], out, inp["state"],
                        cu_seqlens=inp["cu_seqlens"], spine="wgmma")
torch.cuda.synchronize()
print("done")
