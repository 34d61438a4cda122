"""Scratch: one engine-style call of gdn (single plan via max_seqlen) or FlashInfer, twice (ncu profiles the
second): python lab/one.py gdn|fi BxT Hk/Hv"""
import sys, torch
import gdn_prefill
from gdn_prefill import reference as ref
impl, shape, heads = sys.argv[1], sys.argv[2], sys.argv[3]
b, t = (int(x) for x in shape.split("x"))
hk, hv = (int(x) for x in heads.split("/"))
inp = ref.make_inputs([t] * b, hk, hv, seed=0, device="cuda", state="dense", l2norm_inputs=True)
out = torch.empty_like(inp["v"])
if impl == "gdn":
    f = lambda: gdn_prefill.prefill(inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], out, inp["state"],
                                    cu_seqlens=inp["cu_seqlens"], max_seqlen=t)
else:
    from flashinfer.gdn_prefill import chunk_gated_delta_rule as fn
    alpha = inp["g"].exp().contiguous(); st = inp["state"].transpose(-1, -2).contiguous()
    cu = inp["cu_seqlens"].long(); ost = torch.empty_like(st)
    f = lambda: fn(inp["q"], inp["k"], inp["v"], alpha, inp["beta"], scale=None, initial_state=st,
                   output_final_state=True, cu_seqlens=cu, output=out, output_state=ost)
f(); torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStart(); f(); torch.cuda.synchronize(); torch.cuda.cudart().cudaProfilerStop()
torch.cuda.synchronize(); print("done", impl)
