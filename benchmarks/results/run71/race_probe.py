# racecheck probe (run 71): which spine_rs build / plan shows the table hazards of runs 68-70
import sys, torch, gdn_prefill
from gdn_prefill import reference as ref
case = sys.argv[1]
lens = {"solo_reuse": [2100, 70], "pair_serial": [300] * 17, "pair_overlap": [2100, 70]}[case]
inp = ref.make_inputs(lens, 2, 4, seed=6, device="cuda", state="dense", l2norm_inputs=True)
out = torch.empty(inp["v"].shape, dtype=torch.bfloat16, device="cuda")
st = inp["state"].clone()
args = (inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], out, st)
e = gdn_prefill.explain(*args, cu_seqlens=inp["cu_seqlens"])
print(case, {k: v for k, v in e.items() if any(w in k for w in ("spine", "pair", "overlap", "kernel", "variant"))})
gdn_prefill.prefill(*args, cu_seqlens=inp["cu_seqlens"])
torch.cuda.synchronize()
print("case done")
