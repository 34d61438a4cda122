"""Scratch A/B (not part of the product): the single plan's graph-mode time on fixed rows for the
installed build; with --two also the two-launch plan.  One line per row, tagged."""
import argparse, sys, torch
import gdn_prefill
from gdn_prefill import _ext, bench
from gdn_prefill.bench import cases as bench_cases
from gdn_prefill import reference as ref

ap = argparse.ArgumentParser()
ap.add_argument("--tag", required=True)
ap.add_argument("--rows", default="8x4K:16/32,32x2K:16/32,4x2K:16/32,16x512:16/32,8x4K:8/16,16x512:8/16,16x512:4/8,1x8K:4/8")
ap.add_argument("--reps", type=int, default=20)
ap.add_argument("--two", action="store_true")
ap.add_argument("--l2norm", action="store_true")
ap.add_argument("--pool", action="store_true")
ap.add_argument("--both", action="store_true", help="engine style (l2norm + pool) then pre-normed, one process")
a = ap.parse_args()
modes = [(True, True), (False, False)] if a.both else [(a.l2norm, a.pool)]
for (a.l2norm, a.pool), row in ((m, r) for m in modes for r in a.rows.split(",")):
    s, heads = row.split(":")
    hk, hv = (int(x) for x in heads.split("/"))
    lens = [int(x) for x in s.split("+")] if "+" in s else bench_cases.parse_shape(s)
    inp = ref.make_inputs(lens, hk, hv, seed=0, device="cuda", state="pool" if a.pool else "dense", l2norm_inputs=not a.l2norm,
                          beta_dtype=torch.bfloat16)
    T, N = sum(lens), len(lens)
    ws = torch.empty(gdn_prefill.workspace_bytes(T, N, hv), dtype=torch.uint8, device="cuda")
    base = dict(cu_seqlens=inp["cu_seqlens"], workspace=ws, use_qk_l2norm=a.l2norm, max_seqlen=max(lens), state_indices=inp["state_indices"])
    res = {}
    for name, fused in ((("two", 1),) if a.two else ()) + (("single", 2),):
        builds = _ext._builds(inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"],
                              torch.empty(T, hv, 128, dtype=torch.bfloat16, device="cuda"), inp["state"],
                              cu_seqlens=inp["cu_seqlens"], fused=fused, max_seqlen=max(lens),
                              state_indices=inp["state_indices"])
        stages = ("fused",) if fused == 2 else \
            ("recompute_wu", "maps", "compose", "spine") if len(builds) == 4 else ("recompute_wu", "spine")
        out = torch.empty(T, hv, 128, dtype=torch.bfloat16, device="cuda")
        state = inp["state"].clone()
        args = (inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], out, state)
        call = lambda: _ext._launch_stages(stages, *args, spine="wgmma", fused=fused, **base)
        call(); torch.cuda.synchronize()
        result = (out.clone(), state.clone())
        res[name] = (bench.one_call_graph(call, a.reps)[0], result)
    t1, (o1, s1) = res["single"]
    nch = sum((l + 63) // 64 for l in lens) * hv
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    name = s if len(s) < 24 else f"mix{N}-{T}"
    line = f"AB {a.tag} l2={int(a.l2norm)} pool={int(a.pool)} {name} {heads} single {t1:.1f} us  SM-us/chunk {t1 * min(sms, N * hv) / nch:.2f}"
    if a.two:
        t2, (o2, s2) = res["two"]
        line += f"  two {t2:.1f}  ratio {t1 / t2:.3f}  d_o {ref.rel_err(o1.double(), o2.double()):.2e} d_s {ref.rel_err(s1.double(), s2.double()):.2e}"
    print(line, flush=True)
