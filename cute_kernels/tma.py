"""TMA helpers shared by the kernels that move whole tiles (spine_wgmma, spine_rs, recompute_wu).

A tile moves by one bulk-tensor copy issued by one warp: `view` reorders a global tensor's modes
so that the first two are the box, `gmem_tile` cuts the box at an element origin, `load`
completes on an mbarrier (optionally multicast over a cluster), `store` is one bulk async-group of
the calling warp (`release_after_stores` frees its slot once read).  `store_rows` is how a staged
(64, cols) output tile leaves: one TMA store for a full chunk, 16-byte thread stores (`rows_copy`)
of rows < L for a sequence's partial last chunk, whose rows >= L belong to the next sequence.
"""
from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import BFloat16, Int32
from cutlass.cute.nvgpu import cpasync

from gdn_prefill import grids

CHUNK = grids.CHUNK


def view(t: cute.Tensor, modes) -> cute.Tensor:
    """The same memory with its modes reordered so that the first two are the box a TMA copy
    moves: (rows, cols, head) for [T, H, D] tensors (modes [0, 2, 1]); (cols, rows, head) for
    the K tile read as K^T ([2, 0, 1])."""
    return cute.make_tensor(t.iterator, cute.select(t.layout, mode=modes))


def gmem_tile(g_view, origin, tile):
    """The tile-shaped window of a TMA coordinate tensor that starts at element `origin`."""
    return cute.zipped_divide(cute.domain_offset(origin, g_view), tile)[((None, None), (0, 0))]


@cute.jit
def load(atom: cute.CopyAtom, g_tile: cute.Tensor, s_tile: cute.Tensor, bar, rank: Int32,
         cz: cutlass.Constexpr):
    """TMA-load g_tile into the shared-memory tile s_tile, completing on mbarrier `bar`; with
    cz > 1 this CTA loads its 1/cz slice (`rank`) and multicasts it to every CTA of the cluster."""
    ts, tg = cpasync.tma_partition(atom, rank, cute.make_layout(cz),
                                   cute.group_modes(s_tile, 0, 2), cute.group_modes(g_tile, 0, 2))
    if cutlass.const_expr(cz > 1):
        cute.copy(atom, tg, ts, tma_bar_ptr=bar, mcast_mask=cutlass.Int16((1 << cz) - 1))
    else:
        cute.copy(atom, tg, ts, tma_bar_ptr=bar)


@cute.jit
def store(atom: cute.CopyAtom, s_tile: cute.Tensor, g_tile: cute.Tensor):
    """TMA-store the shared-memory tile s_tile to g_tile as one bulk async-group of the calling
    warp (its cp_async_bulk_wait_group calls track it)."""
    ts, tg = cpasync.tma_partition(atom, 0, cute.make_layout(1),
                                   cute.group_modes(s_tile, 0, 2), cute.group_modes(g_tile, 0, 2))
    cute.copy(atom, ts, tg)
    cute.arch.cp_async_bulk_commit_group()


@cute.jit
def release_after_stores(ring, state, lane: Int32):
    """A store warp's end of a chunk: wait until its bulk stores have read shared memory, then
    lane 0 releases the staged slot (`state` of `ring`) to be refilled; the caller advances it."""
    cute.arch.cp_async_bulk_wait_group(0, read=True)
    cute.arch.sync_warp()
    if lane == 0:
        ring.consumer_release(state)


def rows_copy(cols: int, threads: int = 128) -> cute.TiledCopy:
    """16-byte thread copies of a (64, cols) tile by `threads` threads (one warpgroup, or one
    warp: threads / (cols/8) rows x cols/8 vectors per pass): a sequence's last, partial chunk
    leaves by these, rows j < L only."""
    return cute.make_tiled_copy_tv(
        cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), BFloat16, num_bits_per_copy=128),
        cute.make_layout((threads // (cols // 8), cols // 8), stride=(cols // 8, 1)),
        cute.make_layout((1, 8)))


@cute.jit
def store_rows(L: Int32, store_warp, atom, s_tiles, g_head, rows_out: cute.Tensor, cp, thr,
               tS, tC, t0: Int32, hv: Int32, col0: Int32, stage: Int32, cols: cutlass.Constexpr):
    """The staged (64, cols) tile s_tiles[..., stage] -> rows t0 + j, columns col0 .. + cols of
    head hv: one TMA store (the storing warp; g_head is the head's TMA coordinate tensor) for a
    full chunk; a partial one by the thread copies cp / thr (tS: this thread's part of the tile,
    tC: its (row, col) coordinates) of rows j < L into rows_out [T, H, D]."""
    if L >= CHUNK:
        if store_warp:
            store(atom, s_tiles[None, None, stage], gmem_tile(g_head, (t0, col0), (CHUNK, cols)))
    else:
        store_partial_rows(L, rows_out, cp, thr, tS, tC, t0, hv, col0, cols)


@cute.jit
def store_partial_rows(L: Int32, rows_out: cute.Tensor, cp, thr, tS, tC, t0: Int32, hv: Int32, col0: Int32,
                       cols: cutlass.Constexpr):
    """store_rows' partial chunk: rows j < L of the staged tile (tS: this thread's part, tC: its
    (row, col) coordinates, cp / thr: the thread copies) -> rows t0 + j, columns col0 .. + cols of
    head hv of rows_out [T, H, D]."""
    gV = cute.domain_offset((t0, col0), rows_out[None, hv, None])  # (j, v) -> [t0+j, hv, col0+v]
    tG = thr.partition_D(cute.local_tile(gV, (CHUNK, cols), (0, 0)))
    for m in cutlass.range_constexpr(cute.size(tS, mode=[1])):
        if tC[0, m, 0][0] < L:
            cute.copy(cp, tS[None, m, None], tG[None, m, None])
