"""Run 91 smoke: the dual build once, small, against solo bit for bit (a hang here stops the run)."""
import torch
import gdn_prefill
from gdn_prefill import _ext, reference as ref
inp = ref.make_inputs([300, 65, 1000], 2, 4, seed=1, device="cuda", state="dense", l2norm_inputs=True)
T = inp["q"].shape[0]
ws = torch.empty(gdn_prefill.workspace_bytes(T, 3, 4), dtype=torch.uint8, device="cuda")
res = []
for b in (0, 2):
    out, st = torch.empty_like(inp["v"]), inp["state"].clone()
    _ext._launch_stages(("recompute_wu", "spine"), inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], out, st,
                        cu_seqlens=inp["cu_seqlens"], spine="wgmma", workspace=ws, fused=1, overlap_split=0, rs_build=b)
    torch.cuda.synchronize()
    res.append((out, st))
print("smoke: out equal", torch.equal(res[0][0].view(torch.int16), res[1][0].view(torch.int16)),
      "state equal", torch.equal(res[0][1], res[1][1]))
