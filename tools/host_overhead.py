"""Host cost of one prefill() call: a tiny problem (64 tokens, 16/32 heads), wall clock.

Bursts of 100 calls (400 launches, within the driver's launch queue, so the host never waits
for the GPU inside a burst), synchronised between bursts outside the timed region.
"""
import time

import torch

import gdn_prefill
from gdn_prefill import reference as ref

inp = ref.make_inputs([64], 16, 32, seed=0, device="cuda", state="dense", l2norm_inputs=True)
out = torch.empty_like(inp["v"])
ws = torch.empty(gdn_prefill.workspace_bytes(64, 1, 32), dtype=torch.uint8, device="cuda")
args = (inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], out, inp["state"])
kw = dict(cu_seqlens=inp["cu_seqlens"], workspace=ws)
for _ in range(50):
    gdn_prefill.prefill(*args, **kw)
torch.cuda.synchronize()
per_call = []
for _ in range(21):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(100):
        gdn_prefill.prefill(*args, **kw)
    per_call.append((time.perf_counter() - t0) * 1e4)  # us per call
per_call.sort()
print(f"prefill() host cost: median {per_call[10]:.1f} us per call, min {per_call[0]:.1f} "
      "(21 bursts of 100 calls, synchronised between bursts)")
