"""Context parallelism: one long sequence on R GPUs (NCCL) against one GPU.

    torchrun --nproc-per-node 2 benchmarks/bench_context_parallel.py [--tokens 1M] [--heads 16/32] [--md PATH]
    python benchmarks/bench_context_parallel.py --single [--tokens 1M]      (the one-GPU row)
    python benchmarks/bench_context_parallel.py --emulate 2 [--tokens 1M]   (R ranks' work on one GPU)

Each rank holds T / R tokens of one sequence (bf16 q, k, v, pre-normed; fp32 g, beta; an fp32
initial state on rank 0) and runs gdn_prefill.distributed.context_parallel_prefill; the one-GPU
row runs gdn_prefill.prefill on all T tokens.  Timed with CUDA events around the call (a
barrier before each), after two warm-up calls, median of --reps; memory is
torch.cuda.max_memory_allocated per rank (inputs included).  Rank 0 prints the table.
--emulate R runs on one GPU what each of R ranks computes (its passes A and B, its pass C from the
others' gathered maps), rank after rank, the collective left out: each rank's time and the
memory its work adds (beside every shard's inputs, which stay resident): the prediction for
the R-GPU run where it cannot be had.  Needs
Hopper GPUs; without one it says so and exits 0.
"""
from __future__ import annotations

import argparse
import datetime
import os
import sys

from gdn_prefill import bench
from gdn_prefill.bench import table_report
from gdn_prefill.bench.cases import parse_count, parse_heads



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


def _one_gpu(T: int, hk: int, hv: int, reps: int) -> dict:
    import torch

    import gdn_prefill
    sh = _shard(T, hk, hv, 0, 1, "cuda")
    out = torch.empty_like(sh["v"])
    state = torch.zeros(1, hv, 128, 128, device="cuda")
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    us = bench.eager_median_us(lambda: gdn_prefill.prefill(**sh, out=out, state=state), reps)
    return dict(us=round(us, 1), gib=torch.cuda.max_memory_allocated() / 2**30,
                work_gib=(torch.cuda.max_memory_allocated() - base) / 2**30)


def _emulated(T: int, hk: int, hv: int, world: int, reps: int) -> list[dict]:
    """Each rank's work (distributed._local, then _finish on the gathered maps) timed alone."""
    import torch

    from gdn_prefill import distributed as cp
    shards = [_shard(T, hk, hv, r, world, "cuda") for r in range(world)]
    outs = [torch.empty_like(sh["v"]) for sh in shards]
    init = torch.zeros(1, hv, 128, 128, device="cuda")
    plans = [cp._Plan(r, world, [sh["q"].shape[0]], None, None) for r, sh in enumerate(shards)]

    def local(r):
        return cp._local(plans[r], shards[r], outs[r], init if r == 0 else None, None, False, cp.prefill_pass, {})
    gathered = [local(r)[0] for r in range(world)]
    rows = []
    for r in range(world):
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        us = bench.eager_median_us(lambda: cp._finish(plans[r], gathered, outs[r], local(r)[1]), reps)
        rows.append(dict(gpus=f"{world} emulated", rank=r, tokens=shards[r]["q"].shape[0], us=round(us, 1),
                         gib=float("nan"), work_gib=(torch.cuda.max_memory_allocated() - base) / 2**30))
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", default="1M")
    ap.add_argument("--heads", default="16/32")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--single", action="store_true", help="the one-GPU row only (no process group)")
    ap.add_argument("--emulate", type=int, default=0, help="R ranks' work on one GPU, one after the other")
    ap.add_argument("--md")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    if bench.script_cannot_time("bench_context_parallel"):
        return 0
    import torch

    from gdn_prefill import distributed as cp
    T = parse_count(a.tokens)
    hk, hv = parse_heads(a.heads)
    rows = []
    if a.emulate:
        rows = [dict(gpus=1, rank="all", tokens=T, **_one_gpu(T, hk, hv, a.reps))] + _emulated(T, hk, hv, a.emulate,
                                                                                                a.reps)
    elif a.single or "RANK" not in os.environ:
        rows.append(dict(gpus=1, rank=0, tokens=T, **_one_gpu(T, hk, hv, a.reps)))
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
    table_report(head, ["GPUs", "rank", "tokens", "us", "peak GiB", "work GiB"],
                 [[r["gpus"], r["rank"], f"{r['tokens']:,}", f"{r['us']:,.1f}", f"{r['gib']:.2f}",
                   f"{r['work_gib']:.2f}" if "work_gib" in r else "-"] for r in rows],
                 dict(head=head, rows=rows), a.md, a.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
