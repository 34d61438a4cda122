"""Where a planned call's time goes, launch by launch (torch.profiler's CUDA kernel records).

    python tools/plan_timeline.py [BxT ...] [--heads 2/4] [--seg-chunks N] [--reps 40]

For each shape: prefill() as the planner runs it (or the segmented plan forced to segments of
--seg-chunks chunks), three input sets captured as CUDA graphs and replayed round-robin after
bench.WARM_S of warm replays, then --reps replays under the profiler.  Per replay, from the
kernel records: each launch's start and end in µs from the replay's first kernel start, and the
gap before it (programmatic dependent launch lets a launch start before the one before it ends:
a negative gap).  Prints the medians per launch, so one can read which launch holds the span.
"""
from __future__ import annotations

import argparse
import statistics


def _profile(shape: str, hk: int, hv: int, reps: int, seg_chunks: int) -> tuple[list[str], list[list[tuple]]]:
    import torch

    import gdn_prefill
    from gdn_prefill import _ext, bench, reference as ref

    b, t = (int(x) for x in shape.split("x"))
    sets = [ref.make_inputs([t] * b, hk, hv, seed=s, device="cuda", state="dense", l2norm_inputs=True)
            for s in range(3)]
    outs = [torch.empty_like(x["v"]) for x in sets]
    nbytes = gdn_prefill.workspace_bytes(b * t, b, hv)
    if seg_chunks:
        nbytes = max(nbytes, _ext._segmented_workspace_bytes(b * t, b, hv, seg_chunks))
    ws = torch.empty(nbytes, dtype=torch.uint8, device="cuda")

    def call(i):
        x = sets[i]
        if seg_chunks:
            _ext._launch_stages(("recompute_wu", "maps", "compose", "spine"), x["q"], x["k"], x["v"], x["g"],
                                x["beta"], outs[i], x["state"], cu_seqlens=x["cu_seqlens"], spine="wgmma",
                                workspace=ws, seg_chunks=seg_chunks)
        else:
            gdn_prefill.prefill(x["q"], x["k"], x["v"], x["g"], x["beta"], outs[i], x["state"],
                                cu_seqlens=x["cu_seqlens"], workspace=ws, max_seqlen=t)
    kern = [k for k in bench.profiled_replays(call, 3, reps) if "kernel" in k[2].lower()]
    # a replay starts with stage 1 (recompute_wu), the first launch of every plan
    starts = [i for i, k in enumerate(kern) if "recompute" in k[2]]
    replays = [kern[a:b] for a, b in zip(starts, starts[1:] + [len(kern)])]
    n = statistics.mode(len(r) for r in replays)
    replays = [r for r in replays if len(r) == n]
    names = [k[2] for k in replays[0]]
    return names, replays


def _short(name: str) -> str:
    for key in ("recompute_wu", "spine_rs_maps", "compose", "spine_rs", "spine"):
        if key in name:
            return key
    return name[:24]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("shapes", nargs="*", default=["1x32768"])
    ap.add_argument("--heads", default="2/4")
    ap.add_argument("--seg-chunks", type=int, default=0, help="force the segmented plan at this segment length")
    ap.add_argument("--reps", type=int, default=40)
    a = ap.parse_args()
    import torch
    if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9:
        print("plan_timeline: no Hopper GPU visible; nothing to profile.")
        return
    hk, hv = (int(x) for x in a.heads.split("/"))
    for shape in a.shapes:
        names, replays = _profile(shape, hk, hv, a.reps, a.seg_chunks)
        print(f"== {shape} at {a.heads}, seg_chunks {a.seg_chunks or 'planner'}: {len(replays)} replays of "
              f"{len(names)} launches")
        print(f"  {'launch':<16}{'start':>10}{'end':>10}{'duration':>10}{'gap before':>12}   (median µs)")
        for j, name in enumerate(names):
            start = statistics.median(r[j][0] - r[0][0] for r in replays)
            end = statistics.median(r[j][1] - r[0][0] for r in replays)
            dur = statistics.median(r[j][1] - r[j][0] for r in replays)
            gap = statistics.median(r[j][0] - r[j - 1][1] for r in replays) if j else 0.0
            print(f"  {_short(name):<16}{start:10.1f}{end:10.1f}{dur:10.1f}{gap:12.1f}")
        print(f"  span {statistics.median(r[-1][1] - r[0][0] for r in replays):.1f} µs")


if __name__ == "__main__":
    main()
