"""The cost of state checkpoints (prefix caching): prefill() with and without them.

    python benchmarks/bench_checkpoints.py [--shapes 8x4K,1x8K,1x64K] [--every 1024,256]
                                           [--spines wgmma,scalar] [--pools fp32,bf16,fp16,fp8e4m3] [--md PATH]
                                           [--json PATH]

Hk/Hv 16/32, bf16, pre-normed q and k, a state pool of N live slots plus one slot per
checkpoint (checkpoint_every tokens, a table entry for every boundary up to each sequence's
end), graph mode (bench._time_impl), the rows of one shape alternated twice (A B A B) and
the medians of each kept.  Target (issue 35): <= 5 % at 8 x 4096 with a checkpoint every 1024
tokens.  Needs a Hopper GPU; without one it says so and exits 0.
"""
from __future__ import annotations

import argparse
import datetime
import statistics
import sys

from gdn_prefill import bench
from gdn_prefill.bench import table_report
from gdn_prefill.bench.cases import Case, parse_shape

HK, HV = 16, 32


def calls_for(case: Case, spine: str, every: int | None, pool_dtype: str = "fp32"):
    """One prefill() call on fresh buffers (every=None: no checkpoints), the pool of type pool_dtype
    (reference.POOL_DTYPES: fp32, bf16, fp16, fp8e4m3)."""
    import torch

    import gdn_prefill
    from gdn_prefill import reference as ref
    s = bench._make_set(case, 7, normed=True)
    cu = bench._cu(case)["cu32"]
    N = case.N
    n_ck = sum(ref.checkpoints_in(n, every) for n in case.lens) if every else 0
    pool = ref.round_to_pool(torch.randn(N + n_ck, HV, 128, 128, device="cuda") * 128 ** -0.5,
                             ref.POOL_DTYPES[pool_dtype][0])
    idx = torch.arange(N, dtype=torch.int32, device="cuda")
    table = ref.checkpoint_table(cu, idx, N + n_ck, every, device="cuda") if every else None
    ws = torch.empty(gdn_prefill.workspace_bytes(case.T, N, HV), dtype=torch.uint8, device="cuda")
    kw = dict(cu_seqlens=cu, state_indices=idx, spine=spine, workspace=ws)
    if every:
        kw.update(checkpoint_every=every, checkpoints=table)
    return lambda: gdn_prefill.prefill(s.q, s.k, s.v, s.g, s.beta, s.out, pool, **kw)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="8x4K,1x8K,1x64K")
    ap.add_argument("--every", default="1024,256")
    ap.add_argument("--spines", default="wgmma")
    ap.add_argument("--pools", default="fp32", help="state-pool types: fp32, bf16, fp16, fp8e4m3 (each its own rows)")
    ap.add_argument("--md")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    if bench.script_cannot_time("bench_checkpoints"):
        return 0
    import torch

    from gdn_prefill import reference as ref
    rows = []
    for shape in a.shapes.split(","):
        case = Case(shape, tuple(parse_shape(shape)), HK, HV)
        for spine, pool in ((s, p) for s in a.spines.split(",") for p in a.pools.split(",")):
            variants = [None] + [int(e) for e in a.every.split(",")]
            calls = {e: calls_for(case, spine, e, pool) for e in variants}
            got: dict = {e: [] for e in variants}
            for _ in range(2):
                for e in variants:
                    got[e].append(bench._time_impl([calls[e]], ("graph",), 0.4, 20, 200)["graph_us"])
            base = statistics.median(got[None])
            for e in variants:
                us = statistics.median(got[e])
                n_ck = sum(ref.checkpoints_in(n, e) for n in case.lens) if e else 0
                rows.append(dict(shape=case.shape, spine=spine, pool=pool, every=e or "-", checkpoints=n_ck,
                                 us=round(us, 1),
                                 cost=f"{100 * (us / base - 1):+.1f} %" if e else ""))
                print(rows[-1], flush=True)
            del calls
            torch.cuda.empty_cache()
    head = (f"prefill() with state checkpoints, Hk/Hv {HK}/{HV}, graph mode, median of two alternated "
            f"timings; {torch.cuda.get_device_name(0)}, {datetime.date.today()}")
    cols = ["shape", "spine", "pool", "every (tokens)", "checkpoints per call", "us", "cost"]
    table_report(head, cols, [[r["shape"], r["spine"], r["pool"], r["every"], r["checkpoints"], f"{r['us']:,.1f}",
                               r["cost"]] for r in rows], dict(head=head, rows=rows), a.md, a.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
