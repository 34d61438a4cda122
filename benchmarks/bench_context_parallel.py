"""Context parallelism: one long sequence on R GPUs (NCCL) against one GPU.

    torchrun --nproc-per-node 2 benchmarks/bench_context_parallel.py [--tokens 1M] [--heads 16/32] [--md PATH]
    python benchmarks/bench_context_parallel.py --single [--tokens 1M]      (the one-GPU row)

Each rank holds T / R tokens of one sequence (bf16 q, k, v, pre-normed; fp32 g, beta; an fp32
initial state on rank 0) and runs gdn_prefill.distributed.context_parallel_prefill; the one-GPU
row runs gdn_prefill.prefill on all T tokens.  Timed with CUDA events around the call (a
barrier before each), after two warm-up calls, median of --reps; memory is
torch.cuda.max_memory_allocated per rank (inputs included).  Rank 0 prints the table.  Needs
Hopper GPUs; without one it says so and exits 0.
"""
from __future__ import annotations

import argparse
import datetime
import os
import sys

from gdn_prefill import bench
from gdn_prefill.bench import table_report


def _tokens(s: str) -> int:
    s = s.upper()
    return int(s[:-1]) * (1 << 20 if s.endswith("M") else 1 << 10) if s[-1] in "KM" else int(s)


def _shard(T: int, hk: int, hv: int, rank: int, world: int, device: str):
    """Rank `rank`'s tokens of one sequence of T (drawn per shard from its own seed)."""
    import torch
    import torch.nn.functional as F
    a, b = T * rank // world, T * (rank + 1) // world
    gen = torch.Generator(device=device).manual_seed(1000 + rank)
    t = b - a

    def rn(*shape):
        return torch.randn(*shape, generator=gen, device=device)
    return dict(q=F.normalize(rn(t, hk, 128), dim=-1).bfloat16(), k=F.normalize(rn(t, hk, 128), dim=-1).bfloat16(),
                v=rn(t, hv, 128).bfloat16(), g=F.logsigmoid(3.0 + 1.5 * rn(t, hv)), beta=torch.sigmoid(rn(t, hv)))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", default="1M")
    ap.add_argument("--heads", default="16/32")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--single", action="store_true", help="the one-GPU row only (no process group)")
    ap.add_argument("--md")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    if bench.script_cannot_time("bench_context_parallel"):
        return 0
    import torch

    import gdn_prefill
    from gdn_prefill import distributed as cp
    T = _tokens(a.tokens)
    hk, hv = (int(x) for x in a.heads.split("/"))
    rows = []
    if a.single or "RANK" not in os.environ:
        sh = _shard(T, hk, hv, 0, 1, "cuda")
        out = torch.empty_like(sh["v"])
        state = torch.zeros(1, hv, 128, 128, device="cuda")
        torch.cuda.reset_peak_memory_stats()
        us = bench.eager_median_us(lambda: gdn_prefill.prefill(**sh, out=out, state=state), a.reps)
        rows.append(dict(gpus=1, rank=0, tokens=T, us=round(us, 1), gib=torch.cuda.max_memory_allocated() / 2**30))
    else:
        import torch.distributed as dist
        dist.init_process_group("nccl")
        rank, world = dist.get_rank(), dist.get_world_size()
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
        sh = _shard(T, hk, hv, rank, world, "cuda")
        out = torch.empty_like(sh["v"])
        init = torch.zeros(1, hv, 128, 128, device="cuda") if rank == 0 else None
        torch.cuda.reset_peak_memory_stats()
        us = bench.eager_median_us(lambda: cp.context_parallel_prefill(**sh, out=out, initial_states=init), a.reps,
                                   dist.barrier)
        mine = torch.tensor([us, torch.cuda.max_memory_allocated() / 2**30], device="cuda")
        every = [torch.empty_like(mine) for _ in range(world)]
        dist.all_gather(every, mine)
        rows = [dict(gpus=world, rank=r, tokens=T, us=round(float(x[0]), 1), gib=float(x[1]))
                for r, x in enumerate(every)]
        dist.destroy_process_group()
        if rank != 0:
            return 0
    head = (f"context parallelism, one sequence of {T:,} tokens, Hk/Hv {a.heads}; "
            f"{torch.cuda.get_device_name(0)}, {datetime.date.today()}")
    table_report(head, ["GPUs", "rank", "tokens", "us", "peak GiB"],
                 [[r["gpus"], r["rank"], f"{r['tokens']:,}", f"{r['us']:,.1f}", f"{r['gib']:.2f}"] for r in rows],
                 dict(head=head, rows=rows), a.md, a.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
