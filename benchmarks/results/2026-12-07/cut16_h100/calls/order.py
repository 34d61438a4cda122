"""16/48 1 x 32K: the rule's serial plan (prefill()) against the same plan forced (_launch_stages),
timed in the order F R F R R F (does the row timed second lose by ~4 % to the order, not the path?)."""
import sys
import torch
import gdn_prefill
from gdn_prefill import _ext, grids, reference as ref
from gdn_prefill.bench.inputs import draw_gates
sys.path.insert(0, "benchmarks")
from bench_segments import _graph_us

hk, hv, T = [int(x) for x in (sys.argv[1:] or ["16", "48", "32768"])]
sets = [ref.make_inputs([T], hk, hv, seed=s, device="cuda", state="dense", l2norm_inputs=True) for s in range(3)]
for s, x in enumerate(sets):
    gen = torch.Generator(device="cuda").manual_seed(1000 + s)
    x["g"] = draw_gates("fast", T, hv, lambda *shape: torch.randn(*shape, generator=gen, device="cuda"))
outs = [torch.empty(T, hv, 128, dtype=torch.bfloat16, device="cuda") for _ in sets]
ws = torch.empty(gdn_prefill.workspace_bytes(T, 1, hv), dtype=torch.uint8, device="cuda")
x = sets[0]
print(gdn_prefill.explain(x["q"], x["k"], x["v"], x["g"], x["beta"], outs[0], x["state"], cu_seqlens=x["cu_seqlens"],
                          max_seqlen=T)["plan"]["name"])
print("rule", _ext._builds(x["q"], x["k"], x["v"], x["g"], x["beta"], outs[0], x["state"], cu_seqlens=x["cu_seqlens"],
                           max_seqlen=T), "forced", _ext._builds(x["q"], x["k"], x["v"], x["g"], x["beta"], outs[0],
                           x["state"], cu_seqlens=x["cu_seqlens"], max_seqlen=T, fused=1))


def forced(i):
    y = sets[i]
    _ext._launch_stages(("recompute_wu", "spine"), y["q"], y["k"], y["v"], y["g"], y["beta"], outs[i], y["state"],
                        cu_seqlens=y["cu_seqlens"], spine="wgmma", workspace=ws, max_seqlen=T, fused=1,
                        overlap_wu_ctas=0)


def rule(i):
    y = sets[i]
    gdn_prefill.prefill(y["q"], y["k"], y["v"], y["g"], y["beta"], outs[i], y["state"], cu_seqlens=y["cu_seqlens"],
                        workspace=ws, max_seqlen=T)


for name in "FRFRRF":
    f = forced if name == "F" else rule
    print(f"{hk}/{hv} 1x{T} {name}: {_graph_us([lambda i=i: f(i) for i in range(3)]):.1f} us", flush=True)
