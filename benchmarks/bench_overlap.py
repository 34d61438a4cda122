"""The overlap plan against the serial plan: stage 1's workers build beside the register-state spine,
on the rule's CTAs (one per SM the spine leaves) and on fewer.

    python benchmarks/bench_overlap.py [--shapes 1x1K,1x2K,1x8K,1x64K] [--heads 16/32] [--build solo|pair|dual]
                                       [--ctas rule,48,32] [--json PATH] [--md PATH]

For each shape, the fused plan (recompute_wu + spine_rs_o) serially (the baseline), then as the
overlap plan with stage 1's workers on each count of CTAs ("rule": the SMs the spine leaves, the
launcher's rule), timed by bench_prefill's graph harness (one CUDA graph per buffer set, 3 sets,
replayed round-robin; median of CUDA-event timings).  The launcher runs the plan from
GDN_OVERLAP_MIN_SLOTS slots on (gdn_abi.h); short shapes are timed below that minimum too.  Needs a
Hopper GPU; without one it says so and exits 0.
"""
from __future__ import annotations

import argparse
import datetime
import sys

from gdn_prefill import bench, grids
from gdn_prefill.bench import write_json, write_text
from gdn_prefill.bench.cases import parse_count, parse_heads


def time_plan(B: int, T: int, hk: int, hv: int, wu_ctas: int, rs_build: int = -1) -> dict:
    """The fused plan timed with stage 1's workers build on `wu_ctas` CTAs (0: the serial plan)."""
    import torch

    import gdn_prefill
    from gdn_prefill import _ext, reference as ref
    from gdn_prefill.bench import WARM_S, _time_impl
    lens = [T] * B
    sets = [ref.make_inputs(lens, hk, hv, seed=s, device="cuda", state="dense", l2norm_inputs=True) for s in range(3)]
    N, Ttot = B, B * T
    cb = grids.chunk_slots(Ttot, N)
    ws = torch.empty(gdn_prefill.workspace_bytes(Ttot, N, hv), dtype=torch.uint8, device="cuda")
    outs = [torch.empty(Ttot, hv, 128, dtype=torch.bfloat16, device="cuda") for _ in sets]

    def call(i):
        x = sets[i]
        _ext._launch_stages(("recompute_wu", "spine"), x["q"], x["k"], x["v"], x["g"], x["beta"], outs[i], x["state"],
                            cu_seqlens=x["cu_seqlens"], spine="wgmma", workspace=ws, fused=1, overlap_wu_ctas=wu_ctas,
                            rs_build=rs_build)
    # bench_prefill's harness: eager warm-up (the modules load before any capture), one graph per
    # buffer set replayed round-robin, median of CUDA-event times, after WARM_S of its own calls
    # (the card's sustained, power-limited clock: docs/PERFORMANCE.md, measuring)
    t = _time_impl([lambda i=i: call(i) for i in range(len(sets))], ("graph",), budget_s=0.3, min_reps=20,
                   max_reps=50, warm_s=WARM_S)
    if "graph_us" not in t:
        raise RuntimeError(t.get("graph_error", "graph timing failed"))
    shape = f"{B}x{T // 1024}K" if T % 1024 == 0 else f"{B}x{T}"
    return dict(shape=shape, heads=f"{hk}/{hv}", chunk_slots=cb, wu_ctas=wu_ctas, rs_build=rs_build,
                us=t["graph_us"], reps=t["graph_stats"]["reps"])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="1x1K,1x2K,1x8K,1x64K", help="comma list of BxT (T may end in K)")
    ap.add_argument("--heads", default="16/32", help="Hk/Hv")
    ap.add_argument("--build", choices=("rule",) + grids.RS_BUILDS, default="rule",
                    help="the register-state spine's build: the launcher's rule (pair wherever the overlap plan runs) or "
                         "forced solo / pair (a head's two CTAs as a multicasting cluster) / dual (one CTA "
                         "per head, two chains)")
    ap.add_argument("--ctas", default="rule", help="comma list of workers CTA counts ('rule': the SMs the spine "
                                                   "leaves); the serial plan is always timed")
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--md", help="write a markdown table here")
    a = ap.parse_args(argv)
    hk, hv = parse_heads(a.heads)
    counts = a.ctas.split(",")
    if not all(c == "rule" or (c.isdigit() and int(c) >= 1) for c in counts):
        ap.error("--ctas: each count must be 'rule' or a positive number")
    shapes = [(int(b), parse_count(t)) for b, t in (s.split("x") for s in a.shapes.split(","))]
    if bench.script_cannot_time("bench_overlap"):
        return 0
    import torch
    from gdn_prefill import _ext
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows = []
    for B, T in shapes:
        if not _ext._overlap_fits_rule(B, hv, sms):
            print(f"{B}x{T}: the spine's CTAs would hold more than half of the SMs (the rule's balance); skipped")
            continue
        build = -1 if a.build == "rule" else grids.RS_BUILDS.index(a.build)
        rule = sms - 2 * B * hv
        for c in [0] + [rule if c == "rule" else int(c) for c in counts]:
            r = time_plan(B, T, hk, hv, c, build)
            rows.append(r)
            print(f"{r['shape']} workers {r['wu_ctas']:4d} CTAs: {r['us']:8.1f} us", flush=True)
    meta = dict(card=torch.cuda.get_device_name(), date=datetime.date.today().isoformat(), torch=torch.__version__,
                spine_build=a.build,
                method="fused plan through _ext._launch_stages(overlap_wu_ctas=...), gdn_prefill.bench's "
                       "graph harness (a CUDA graph per buffer set, replayed round-robin, median of 20-50 "
                       "CUDA-event timings)")
    lines = [f"Overlap plan — {meta['card']}, {meta['date']}, Hk/Hv = {a.heads}, {meta['method']}; "
             f"register-state spine build: {a.build}", "",
             "| shape | chunk slots | workers CTAs (0: serial) | µs | vs serial |", "|---|---|---|---|---|"]
    base = {r["shape"]: r["us"] for r in rows if r["wu_ctas"] == 0}
    for r in rows:
        lines.append(f"| {r['shape']} | {r['chunk_slots']} | {r['wu_ctas']} | {r['us']:.1f} | "
                     f"{r['us'] / base[r['shape']]:.3f} |")
    table = "\n".join(lines)
    print(table)
    if a.json:
        write_json(dict(meta=meta, rows=rows), a.json)
    if a.md:
        write_text(table + "\n", a.md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
