"""A chunk's gates as one warp reads them: lane l holds rows 2 l and 2 l + 1.  Stage 1 (recompute_wu's
gate_scan) and the single kernel's norm warps both use them, so the row rule has one home.
"""
from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Float32, Int32


@cute.jit
def gate_rows(g: cute.Tensor, beta: cute.Tensor, t0: Int32, L: Int32, hv: Int32, lane: Int32):
    """gate_scan's loads: (g_2l, g_2l+1, beta_2l, beta_2l+1) in their own types, without a branch
    (a row at or past L reads row L - 1; gate_cumsum zeroes it).  Nothing here waits on the loads:
    a caller that issues them before other work keeps their latency off its path."""
    ra = t0 + cutlass.min(2 * lane, L - 1)
    rb = t0 + cutlass.min(2 * lane + 1, L - 1)
    return g[ra, hv], g[rb, hv], beta[ra, hv], beta[rb, hv]


@cute.jit
def gate_cumsum(g0: Float32, g1: Float32, b0, b1, L: Int32, lane: Int32):
    """gate_scan's arithmetic on gate_rows' values: rows at or past L zeroed, beta in fp32, and the
    inclusive scan of the pair sums over the warp -> (gcum_2l, gcum_2l+1, beta_2l, beta_2l+1)."""
    r0 = 2 * lane
    x0 = Float32(cutlass.select_(r0 < L, g0, Float32(0.0)))
    x1 = Float32(cutlass.select_(r0 + 1 < L, g1, Float32(0.0)))
    y0 = Float32(cutlass.select_(r0 < L, b0.to(Float32), Float32(0.0)))
    y1 = Float32(cutlass.select_(r0 + 1 < L, b1.to(Float32), Float32(0.0)))
    scan = x0 + x1
    for sh in cutlass.range_constexpr(5):
        up = cute.arch.shuffle_sync_up(scan, offset=1 << sh)
        if lane >= (1 << sh):
            scan = scan + up
    return scan - x1, scan, y0, y1       # gcum of rows 2 lane, 2 lane + 1
