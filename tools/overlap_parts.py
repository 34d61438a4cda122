"""Where the overlap plan's time goes, replay by replay (torch.profiler's CUDA kernel records).

    python tools/overlap_parts.py [BxT ...] [--reps 60] [--ctas N]     (default 1x8192 1x65536)

For each shape: the prefill's fused plan as the overlap plan (stage 1's workers build, then the
spine as its programmatic dependent, beside it), three input sets captured as CUDA graphs and
replayed round-robin after bench.WARM_S of warm replays (the harness's sustained clock), then
`--reps` replays under the profiler.  Per replay, from the kernel records, µs from the replay's
first kernel start: the workers' start and end, the spine's start and end, and the span.  Prints
percentiles and the fast and slow halves' means, so one can read which launch ends a replay: spine
end - workers end near the chain's last chunk (~1 µs) means stage 1 bounds the call; much more
means the spine's chain does.  In that case it also prints the chain's rate while the workers ran
beside it (chain_rate_beside: the chunks left at the workers' end ran alone at --alone-us each,
1.34 µs measured; two builds of the earlier split plan's stage 1 read 1.60 and 1.69 µs per chunk
beside them this way).
"""
from __future__ import annotations

import argparse
import statistics


def _profile(shape: str, reps: int, ctas: int | None) -> dict:
    import torch

    import gdn_prefill
    from gdn_prefill import _ext, bench, grids, reference as ref

    b, t = (int(x) for x in shape.split("x"))
    sets = [ref.make_inputs([t] * b, 16, 32, seed=s, device="cuda", state="dense", l2norm_inputs=True)
            for s in range(3)]
    outs = [torch.empty_like(x["v"]) for x in sets]
    ws = torch.empty(gdn_prefill.workspace_bytes(b * t, b, 32), dtype=torch.uint8, device="cuda")
    cb = grids.chunk_slots(b * t, b)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    wu_ctas = ctas if ctas is not None else (_ext._overlap_rule(b * t, b, 32, sms) or sms - 2 * b * 32)

    def call(i):
        x = sets[i]
        _ext._launch_stages(("recompute_wu", "spine"), x["q"], x["k"], x["v"], x["g"], x["beta"], outs[i],
                            x["state"], cu_seqlens=x["cu_seqlens"], spine="wgmma", workspace=ws, fused=1,
                            overlap_wu_ctas=wu_ctas, rs_build=-1)
    kern = [k for k in bench.profiled_replays(call, 3, reps)
            if "recompute" in k[2] or "spine" in k[2] or "memset" in k[2].lower()]
    # a replay starts with the memset of its ready flags; then the workers and the spine
    starts = [i for i, k in enumerate(kern) if "memset" in k[2].lower()]
    rows = []
    for a, b in zip(starts, starts[1:] + [len(kern)]):
        rep = kern[a:b]
        wus = [k for k in rep if "recompute" in k[2]]
        sp = [k for k in rep if "spine" in k[2]]
        if len(wus) != 1 or len(sp) != 1:
            continue
        t0 = rep[0][0]
        w, s = wus[0], sp[0]
        rows.append(dict(wu_start=w[0] - t0, wu_end=w[1] - t0, spine_start=s[0] - t0,
                         spine_end=s[1] - t0, span=max(s[1], w[1]) - t0, tail=s[1] - w[1]))
    return dict(shape=shape, wu_ctas=wu_ctas, chunk_slots=cb, kernels=len(kern), replays=len(rows), rows=rows,
                names=sorted({k[2][:60] for k in kern}))


def chain_rate_beside(row: dict, chunks: int, alone_us: float) -> float | None:
    """µs per chunk of the spine's chain while stage 1's workers ran beside it, for one replay (a
    row of _profile): the tail after the workers' end ran alone at alone_us per chunk, so
    tail / alone_us chunks were left; the others took wu_end - spine_start.  None where the spine
    ended within one chunk of the workers (it waited for stage 1, whose rate it then shows)."""
    tail = row["spine_end"] - row["wu_end"]
    if tail <= alone_us:
        return None
    before = chunks - tail / alone_us
    return (row["wu_end"] - row["spine_start"]) / before if before > 0 else None


def _summary(res: dict, alone_us: float) -> None:
    rows = res["rows"]
    print(f"== {res['shape']}  chunk slots {res['chunk_slots']}, workers {res['wu_ctas']} CTAs, "
          f"{res['kernels']} kernel records, {res['replays']} replays; kernels: {res['names']}")
    if not rows:
        print("  no replay could be assembled from the records")
        return
    keys = ["wu_start", "wu_end", "spine_start", "spine_end", "tail", "span"]
    rows = sorted(rows, key=lambda r: r["span"])
    half = len(rows) // 2
    print("  " + f"{'µs from replay start':<22}" + "".join(f"{k:>12}" for k in keys))
    for lab, sel in (("p10", [rows[len(rows) // 10]]), ("median", [rows[half]]), ("p90", [rows[len(rows) * 9 // 10]]),
                     ("fast half mean", rows[:half]), ("slow half mean", rows[half:])):
        vals = [statistics.fmean(r[k] for r in sel) for k in keys]
        print("  " + f"{lab:<22}" + "".join(f"{v:12.1f}" for v in vals))
    print("  spans sorted: " + " ".join(f"{r['span']:.0f}" for r in rows))
    from gdn_prefill import grids
    chunks = -(-int(res["shape"].split("x")[1]) // grids.CHUNK)
    rates = [x for x in (chain_rate_beside(r, chunks, alone_us) for r in rows) if x is not None]
    if len(rates) * 2 > len(rows):
        print(f"  chain beside the workers (chunks after them at {alone_us} us each): median {statistics.median(rates):.2f} "
              f"us per chunk over {len(rates)} replays")
    else:
        print(f"  the spine ended within a chunk of the workers in {len(rows) - len(rates)} of {len(rows)} replays: "
              "stage 1 bounds the chain")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("shapes", nargs="*", default=["1x8192", "1x65536"])
    ap.add_argument("--reps", type=int, default=60)
    ap.add_argument("--ctas", type=int, default=None, help="the workers' CTAs (default: the launcher's rule)")
    ap.add_argument("--alone-us", type=float, default=1.34,
                    help="the spine's µs per chunk alone (measured), for the rate beside the workers")
    a = ap.parse_args()
    import torch
    if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9:
        print("overlap_parts: no Hopper GPU visible; nothing to profile.")
        return
    for s in a.shapes:
        _summary(_profile(s, a.reps, a.ctas), a.alone_us)


if __name__ == "__main__":
    main()
