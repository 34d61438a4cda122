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
"""
from __future__ import annotations

import argparse
import datetime
import sys

from gdn_prefill import bench
from gdn_prefill.bench import table_report
from gdn_prefill.bench.cases import parse_count, parse_heads



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
                            workspace=ws, fused=1, overlap_split=0)
        call = lambda: _ext._launch_stages((stages,), q, k, v, g, beta, out, None, cu_seqlens=cu,  # noqa: E731
                                           spine=spine, workspace=ws, fused=1)
    return bench.eager_median_us(call, reps)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ns", default="1K,16K,128K,1M")
    ap.add_argument("--tokens", type=int, default=4)
    ap.add_argument("--heads", default="2/4")
    ap.add_argument("--spines", default="wgmma,scalar")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--stages", action="store_true",
                    help="also time the fused plan's two launches alone (recompute_wu, spine) at T = tokens x N")
    ap.add_argument("--md")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    if bench.script_cannot_time("bench_many_seqs"):
        return 0
    import torch
    hk, hv = parse_heads(a.heads)
    ns = [parse_count(x) for x in a.ns.split(",")]
    t_big = max(ns) * a.tokens
    rows = []
    for spine in a.spines.split(","):
        for N in ns:
            for T in sorted({N * a.tokens, t_big}):
                if spine == "scalar" and (N * a.tokens != T or N > 128 * 1024):
                    continue      # the scalar plan: the rows only (its h at 1M sequences: 136 GB)
                us = time_call(N, T, hk, hv, spine, a.reps)
                torch.cuda.empty_cache()          # the row's tensors, before the next (1M: ~20 GB)
                rows.append(dict(spine=spine, N=N, T=T, us=round(us, 1)))
                print(rows[-1], flush=True)
                if a.stages and spine == "wgmma" and T == N * a.tokens:
                    for st in ("recompute_wu", "spine"):
                        us = time_call(N, T, hk, hv, spine, a.reps, st)
                        rows.append(dict(spine=f"wgmma: {st} alone", N=N, T=T, us=round(us, 1)))
                        print(rows[-1], flush=True)
    head = (f"prefill() against N, Hk/Hv {a.heads}, no state, eager, median of {a.reps}; "
            f"{torch.cuda.get_device_name(0)}, {datetime.date.today()}")
    table_report(head, ["spine", "N", "T", "tokens / seq", "us", "us / sequence"],
                 [[r["spine"], f"{r['N']:,}", f"{r['T']:,}", r["T"] // r["N"], f"{r['us']:,.1f}",
                   f"{r['us'] / r['N']:.4f}"] for r in rows], dict(head=head, rows=rows), a.md, a.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
