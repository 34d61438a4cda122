"""Where to split stage 1 around the register-state spine (the overlap plan): a sweep of the split slot.

    python benchmarks/bench_overlap.py [--shapes 1x1K,1x2K,1x8K,1x64K] [--heads 16/32] [--build solo|pair|dual]
                                       [--pcts 0,15,25,35,45,55,70 | --slots 2,4,8] [--json PATH] [--md PATH]

For each shape, the fused plan (recompute_wu + spine_rs_o) with stage 1 split at a fraction of
the chunk slots (0 %: the serial plan), timed by bench_prefill's graph harness (one CUDA graph
per buffer set, 3 sets, replayed round-robin; median of CUDA-event timings).  The launcher's
split is slot GDN_OVERLAP_SPLIT_SLOTS (at most the chunk slots), and it splits from GDN_OVERLAP_MIN_SLOTS
slots on (gdn_abi.h); this table is what those constants are chosen from (short shapes are
swept below that minimum too).  Needs a Hopper GPU; without one it says so and exits 0.
"""
from __future__ import annotations

import argparse
import datetime
import sys

from gdn_prefill import bench, grids
from gdn_prefill.bench import write_json, write_text
from gdn_prefill.bench.cases import parse_count, parse_heads

FRACTIONS = (0, 15, 25, 35, 45, 55, 70)


def time_split(B: int, T: int, hk: int, hv: int, split: int, rs_build: int = -1) -> dict:
    """The fused plan timed with stage 1 split at chunk slot `split` (0: the serial plan)."""
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
                            cu_seqlens=x["cu_seqlens"], spine="wgmma", workspace=ws, fused=1, overlap_split=split,
                            rs_build=rs_build)
    # bench_prefill's harness: eager warm-up (the side stream exists before any capture), one graph
    # per buffer set replayed round-robin, median of CUDA-event times, after WARM_S of its own calls
    # (the card's sustained, power-limited clock: docs/PERFORMANCE.md, measuring)
    t = _time_impl([lambda i=i: call(i) for i in range(len(sets))], ("graph",), budget_s=0.3, min_reps=20,
                   max_reps=50, warm_s=WARM_S)
    if "graph_us" not in t:
        raise RuntimeError(t.get("graph_error", "graph timing failed"))
    shape = f"{B}x{T // 1024}K" if T % 1024 == 0 else f"{B}x{T}"
    return dict(shape=shape, heads=f"{hk}/{hv}", chunk_slots=cb, split=split, rs_build=rs_build,
                us=t["graph_us"], reps=t["graph_stats"]["reps"])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="1x1K,1x2K,1x8K,1x64K", help="comma list of BxT (T may end in K)")
    ap.add_argument("--heads", default="16/32", help="Hk/Hv")
    ap.add_argument("--build", choices=("rule",) + grids.RS_BUILDS, default="rule",
                    help="the register-state spine's build: the launcher's rule (pair wherever the overlap plan runs) or "
                         "forced solo / pair (a head's two CTAs as a multicasting cluster) / dual (one CTA "
                         "per head, two chains)")
    ap.add_argument("--pcts", default=",".join(map(str, FRACTIONS)),
                    help="comma list of split percentages to time (0: the serial plan, the table's baseline)")
    ap.add_argument("--slots", help="comma list of split slots to time instead of percentages (the serial plan "
                                    "stays the baseline)")
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--md", help="write a markdown table here")
    a = ap.parse_args(argv)
    hk, hv = parse_heads(a.heads)
    pcts = sorted({0, *(int(x) for x in a.pcts.split(","))})      # 0 always: "vs serial" needs it
    if not all(0 <= x < 100 for x in pcts):
        ap.error("--pcts: each split percentage must be in [0, 100)")
    slots = sorted({int(x) for x in a.slots.split(",")}) if a.slots else []
    if not all(x >= 1 for x in slots):
        ap.error("--slots: each split slot must be >= 1 (the serial plan is always timed)")
    shapes = [(int(b), parse_count(t)) for b, t in (s.split("x") for s in a.shapes.split(","))]
    if bench.script_cannot_time("bench_overlap"):
        return 0
    import torch
    from gdn_prefill import _ext
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows = []
    for B, T in shapes:
        if not _ext._overlap_fits_rule(B, hv, sms):
            print(f"{B}x{T}: the spine's CTAs would hold more than half of the SMs (deadlock guard); skipped")
            continue
        build = -1 if a.build == "rule" else grids.RS_BUILDS.index(a.build)
        cb = grids.chunk_slots(B * T, B)
        # (the split % shown, the split slot): the requested percentages, or each slot's share
        points = ([(0, 0)] + [(round(100 * min(x, cb) / cb, 1), min(x, cb)) for x in slots] if slots
                  else [(p, cb * p // 100) for p in pcts])
        for pct, split in points:
            r = dict(time_split(B, T, hk, hv, split, build), pct=pct)
            rows.append(r)
            print(f"{r['shape']} split {r['pct']:5}% (slot {r['split']:5d} of {r['chunk_slots']}): {r['us']:8.1f} us",
                  flush=True)
    meta = dict(card=torch.cuda.get_device_name(), date=datetime.date.today().isoformat(), torch=torch.__version__,
                rule_slots=plan._C["GDN_OVERLAP_SPLIT_SLOTS"], spine_build=a.build,
                method="fused plan through _ext._launch_stages(overlap_split=...), gdn_prefill.bench's "
                       "graph harness (a CUDA graph per buffer set, replayed round-robin, median of 20-50 "
                       "CUDA-event timings)")
    lines = [f"Overlap split sweep — {meta['card']}, {meta['date']}, Hk/Hv = {a.heads}, {meta['method']}; "
             f"the launcher's rule: slot {meta['rule_slots']}; register-state spine build: {a.build}", "",
             "| shape | split % | split slot / slots | µs | vs serial |", "|---|---|---|---|---|"]
    base = {r["shape"]: r["us"] for r in rows if r["split"] == 0}
    for r in rows:
        lines.append(f"| {r['shape']} | {r['pct']} | {r['split']} / {r['chunk_slots']} | {r['us']:.1f} | "
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
