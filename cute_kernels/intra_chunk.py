"""The single plan's intra-chunk role: stage 1 of one (sequence, value head), one warpgroup.

cute_kernels/single.py runs these phases in its role warpgroup, one chunk ahead of the chains that
consume Tu and P from shared memory.  Per chunk of 64 tokens (docs/DESIGN.md, section 1), with
gcum, rk, rq and beta from the I/O warps:

    A_ij = beta_i rk_i rk_j (k_i . k_j) exp(gcum_i - gcum_j)   (i > j, else 0)
    Tm   = (I + A)^-1                         (fp16 by doubling on mma.sync where the chunk is
                                               in inverse_f16's range; else exact, fp32: 16 x 16
                                               diagonal blocks by forward substitution, merges in
                                               one TF32 pass, FLA's precision)
    P_ij = scale rq_i rk_j (q_i . k_j) exp(gcum_i - gcum_j)   (j <= i, else 0), bf16

K K^T and Q K^T run on warpgroup MMA; every step after them is a dependent chain inside the
warpgroup, which is what bounds a chunk of the single plan (docs/PERFORMANCE.md, the single plan).

Rows >= L of a partial chunk: their beta and g are taken as 0 by the caller, so their rows of A
are 0 (selected, not multiplied: their keys are the next sequence's, and a non-finite key times
beta = 0 is NaN, which T's doubling and merges would carry into its rows < L through the exact
zeros above its diagonal) and every column j >= L of A and P is a selected 0 (A: i > j >= L; P:
j <= i < L).
"""
from __future__ import annotations

import enum

import cutlass
import cutlass.cute as cute
import cutlass.utils.hopper_helpers as sm90_utils
from cutlass import BFloat16, Boolean, Float32, Int32
from cutlass.cute.nvgpu import OperandMajorMode, warpgroup

from cute_kernels import fastexp, inverse_f16, mma_tf32, wgmma_acc
from gdn_prefill import grids

C = grids.CHUNK                   # 64 tokens per chunk
BLK = 16                          # diagonal block of the solve
HALF = C // 2
AS = C + 4                        # A / Tm row stride (fp32): 16-byte rows, conflict-free float4 rows
XS = HALF + 4                     # merge scratch row stride (fp32)
L2_EPS = 1e-6


class Barrier(enum.IntEnum):
    """Named barriers (0 is the CTA's __syncthreads)."""
    INTRA = 1                     # the role's warpgroup, 128 threads


