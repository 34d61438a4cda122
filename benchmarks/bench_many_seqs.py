"""The cost of one prefill() against the number of sequences N (issue 32: it must grow linearly).

    python benchmarks/bench_many_seqs.py [--ns 1K,16K,128K,1M] [--tokens 4] [--heads 2/4]
                                         [--spines wgmma,scalar] [--reps 5] [--md PATH] [--json PATH]

N sequences of --tokens tokens each (T = tokens x N), Hk/Hv 2/4, bf16, no state (a state pool
for a million sequences would be 256 GB; the scalar plan, whose workspace holds h per chunk slot,
stops at 128K), pre-normed q and k; plus each N at the largest row's T
(T / N tokens per sequence), so a row can be compared with N = 1K at the same T.  Timed with CUDA
events around one eager call after two warm-up calls (the warm-up includes the first call's
module load); median of --reps.  Target (issue 32): N = 128K sequences of 4 tokens <= 1 ms and
within 2x of N = 1K at the same T.  Needs a Hopper GPU; without one it says so and exits 0.

The state floor column: the time to read and write each sequence's fp32 state once (N x Hv x
128 x 128 x 4 bytes, read and written) at the device's copy rate, which this run measures: a
device-to-device copy of the same bytes (at most --copy-bytes, 1 GiB: a million sequences' states
are 256 GB) timed like the calls, its rate counting the bytes read and written.  The calls above
carry no state; a call that updates a state per sequence cannot run faster than that floor.
"""
from __future__ import annotations

import argparse
import datetime
import sys

from gdn_prefill import bench
from gdn_prefill.bench import table_report
from gdn_prefill.bench.cases import parse_count, parse_heads

STATE_HEAD_BYTES = 128 * 128 * 4          # one fp32 state [K, V] of one value head


