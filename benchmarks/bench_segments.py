"""The segmented plan against the serial one: a sweep of the segment count, each pass timed alone.

    python benchmarks/bench_segments.py [--shapes 1x8K,1x32K] [--heads 2/4,4/8] [--segments 2,4,8,16]
                                        [--gates fast|mixed|slow] [--seg-builds solo,dual]
                                        [--json PATH] [--md PATH]

For each shape and head count: the serial fused plan (recompute_wu + spine_rs_o, the rule's
build), the segmented plan (recompute_wu, spine_rs_maps, compose, spine_rs_o_seg) at each
segment count of the longest sequence (segments of ceil(chunks / count) chunks; --seg-builds: the
SEGMENT pass solo, the planner's, or dual, a CTA per segment and head, forced), the planner's
own choice (prefill()), and, at the planner's segment length, each of its four launches alone (the
workspace already holds what the earlier ones wrote).  Beside each time, the cost model's
prediction (gdn_abi.h GDN_MODEL_*): this table is what those constants are fitted from.  Timed by
bench_prefill's graph harness (one CUDA graph per buffer set, 3 sets, replayed round-robin; median
of CUDA-event timings).  --gates draws g as bench_prefill does (gdn_prefill.bench.inputs.GATES):
the segmented plan's maps are cut per head where its gates have decayed, so its time depends on them.
Needs a Hopper GPU; without one it says so and exits 0.
"""
from __future__ import annotations

import argparse
import datetime
import sys

from gdn_prefill import _abi, bench, grids
from gdn_prefill.bench import table_report
from gdn_prefill.bench.cases import parse_count, parse_heads
from gdn_prefill.bench.inputs import GATES

STAGES = ("recompute_wu", "maps", "compose", "spine")
SEG_BUILDS = {"solo": 0, "dual": 2}     # the SEGMENT pass's builds (the hooks' rs_build codes)


def _graph_us(calls, warm_s=None) -> float:
    from gdn_prefill.bench import WARM_S, _time_impl
    t = _time_impl(calls, ("graph",), budget_s=0.25, min_reps=20, max_reps=50, warm_s=WARM_S if warm_s is None else warm_s)
    if "graph_us" not in t:
        raise RuntimeError(t.get("graph_error", "graph timing failed"))
    return t["graph_us"]