class IntraChunk:
    """The role's phases, in order per chunk: issue_products, folds, then inverse (fp32) or
    inverse_f16.invert (see the module docstring); the caller owns the shared memory (scratch()
    views its fields a and x, scratch16() field a as fp16)."""

    INTRA_THREADS = 128

    def _mma(self):
        # G[i, j] = sum_d K[i, d] K[j, d] (and Q K^T): A, B K-major, the whole 64 x 64 in one warpgroup
        return sm90_utils.make_trivial_tiled_mma(BFloat16, BFloat16, OperandMajorMode.K, OperandMajorMode.K,
                                                 Float32, (1, 1, 1), tiler_mn=(C, C))

    # ------------------------------------------------------------------ launch

    @staticmethod
    def scratch(storage):
        """The role's fp32 shared memory, fields a and x of any storage that has them: A / Tm (and
        its float2 view) and the merge scratch."""
        sA = cute.make_tensor(storage.a.data_ptr(), cute.make_layout((C, C), stride=(AS, 1)))
        sA2 = cute.make_tensor(storage.a.data_ptr(), cute.make_layout((C, C // 2, 2), stride=(AS, 2, 1)))
        sX = cute.make_tensor(storage.x.data_ptr(), cute.make_layout((HALF, HALF), stride=(XS, 1)))
        return sA, sA2, sX

    @staticmethod
    def scratch16(storage):
        """A / Tm in fp16 over field a (inverse_f16's layout): its shared address, its 32-bit word
        view (C, HS / 2) and its fp16 view (C, C)."""
        hs = inverse_f16.HS
        base = storage.a.data_ptr().toint()
        sw = cute.make_tensor(cute.recast_ptr(storage.a.data_ptr(), dtype=Int32),
                              cute.make_layout((C, hs // 2), stride=(hs // 2, 1)))
        sH = cute.make_tensor(cute.recast_ptr(storage.a.data_ptr(), dtype=cutlass.Float16),
                              cute.make_layout((C, C), stride=(hs, 1)))
        return base, sw, sH

    @cute.jit
    def issue_products(self, mma, thr, accG, accQ, sK1, sQ1):
        """G = K K^T and QK = Q K^T issued on warpgroup MMA (the first k-step overwrites the
        accumulators); the caller waits (warpgroup.wait_group)."""
        tKa = thr.make_fragment_A(thr.partition_A(sK1))
        tQa = thr.make_fragment_A(thr.partition_A(sQ1))
        tKb = thr.make_fragment_B(thr.partition_B(sK1))
        warpgroup.fence()
        for kb in cutlass.range_constexpr(cute.size(tKa, mode=[2])):
            mma.set(warpgroup.Field.ACCUMULATE, kb > 0)
            cute.gemm(mma, accG, tKa[None, None, kb], tKb[None, None, kb], accG)
        for kb in cutlass.range_constexpr(cute.size(tQa, mode=[2])):
            mma.set(warpgroup.Field.ACCUMULATE, kb > 0)
            cute.gemm(mma, accQ, tQa[None, None, kb], tKb[None, None, kb], accQ)
        warpgroup.commit_group()

    @cute.jit
    def folds(self, thr, accG, accQ, sAst, f16: cutlass.Constexpr, sG, sB, sR, sRq, scale: Float32, rP, st_a=None,
              unit_norms: cutlass.Constexpr = False):
        """A = select(i > j and beta_i != 0, beta_i rk_i rk_j G_ij exp(gcum_i - gcum_j), 0) -> smem:
        fp32 into sAst = scratch()'s sA2 (columns j, j + 1 of a row as one 8-byte store), or with
        f16 in place in accG, then fp16 into sAst = scratch16()'s fp16 view by st_a (stmatrix: a
        thread's 32 values in 4 instructions rather than 16 stores);
        P = select(j <= i, scale rq_i rk_j QK_ij exp(...), 0) in place in accQ (the exp shared),
        then bf16 into rP in pairs (one conversion for two values, no repacking).  A thread's 32
        values lie on 2 rows and 16 columns (wgmma_acc).  rP (a bf16 tensor of accQ's layout)
        stays in registers for the caller, which stores it by stmatrix into its swizzled tile.
        unit_norms: q and k came normalised, rk = rq = 1 on every row < L, and the products by them
        are left out; a column j >= L then meets only A's rows i > j, zeroed by beta_i = 0, and P's
        rows i >= L, outputs the chains never store, so the outputs are the same bits."""
        tc = thr.partition_C(cute.make_identity_tensor((C, C)))
        nc = cute.size(accG) // 2
        rows = [tc[wgmma_acc.first_of_row(h)][0] for h in range(2)]
        j0 = tc[0][1]        # the thread's first column; its others are j0 + wgmma_acc.col_offset(c)
        g_row = [sG[r] for r in rows]
        b_row = [sB[r] for r in rows]
        br_row = b_row if unit_norms else [b * sR[r] for b, r in zip(b_row, rows)]
        # A's row i is 0 where beta_i is: by a select, not by the product, so that the rows past
        # L (the next sequence's keys, whatever their values) carry nothing into T's rows < L
        # the masks as distances from the thread's first column j0 against compile-time offsets (the
        # columns are j0 + col_offset(c)): one compare a value, no column indices
        a_dist = [cutlass.select_(b != Float32(0.0), r, Int32(-1)) - j0 for b, r in zip(b_row, rows)]
        p_dist = rows[0] - j0
        q_row = [scale for r in rows] if unit_norms else [scale * sRq[r] for r in rows]
        pair = None if f16 else cute.make_rmem_tensor(2, Float32)     # fp32 A: columns j, j + 1 as one store
        g_col = [None] * nc
        r_col = [None] * nc
        for e in cutlass.range_constexpr(cute.size(accG)):
            hh = wgmma_acc.row(e)
            c = wgmma_acc.col(e)
            if cutlass.const_expr(e % 4 == 0):
                for cc in (c, c + 1):
                    g_col[cc] = sG[j0 + wgmma_acc.col_offset(cc)]
                    if cutlass.const_expr(not unit_norms):
                        r_col[cc] = sR[j0 + wgmma_acc.col_offset(cc)]
            rx = fastexp.exp(g_row[hh] - g_col[c])
            if cutlass.const_expr(not unit_norms):
                rx = r_col[c] * rx
            k = wgmma_acc.col_offset(c)
            a = cutlass.select_(a_dist[hh] > k, accG[e] * br_row[hh] * rx, Float32(0.0))
            accQ[e] = cutlass.select_(p_dist >= k - wgmma_acc.row_offset(hh), accQ[e] * q_row[hh] * rx, Float32(0.0))
            if cutlass.const_expr(f16):
                accG[e] = a
            else:
                pair[e % 2] = a
                if cutlass.const_expr(e % 2 == 1):
                    sAst[rows[hh], (j0 + wgmma_acc.col_offset(c)) // 2, None].store(pair.load())
        if cutlass.const_expr(f16):
            # fp16 pairs, four 8 x 8 matrices a stmatrix (the rows 144 bytes apart, 16-byte aligned)
            rA = cute.make_rmem_tensor_like(accG, cutlass.Float16)
            rA.store(accG.load().to(cutlass.Float16))
            cute.copy(st_a, st_a.retile(rA), st_a.partition_D(sAst))
        rP.store(accQ.load().to(BFloat16))       # bf16 pairs: one conversion for two values

    @cute.jit
    def keys_in_range(self, accG, sR, tidx: Int32):
        """inverse_f16's key check on this thread's values of G = K K^T (the accumulators of
        issue_products): ||k_i rk_i||^2 = G_ii rk_i^2 within F16_INVERSE_KNORM2_MAX for each row i
        whose diagonal it holds (inverse_f16.key_in_range); rows with rk = 0 pass (the caller's rk
        past L: their keys are the next sequence's, which must not choose this one's inverse).
        Row i = 16 w + 8 h + g (warp w, g = lane // 4) has G_ii in value wgmma_acc.diagonal(w, h,
        g % 2) of the lane that holds_diagonal; w and g are known only at run time, so the value is
        chosen by selects (no dynamic register index).  The caller agrees the threads' answers."""
        warp = tidx // 32
        lane = tidx % 32
        g = lane // 4
        holds = wgmma_acc.holds_diagonal(lane)
        ok = Boolean(True)
        for h in cutlass.range_constexpr(2):
            v = Float32(0.0)
            for w in cutlass.range_constexpr(4):
                e0, e1 = (wgmma_acc.diagonal(w, h, odd) for odd in (0, 1))
                v = cutlass.select_(warp == w, cutlass.select_(g % 2 == 1, accG[e1], accG[e0]), v)
            r = sR[16 * warp + 8 * h + g]
            # rk = 0: a row past L, whose key (the next sequence's) must not choose the inverse
            skip = (holds == False) | (r == Float32(0.0))  # noqa: E712
            ok = ok & (skip | inverse_f16.key_in_range(v * r * r))
        return ok

    @cute.jit
    def inverse(self, sA, sX, tidx: Int32, sEye):
        """Tm = (I + A)^-1 in place over sA, by 16 x 16 blocks (rows / columns of block b: 16 b ..):
        1. warps 0, 1: the diagonal blocks 2w, 2w + 1 by forward substitution (lane: one column;
           recompute_wu's solve and its four partial sums, so that this path rounds as stage 1);
        2. warps 2p, 2p + 1: the 32 x 32 merge of pair p, T_{2p+1,2p} = -D_{2p+1} (A_{2p+1,2p} D_{2p});
        3. all four warps: T_{[2,3],[0,1]} = -T_{[2,3],[2,3]} (A_{[2,3],[0,1]} T_{[0,1],[0,1]});
        the merges on mma.sync in one TF32 pass (mma_tf32), skipping k-steps of exact zeros.
        sEye: 2 BLK - 1 floats, 1 at BLK - 1 and 0 elsewhere, so that row ii's right-hand side
        e_jj[ii] is one shared load: as 16 selects of a 0 / 1 float they would be loop invariants that
        ptxas hoists out of the chunk loop, 16 registers the role would spill."""
        warp = tidx // 32
        lane = tidx % 32
        xcol = cute.make_rmem_tensor(BLK, Float32)
        if warp < 2:
            rb = (2 * warp + lane // BLK) * BLK
            jj = lane % BLK
            for ii in cutlass.range_constexpr(BLK):
                # four partial sums, column m into part[m % 4], as stage 1 sums them (the same bits)
                part = [Float32(0.0)] * 4
                for m in cutlass.range_constexpr(ii):
                    part[m % 4] = part[m % 4] + sA[rb + ii, rb + m] * xcol[m]
                xcol[ii] = sEye[ii - jj + BLK - 1] - ((part[0] + part[1]) + (part[2] + part[3]))
            cute.arch.sync_warp()
            for ii in cutlass.range_constexpr(BLK):
                sA[rb + ii, rb + jj] = xcol[ii]
        cute.arch.barrier(barrier_id=Barrier.INTRA, number_of_threads=self.INTRA_THREADS)
        p = warp // 2
        wl = warp % 2
        lo = 2 * BLK * p
        hi = lo + BLK
        acc = cute.make_rmem_tensor(4, Float32)
        acc.fill(0.0)
        mma_tf32.tile_16x8(acc, sA, hi, lo, sA, lo, lo + 8 * wl, wl, 2, lane, 2)
        mma_tf32.store_tile_16x8(acc, sX, BLK * p, 8 * wl, lane, False)
        cute.arch.barrier(barrier_id=Barrier.INTRA, number_of_threads=self.INTRA_THREADS)
        acc.fill(0.0)
        mma_tf32.tile_16x8(acc, sA, hi, hi, sX, BLK * p, 8 * wl, 0, 2, lane, 2)
        mma_tf32.store_tile_16x8(acc, sA, hi, lo + 8 * wl, lane, True)
        cute.arch.barrier(barrier_id=Barrier.INTRA, number_of_threads=self.INTRA_THREADS)
        # 3: warp w owns the column block nj = w of both row blocks mi = 0, 1 of each product
        for mi in cutlass.range_constexpr(2):
            acc.fill(0.0)
            mma_tf32.tile_16x8(acc, sA, HALF + BLK * mi, 0, sA, 0, 8 * warp, warp, 4, lane, 4)
            mma_tf32.store_tile_16x8(acc, sX, BLK * mi, 8 * warp, lane, False)
        cute.arch.barrier(barrier_id=Barrier.INTRA, number_of_threads=self.INTRA_THREADS)
        for mi in cutlass.range_constexpr(2):
            acc.fill(0.0)
            mma_tf32.tile_16x8(acc, sA, HALF + BLK * mi, HALF, sX, 0, 8 * warp, 0, 2 * mi + 2, lane, 4)
            mma_tf32.store_tile_16x8(acc, sA, HALF + BLK * mi, 8 * warp, lane, True)
        cute.arch.barrier(barrier_id=Barrier.INTRA, number_of_threads=self.INTRA_THREADS)