def time_call(N: int, T: int, hk: int, hv: int, spine: str, reps: int, stages=None) -> float:
    """Median microseconds of one prefill() of N sequences over T tokens (lengths as even as T / N
    allows), eager, after two warm-up calls; stages ("recompute_wu" or "spine"): that launch of the
    fused plan alone, through the stage hook (the spine reads what the warm-up's stage 1 wrote)."""
    import torch

    import gdn_prefill
    dev = "cuda"
    gen = torch.Generator(device=dev).manual_seed(N)
    q = torch.nn.functional.normalize(torch.randn(T, hk, 128, device=dev, generator=gen), dim=-1).bfloat16()
    k = torch.nn.functional.normalize(torch.randn(T, hk, 128, device=dev, generator=gen), dim=-1).bfloat16()
    v = torch.randn(T, hv, 128, device=dev, generator=gen).bfloat16()
    g = -torch.rand(T, hv, device=dev, generator=gen) * 0.1
    beta = torch.rand(T, hv, device=dev, generator=gen)
    out = torch.empty_like(v)
    cu = (torch.arange(N + 1, device=dev, dtype=torch.int64) * T // N).to(torch.int32)
    # the plan's own workspace, allocated by prefill() (cached by torch after the warm-up)
    call = lambda: gdn_prefill.prefill(q, k, v, g, beta, out, None, cu_seqlens=cu, spine=spine)  # noqa: E731
    if stages:
        from gdn_prefill import _ext
        ws = torch.empty(gdn_prefill.workspace_bytes(T, N, hv, fused=True), dtype=torch.uint8, device=dev)
        _ext._launch_stages(("recompute_wu", "spine"), q, k, v, g, beta, out, None, cu_seqlens=cu, spine=spine,
                            workspace=ws, fused=1, overlap_wu_ctas=0)
        call = lambda: _ext._launch_stages((stages,), q, k, v, g, beta, out, None, cu_seqlens=cu,  # noqa: E731
                                           spine=spine, workspace=ws, fused=1)
    return bench.eager_median_us(call, reps)


def state_bytes(N: int, hv: int) -> int:
    """Bytes of N sequences' fp32 states, Hv value heads each."""
    return N * hv * STATE_HEAD_BYTES


def state_floor_us(N: int, hv: int, copy_tbps: float) -> float:
    """Microseconds to read and write the N sequences' states once at copy_tbps (TB/s, counting the
    bytes read and the bytes written, as a copy moves them)."""
    return 2 * state_bytes(N, hv) / (copy_tbps * 1e12) * 1e6


def copy_rate_tbps(nbytes: int, reps: int) -> float:
    """The device's copy rate, TB/s: a device-to-device copy of nbytes timed like the calls (median
    of reps eager copies between CUDA events), counting the bytes read and written."""
    import torch
    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    us = bench.eager_median_us(lambda: dst.copy_(src), reps)
    del src, dst
    torch.cuda.empty_cache()
    return 2 * nbytes / (us * 1e-6) / 1e12


def table_lines(rows: list[dict]) -> tuple[list[str], list[list]]:
    """The printed table's columns and lines."""
    columns = ["spine", "N", "T", "tokens / seq", "us", "us / sequence", "state floor us"]
    lines = [[r["spine"], f"{r['N']:,}", f"{r['T']:,}", r["T"] // r["N"], f"{r['us']:,.1f}", f"{r['us'] / r['N']:.4f}",
              f"{r['state_floor_us']:,.1f}"] for r in rows]
    return columns, lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ns", default="1K,16K,128K,1M")
    ap.add_argument("--tokens", type=int, default=4)
    ap.add_argument("--heads", default="2/4")
    ap.add_argument("--spines", default="wgmma,scalar")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--stages", action="store_true",
                    help="also time the fused plan's two launches alone (recompute_wu, spine) at T = tokens x N")
    ap.add_argument("--copy-bytes", type=parse_count, default=1 << 30,
                    help="the largest copy timed for the state floor's copy rate, bytes (default 1024M)")
    ap.add_argument("--md")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    if bench.script_cannot_time("bench_many_seqs"):
        return 0
    import torch
    hk, hv = parse_heads(a.heads)
    ns = [parse_count(x) for x in a.ns.split(",")]
    t_big = max(ns) * a.tokens
    # the copy rate, once per N: a copy of that N's state bytes (at most --copy-bytes)
    rates = {N: copy_rate_tbps(min(state_bytes(N, hv), a.copy_bytes), a.reps) for N in ns}
    for N, r in rates.items():
        print(f"copy rate at {min(state_bytes(N, hv), a.copy_bytes) / 2**20:,.0f} MiB: {r:.2f} TB/s", flush=True)
    rows = []
    for spine in a.spines.split(","):
        for N in ns:
            for T in sorted({N * a.tokens, t_big}):
                if spine == "scalar" and (N * a.tokens != T or N > 128 * 1024):
                    continue      # the scalar plan: the rows only (its h at 1M sequences: 136 GB)
                us = time_call(N, T, hk, hv, spine, a.reps)
                torch.cuda.empty_cache()          # the row's tensors, before the next (1M: ~20 GB)
                rows.append(dict(spine=spine, N=N, T=T, us=round(us, 1), copy_tbps=round(rates[N], 3),
                                 state_floor_us=round(state_floor_us(N, hv, rates[N]), 1)))
                print(rows[-1], flush=True)
                if a.stages and spine == "wgmma" and T == N * a.tokens:
                    for st in ("recompute_wu", "spine"):
                        us = time_call(N, T, hk, hv, spine, a.reps, st)
                        rows.append(dict(spine=f"wgmma: {st} alone", N=N, T=T, us=round(us, 1),
                                         copy_tbps=round(rates[N], 3),
                                         state_floor_us=round(state_floor_us(N, hv, rates[N]), 1)))
                        print(rows[-1], flush=True)
    head = (f"prefill() against N, Hk/Hv {a.heads}, no state, eager, median of {a.reps}; state floor: N x Hv fp32 "
            f"states read and written once at the measured copy rate ({min(rates.values()):.2f}-"
            f"{max(rates.values()):.2f} TB/s); {torch.cuda.get_device_name(0)}, {datetime.date.today()}")
    columns, lines = table_lines(rows)
    table_report(head, columns, lines, dict(head=head, rows=rows), a.md, a.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
