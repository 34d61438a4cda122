"""What a spine reads of what stage 1 (recompute_wu) wrote for it: the longest-first order of the
sequences (written by recompute_wu._rank_longest_first) and the overlap plan's per-(slot, head)
ready flags (published by recompute_wu._publish): the reader's side of both handoffs, in no kernel.

The overlap plan (overlap == 1) runs the spine as the programmatic dependent of stage 1's
workers build (recompute_wu_workers) on the same stream: the spine's CTAs are scheduled only once
every CTA of the workers' grid has issued launch_dependents, i.e. has started and holds its SM
until it is done, and a worker waits on nothing.  So each flag the spine spins on is owed by a
running CTA, whatever other streams, processes or profilers do with the rest of the GPU; where the
launch is serialised (no PDL) the spine starts after the workers have ended and every flag is set.
"""
from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Int32

from cute_kernels import pdl
from gdn_prefill import grids

ORDER_MAX_SEQS = grids.ORDER_MAX_SEQS  # longest_first: stage 1 ranked the sequences up to this many


@cute.jit
def longest_first(r: Int32, cu_seqlens: cute.Tensor, order: cute.Tensor) -> Int32:
    """The sequence of rank r: order[r], the longest-first ranking (equal lengths by index) that
    stage 1's first CTA wrote (recompute_wu._rank_longest_first) for N <= ORDER_MAX_SEQS; beyond,
    index order.  Blocks start roughly in index order, so a long sequence placed late in a batch
    would start its chain in the last wave and end the call alone (grids.grid_spine_rs).  O(1) per
    CTA at any N: no CTA scans cu_seqlens beyond the cap (a scan per CTA would make the call's cost
    grow as N^2: docs/PERFORMANCE.md, many sequences)."""
    N = cu_seqlens.shape[0] - 1
    n = r
    if N <= ORDER_MAX_SEQS:
        # uniform for ptxas too (else every branch on n is divergent to it, and it serialises each
        # wgmma behind them: C7520)
        # (clamped: a spine launched on a workspace stage 1 never wrote stays inside cu_seqlens)
        n = cute.arch.make_warp_uniform(cutlass.min(cutlass.max(order[r], Int32(0)), N - 1))
    return n


@cute.jit
def enter(ready: cute.Tensor, overlap: Int32):
    """A spine's first statement.  The serial plan: pdl.enter() (the previous grid, stage 1, has
    completed).  The overlap plan (overlap == 1): let the next grid launch, then acquire ready[0, 0],
    which the workers' first worker publishes after ranking the sequences (`order`), and which orders
    after it everything that grid's predecessors wrote (each worker waited for them before its
    launch_dependents); every later slot is acquired by the loader before it is read."""
    if overlap != 0:
        cute.arch.griddepcontrol_launch_dependents()
        await_ready(ready, Int32(0), Int32(0), overlap)
    else:
        pdl.enter()


@cute.jit
def await_ready(ready: cute.Tensor, c: Int32, hv: Int32, overlap: Int32):
    """Overlap plan (overlap == 1): chunk slot c is produced by the recompute_wu launch running
    beside this spine; spin (every lane: each reads the rows after its own acquire) until it has
    published ready[c, hv] (recompute_wu._publish), then order this warp's TMA loads of the slot
    (async proxy) after the acquire."""
    if overlap != 0:
        flag = ready.iterator + cute.crd2idx((c, hv), ready.layout)
        seen = cute.arch.load(flag, Int32, sem="acquire", scope="gpu")
        while seen == 0:
            seen = cute.arch.load(flag, Int32, sem="acquire", scope="gpu")
        cute.arch.fence_proxy("async.global")