def time_shape(B: int, T: int, hk: int, hv: int, counts: list[int], passes: bool, gates: str = "fast",
               seg_builds: tuple[str, ...] = ("solo",)) -> list[dict]:
    """Rows for one shape: serial, the planner's choice, and each segment count."""
    import torch

    import gdn_prefill
    from gdn_prefill import _ext, reference as ref
    from gdn_prefill.bench.inputs import draw_gates
    lens = [T] * B
    sets = [ref.make_inputs(lens, hk, hv, seed=s, device="cuda", state="dense", l2norm_inputs=True) for s in range(3)]
    for s, x in enumerate(sets):
        gen = torch.Generator(device="cuda").manual_seed(1000 + s)
        x["g"] = draw_gates(gates, B * T, hv, lambda *shape: torch.randn(*shape, generator=gen, device="cuda"))
    N, Ttot = B, B * T
    chunks = -(-T // grids.CHUNK)
    outs = [torch.empty(Ttot, hv, 128, dtype=torch.bfloat16, device="cuda") for _ in sets]
    shape = f"{B}x{T // 1024}K" if T % 1024 == 0 else f"{B}x{T}"
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows = []

    def run(stages, ws, **kw):
        def call(i):
            x = sets[i]
            _ext._launch_stages(stages, x["q"], x["k"], x["v"], x["g"], x["beta"], outs[i], x["state"],
                                cu_seqlens=x["cu_seqlens"], spine="wgmma", workspace=ws, max_seqlen=T, **kw)
        return [lambda i=i: call(i) for i in range(len(sets))]

    ws = torch.empty(gdn_prefill.workspace_bytes(Ttot, N, hv), dtype=torch.uint8, device="cuda")
    serial_ns = _ext._model_ns(Ttot, N, hv, chunks, 0, sms)[0]
    rows.append(dict(shape=shape, heads=f"{hk}/{hv}", plan="serial", seg_chunks=None, segments=1,
                     us=_graph_us(run(("recompute_wu", "spine"), ws, fused=1, overlap_wu_ctas=0)),
                     predicted_us=serial_ns / 1e3))
    x = sets[0]
    info = gdn_prefill.explain(x["q"], x["k"], x["v"], x["g"], x["beta"], outs[0], x["state"],
                               cu_seqlens=x["cu_seqlens"], max_seqlen=T)
    rule = info["plan"]

    def call_rule(i):
        y = sets[i]
        gdn_prefill.prefill(y["q"], y["k"], y["v"], y["g"], y["beta"], outs[i], y["state"], cu_seqlens=y["cu_seqlens"],
                            workspace=ws, max_seqlen=T)
    rows.append(dict(shape=shape, heads=f"{hk}/{hv}", plan=f"rule: {rule['name']}",
                     seg_chunks=rule.get("segment_chunks"), segments=rule.get("segments", 1),
                     us=_graph_us([lambda i=i: call_rule(i) for i in range(len(sets))]),
                     predicted_us=rule["predicted_us"].get(rule["name"])))
    for count in counts:
        sc = -(-chunks // count)
        if -(-chunks // sc) < 2:
            continue
        wss = torch.empty(max(gdn_prefill.workspace_bytes(Ttot, N, hv),
                              _ext._segmented_workspace_bytes(Ttot, N, hv, sc)), dtype=torch.uint8, device="cuda")
        for build in seg_builds:
            code = SEG_BUILDS[build]
            seg_ns = _ext._model_ns(Ttot, N, hv, chunks, sc, sms, code)[1]
            r = dict(shape=shape, heads=f"{hk}/{hv}", plan="segmented" if build == "solo" else f"segmented {build}",
                     seg_chunks=sc, segments=-(-chunks // sc),
                     us=_graph_us(run(STAGES, wss, seg_chunks=sc, rs_build=code)), predicted_us=seg_ns / 1e3)
            if passes and sc == rule.get("segment_chunks"):
                for st in STAGES:
                    r[f"{st}_us"] = _graph_us(run((st,), wss, seg_chunks=sc, rs_build=code), warm_s=0.3)
            rows.append(r)
    for r in rows:
        print(f"{r['shape']} {r['heads']} {r['plan']:>18} sc={r['seg_chunks']} x{r['segments']}: {r['us']:8.1f} us "
              f"(model {r['predicted_us']})" + "".join(f" {s}={r[s + '_us']:.1f}" for s in STAGES if s + "_us" in r),
              flush=True)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="1x8K,1x32K", help="comma list of BxT (T may end in K)")
    ap.add_argument("--heads", default="2/4,4/8", help="comma list of Hk/Hv")
    ap.add_argument("--segments", default="2,4,8,16,32", help="segment counts of the longest sequence to time")
    ap.add_argument("--gates", choices=GATES, default="fast", help="the gates' draw (gdn_prefill.bench.inputs)")
    ap.add_argument("--seg-builds", default="solo", help="comma list of the SEGMENT pass's builds to time: "
                    "solo (the planner's), dual (a CTA per segment and head, forced)")
    ap.add_argument("--no-passes", action="store_true", help="skip timing each launch alone")
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--md", help="write a markdown table here")
    a = ap.parse_args(argv)
    heads = [parse_heads(h) for h in a.heads.split(",")]
    counts = [int(x) for x in a.segments.split(",")]
    seg_builds = tuple(a.seg_builds.split(","))
    bad = [b for b in seg_builds if b not in SEG_BUILDS]
    if bad:
        ap.error(f"--seg-builds: {bad} not among {sorted(SEG_BUILDS)}")
    shapes = [(int(b), parse_count(t)) for b, t in (s.split("x") for s in a.shapes.split(","))]
    if bench.script_cannot_time("bench_segments"):
        return 0
    import torch
    rows = []
    for hk, hv in heads:
        for B, T in shapes:
            rows += time_shape(B, T, hk, hv, counts, not a.no_passes, a.gates, seg_builds)
    meta = dict(card=torch.cuda.get_device_name(), date=datetime.date.today().isoformat(), torch=torch.__version__,
                gates=a.gates,
                model={k: v for k, v in _abi.CONSTANTS.items() if k.startswith("GDN_MODEL_")},
                method="_ext._launch_stages (forced plans) and prefill() (the rule), gdn_prefill.bench's graph "
                       "harness (a CUDA graph per buffer set, replayed round-robin, median of 20-50 CUDA-event "
                       "timings); bf16, K = V = 128, dense fp32 state, max_seqlen given")
    table_report(f"Segmented plan sweep — {meta['card']}, {meta['date']}, {a.gates} gates, {meta['method']}",
                 ["shape", "Hk/Hv", "plan", "segments x chunks", "µs", "model µs", *STAGES],
                 [[r["shape"], r["heads"], r["plan"], f"{r['segments']} x {r['seg_chunks']}" if r["seg_chunks"] else "1",
                   f"{r['us']:.1f}", f"{r['predicted_us']:.1f}" if r["predicted_us"] else "",
                   *(f"{r[s + '_us']:.1f}" if s + "_us" in r else "" for s in STAGES)] for r in rows],
                 dict(meta=meta, rows=rows), a.md, a.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
