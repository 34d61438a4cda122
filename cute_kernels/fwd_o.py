"""Stage 3 "fwd_o": the chunk output of the Gated DeltaNet prefill, on tensor cores.

One CTA per (chunk slot c, value head hv), FWD_O_THREADS = 256 threads = two
warpgroups.  With slot c holding chunk i of sequence n (slots.chunk_of_slot), t0 = cu_seqlens[n]
+ 64 i, L = min(CHUNK, cu_seqlens[n+1] - t0) and rows i, j in [0, L) of the chunk (docs/DESIGN.md §1,
stage 3):

    out[t0+i, hv, :] = scale * ( exp(gcum_i) * (q̂_i . S)
                                 + sum_{j<=i} (q̂_i . k̂_j) exp(gcum_i - gcum_j) vnew_j )

with S = h[c, hv] (bf16, S[k, v]), q̂ = q[., hk, :] * rq[., hv], k̂ = k[., hk, :] * rk[., hv],
hk = hv // (Hv // Hk).  Rows i >= L are never read from global memory nor written; a
slot no chunk maps to, or whose sequence is a padding entry (use_state_indices
and state_indices[n] < 0), returns at once.

The l2norm factors are per-row scalars, so the raw bf16 q and k tiles are the MMA
operands and rq / rk are folded into fp32 scalings of the accumulators:
(q̂_i . k̂_j) = rq_i rk_j (q_i . k_j) and q̂_i . S = rq_i (q_i . S).  Warpgroup w
(w = 0, 1) owns the V columns [64 w, 64 w + 64) of the output and runs three
warpgroup MMAs (bf16 operands, fp32 accumulators):

    1. accP = Q Kᵀ                       M=64 (i), N=64 (j), K=128   A = sQ, B = sK (both K-major)
       P_ij = accP_ij * scale rq_i * rk_j * exp(gcum_i - gcum_j)   for j <= i < L, else exactly 0
    2. accO = Q S[:, cols_w]             M=64 (i), N=64 (v), K=128   A = sQ, B = sS_w (MN-major)
       accO_i *= scale rq_i exp(gcum_i)
    3. accO += bf16(P) Vnew[:, cols_w]   M=64 (i), N=64 (v), K=64    A = P from registers, B = sV_w

P (64 x 64) is computed by both warpgroups (1 MFLOP each; the kernel is bound by
memory traffic, not by the tensor cores), so neither waits for the other.
ROUNDING: P is rounded to bf16 to be the register A operand of MMA 3 (as FLA does
for the same product); everything else stays in fp32 accumulators.  The fp32
accumulator fragment of a 64 x 64 MMA and the bf16 A fragment of a 64 x 64 (K) MMA
hold the same (row, column) pairs in every thread (checked at trace time), so the
conversion is register-local.

Loads (all before one CTA barrier; every tile is read by the tensor cores only):
  * h[c, hv] (128 x 128) and Vnew rows j < L (64 x 128): compact workspace, 16 B
    cp.async into MN-major swizzled tiles; Vnew rows j >= L are zeroed in smem (they
    may be another sequence's rows or uninitialised workspace: NaN * 0 = NaN).
  * q and k rows i < L: user tensors.  Variant "fwd_o_bf16" (strides promise only 2-byte
    alignment): element loads (LDG.U16, row-coalesced) packed into 16 B swizzled smem
    stores.  Variant "fwd_o_bf16_a16" (q, k 16-byte aligned, token/head strides multiples
    of 8 elements): 16 B cp.async like h and Vnew.  Rows i >= L are zeroed in smem.
  * gcum, rq, rk of rows < L (0 for rows >= L) into smem.
Shared memory (SMEM_BYTES = 82,944 B; bf16 tiles 1024-aligned):
    sG, sRq, sRk  3 x 64 fp32     sQ  64 x 128   16,384 B     sK  64 x 128   16,384 B
    sS 128 x 128   32,768 B       sV  64 x 128   16,384 B
  -> two CTAs (16 warps) per SM, which needs <= 128 registers per thread and no spills
     (python -m gdn_prefill.sass reports them).
Stores (rows i < L only):
  * "fwd_o_bf16": out has free strides (2-byte alignment), so each thread stores its
    accumulator elements one bf16 at a time.
  * "fwd_o_bf16_a16" (out 16-byte aligned, strides multiples of 8 elements): warpgroup w
    rounds its 64 x 64 O tile to bf16, writes it with stmatrix into a 128-byte-swizzled
    row-major tile that aliases its own sV_w (read only by its own MMA 3, complete by
    then), and each row i < L is stored with 16-byte STG (8 threads per 128-byte row).
    Only warpgroup-local named barriers (Barrier.WG + w): no extra smem, no CTA barrier.
The two variants are compile-time branches of one kernel: the launch function reads the
alignment and stride divisibility of the q, k and out types (fake_args(aligned=...)).
"""
from __future__ import annotations

import enum

import cuda.bindings.driver as cuda

import cutlass
import cutlass.cute as cute
import cutlass.utils.hopper_helpers as sm90_utils
from cutlass import BFloat16, Float32, Int32
from cutlass.cute.nvgpu import OperandMajorMode, cpasync, warpgroup
from cutlass.tensor_utils import LayoutEnum

from cute_kernels import fake, pdl, wgmma_acc
from cute_kernels.fastexp import exp as _exp
from cute_kernels.slots import chunk_of_slot
from gdn_prefill import grids

# ---- tile geometry (static) ----------------------------------------------------
_C = grids.CHUNK                 # 64 rows per chunk
_K = grids.HEAD_DIM_K            # 128
_V = grids.HEAD_DIM_V            # 128
_NT = grids.FWD_O_THREADS        # 256 = two warpgroups
_WG = 128                        # threads per warpgroup
_NWG = _NT // _WG                # 2
_VW = _V // _NWG                 # 64 output columns per warpgroup
_VEC = 8                         # bf16 elements per 16-byte vector


class Barrier(enum.IntEnum):
    """Named barriers (0: the CTA's)."""
    WG = 1                       # + wg: warpgroup wg's own (its O staging over sV_w)

assert _NT == 256 and _C == 64 and _K == 128 and _V == 128, "tilings below assume these"

_ROW_BYTES = 4 * _C                                  # one fp32 row scalar array
_TILE_BYTES = (_C * _K, _C * _K, _K * _V, _C * _V)   # elements of sQ, sK, sS, sV


def _smem_bytes() -> int:
    """Bytes of SharedStorage below (checked against the struct at trace time)."""
    def up(x, a):
        return (x + a - 1) // a * a
    off = 0
    for _ in range(3):                                  # sG, sRq, sRk (16-byte aligned)
        off = up(off, 16) + _ROW_BYTES
    for n in _TILE_BYTES:                               # sQ, sK, sS, sV (1024-byte aligned)
        off = up(off, 1024) + 2 * n
    return off


SMEM_BYTES = _smem_bytes()
assert SMEM_BYTES <= grids.MAX_SMEM // 2, "two CTAs per SM"


# ---- MMA and shared-memory layouts -------------------------------------------------
_T_QK = (_C, _C, _K)     # MMA 1 (M, N, K): P = Q Kᵀ
_T_QS = (_C, _VW, _K)    # MMA 2: O_w = Q S_w
_T_PV = (_C, _VW, _C)    # MMA 3: O_w += P Vnew_w


def _smem_layouts():
    """Swizzled (composed) layouts of the four operand tiles.

    sQ : (64 i, 128 k)          K-major A of MMAs 1 and 2 (q rows as stored)
    sK : (64 j, 128 k)          K-major B of MMA 1 (k rows as stored)
    sS : (64 v, 128 k, 2 w)     MN-major B of MMA 2: S[k, 64 w + v]; one 16 KB tile per warpgroup
    sV : (64 v, 64 j, 2 w)      MN-major B of MMA 3: Vnew[j, 64 w + v]; one 8 KB tile per warpgroup
    """
    sQ = cute.slice_(sm90_utils.make_smem_layout_a(LayoutEnum.ROW_MAJOR, _T_QK, BFloat16, 1), (None, None, 0))
    sK = cute.slice_(sm90_utils.make_smem_layout_b(LayoutEnum.ROW_MAJOR, _T_QK, BFloat16, 1), (None, None, 0))
    sS = sm90_utils.make_smem_layout_b(LayoutEnum.COL_MAJOR, _T_QS, BFloat16, _NWG)
    sV = sm90_utils.make_smem_layout_b(LayoutEnum.COL_MAJOR, _T_PV, BFloat16, _NWG)
    return sQ, sK, sS, sV


_T_O = (_C, _C, _VW)     # O staging tile (64 i, 64 v), v contiguous: a "K-major A" layout with K = v


def _smem_layout_o():
    """(64 i, 64 v, 2 w) bf16, v contiguous, 128-byte swizzle; aliases the bytes of sV."""
    return sm90_utils.make_smem_layout_a(LayoutEnum.ROW_MAJOR, _T_O, BFloat16, _NWG)


def _aligned16(t) -> bool:
    """Trace-time: t's base is 16-byte aligned and its dynamic strides (all but the last,
    unit, one) are multiples of 8 elements, so every row start is 16-byte aligned."""
    if t.iterator.alignment < 16:
        return False
    return all(cute.get_divisibility(s) % _VEC == 0 for s in t.stride[:-1])


def _tiled_mmas():
    mma_qk = sm90_utils.make_trivial_tiled_mma(
        BFloat16, BFloat16, OperandMajorMode.K, OperandMajorMode.K, Float32, (1, 1, 1), tiler_mn=_T_QK[:2])
    mma_qs = sm90_utils.make_trivial_tiled_mma(
        BFloat16, BFloat16, OperandMajorMode.K, OperandMajorMode.MN, Float32, (1, 1, 1), tiler_mn=_T_QS[:2])
    mma_pv = sm90_utils.make_trivial_tiled_mma(
        BFloat16, BFloat16, OperandMajorMode.K, OperandMajorMode.MN, Float32, (1, 1, 1), tiler_mn=_T_PV[:2],
        a_source=warpgroup.OperandSource.RMEM)
    return mma_qk, mma_qs, mma_pv


def _p_as_a_operand_layout(acc_layout):
    """Register layout that reads the (converted) P accumulator as MMA 3's A fragment.

    The accumulator of a 64 x 64 MMA holds, per thread, values (c0, r, g): column
    2t + c0 + 8 g, row r0 + 8 r (g < 8 column groups); the A fragment of K-block kb of
    a 64 x 16 (K) MMA holds (k0, r, h): k = 2t + k0 + 8 h + 16 kb, same rows.  So
    A value (k0, r, h) of K-block kb is accumulator value (c0, r, g = 2 kb + h).
    """
    (s0, s1, s2) = acc_layout.stride[0]
    n_kb = _T_PV[2] // 16
    return cute.make_layout(((2, 2, 2), 1, n_kb), stride=((s0, s1, s2), 0, 2 * s2))


def _check_fragment_correspondence(mma_qk, mma_qs, mma_pv):
    """Trace-time guard for _p_as_a_operand_layout: the (thread, value) -> (row, column)
    maps of MMA 1's accumulator and MMA 3's A operand are the ones derived there
    (thread modes equal; value modes (2,2,8) vs (2,2,2) with the same strides, i.e. A's
    16-column K-block kb covers the accumulator's column groups 2 kb and 2 kb + 1)."""
    c = mma_qk.tv_layout_C
    a = mma_pv.tv_layout_A
    assert str(mma_qs.tv_layout_C) == str(c) == str(mma_pv.tv_layout_C)   # accO rows = accP rows
    assert str(c) == "((4,8,4),(2,2,8)):((128,1,16),(64,8,512))", str(c)
    assert str(a) == "((4,8,4),(2,2,2)):((128,1,16),(64,8,512))", str(a)


# ---- device helpers -------------------------------------------------------------
def _row_copy(atom, cols: int):
    """A tiled copy of rows of `cols` elements: each thread moves 8 consecutive elements
    (16 B); NT // (cols / 8) rows per pass, consecutive threads along a row."""
    g = cols // _VEC
    return cute.make_tiled_copy_tv(atom, cute.make_layout((_NT // g, g), stride=(g, 1)),
                                   cute.make_layout((1, _VEC)))


@cute.jit
def _load_rows(cp: cute.TiledCopy, st_atom: cute.CopyAtom, tid: Int32, src: cute.Tensor, dst: cute.Tensor,
               L: Int32):
    """dst[i, :] = src[i, :] for rows i < L, 0 for rows L <= i < 64 (rows >= L never read).

    src: (64, 128) gmem view, 2-byte alignment only -> element loads; all loads of the
    tile are issued before the 16-byte smem stores.
    """
    thr = cp.get_slice(tid)
    tSg = thr.partition_S(src)                                        # (CPY, passes, 1)
    tSs = thr.partition_D(dst)
    tSc = thr.partition_S(cute.make_identity_tensor((_C, _K)))
    frag = cute.make_rmem_tensor_like(tSg, BFloat16)
    npass = cute.size(tSg, mode=[1])
    for m in cutlass.range_constexpr(npass):
        row, _ = tSc[(0, m, 0)]
        if row < L:
            cute.autovec_copy(tSg[None, m, None], frag[None, m, None])
        else:
            frag[None, m, None].fill(0.0)
    cute.copy(st_atom, frag, tSs)


@cute.kernel
def _fwd_o_kernel(
    q: cute.Tensor,
    k: cute.Tensor,
    gcum: cute.Tensor,
    rq: cute.Tensor,
    rk: cute.Tensor,
    h: cute.Tensor,
    vnew: cute.Tensor,
    cu_seqlens: cute.Tensor,
    state_indices: cute.Tensor,
    out: cute.Tensor,
    scale: Float32,
    use_state_indices: Int32,
    aligned: cutlass.Constexpr[bool],
):
    pdl.enter()
    tid, _, _ = cute.arch.thread_idx()
    c, hv, _ = cute.arch.block_idx()
    wg = cute.arch.make_warp_uniform(cute.arch.warp_idx()) // (_WG // 32)    # warpgroup 0 or 1
    wtid = tid % _WG

    lay_q, lay_k, lay_s, lay_v = _smem_layouts()
    mma_qk, mma_qs, mma_pv = _tiled_mmas()
    _check_fragment_correspondence(mma_qk, mma_qs, mma_pv)

    # ---- shared memory (static; allocated before any branch) --------------------
    @cute.struct
    class SharedStorage:
        sG: cute.struct.Align[cute.struct.MemRange[Float32, _C], 16]
        sRq: cute.struct.Align[cute.struct.MemRange[Float32, _C], 16]
        sRk: cute.struct.Align[cute.struct.MemRange[Float32, _C], 16]
        sQ: cute.struct.Align[cute.struct.MemRange[BFloat16, cute.cosize(lay_q)], 1024]
        sK: cute.struct.Align[cute.struct.MemRange[BFloat16, cute.cosize(lay_k)], 1024]
        sS: cute.struct.Align[cute.struct.MemRange[BFloat16, cute.cosize(lay_s)], 1024]
        sV: cute.struct.Align[cute.struct.MemRange[BFloat16, cute.cosize(lay_v)], 1024]

    assert SharedStorage.size_in_bytes() == SMEM_BYTES, (SharedStorage.size_in_bytes(), SMEM_BYTES)
    smem = cutlass.utils.SmemAllocator()
    storage = smem.allocate(SharedStorage)
    sG = storage.sG.get_tensor(cute.make_layout(_C))
    sRq = storage.sRq.get_tensor(cute.make_layout(_C))
    sRk = storage.sRk.get_tensor(cute.make_layout(_C))
    sQ = storage.sQ.get_tensor(lay_q.outer, swizzle=lay_q.inner)             # (64 i, 128 k)
    sK = storage.sK.get_tensor(lay_k.outer, swizzle=lay_k.inner)             # (64 j, 128 k)
    sS = storage.sS.get_tensor(lay_s.outer, swizzle=lay_s.inner)             # (64 v, 128 k, 2)
    sV = storage.sV.get_tensor(lay_v.outer, swizzle=lay_v.inner)             # (64 v, 64 j, 2)
    lay_s_kv = cute.select(lay_s, mode=[1, 0, 2])
    sS_kv = storage.sS.get_tensor(lay_s_kv.outer, swizzle=lay_s_kv.inner)    # (128 k, 64 v, 2) same bytes
    lay_v_jv = cute.select(lay_v, mode=[1, 0, 2])
    sV_jv = storage.sV.get_tensor(lay_v_jv.outer, swizzle=lay_v_jv.inner)    # (64 j, 64 v, 2) same bytes

    # ---- which chunk, and is it live? -------------------------------------------
    live, n, t0, L = chunk_of_slot(c, cu_seqlens, state_indices, use_state_indices)

    if live != 0:
        Hv = gcum.shape[1]
        Hk = q.shape[1]
        hk = hv // (Hv // Hk)

        # -- (1) S = h[c, hv] and Vnew rows j < L: 16-byte cp.async into the swizzled B tiles --
        cp_async = _row_copy(cute.make_copy_atom(cpasync.CopyG2SOp(), BFloat16, num_bits_per_copy=128), _VW)
        thr_a = cp_async.get_slice(tid)
        gH = h[c, hv, None, None]                                            # (k, v) -> S[k, v]
        for w in cutlass.range_constexpr(_NWG):
            gHw = cute.local_tile(gH, (_K, _VW), (0, w))                     # (128 k, 64 v)
            cute.copy(cp_async, thr_a.partition_S(gHw), thr_a.partition_D(sS_kv[None, None, w]))
        st_atom = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), BFloat16, num_bits_per_copy=128)
        gVn = cute.domain_offset((t0, 0), vnew[None, hv, None])             # (j, v) -> vnew[t0+j, hv, v]
        tVc = thr_a.partition_S(cute.make_identity_tensor((_C, _VW)))       # (j, v) of each vector
        zero = cute.make_rmem_tensor_like(tVc[(None, 0, 0)], BFloat16)
        zero.fill(0.0)
        for w in cutlass.range_constexpr(_NWG):
            tVg = thr_a.partition_S(cute.local_tile(gVn, (_C, _VW), (0, w)))
            tVs = thr_a.partition_D(sV_jv[None, None, w])
            for m in cutlass.range_constexpr(cute.size(tVs, mode=[1])):
                row, _ = tVc[(0, m, 0)]
                if row < L:
                    cute.copy(cp_async, tVg[None, m, None], tVs[None, m, None])
                else:
                    cute.copy(st_atom, zero, tVs[(None, m, 0)])
        cute.arch.cp_async_commit_group()

        # -- (2) per-row scalars (rows >= L: 0) ----------------------------------------
        if tid < _C:
            gi = Float32(0.0)
            rqi = Float32(0.0)
            rki = Float32(0.0)
            if tid < L:
                gi = gcum[t0 + tid, hv]
                rqi = rq[t0 + tid, hv]
                rki = rk[t0 + tid, hv]
            sG[tid] = gi
            sRq[tid] = rqi * scale          # scale folded into the row factor of q
            sRk[tid] = rki

        # -- (3) raw q and k rows (rows >= L: 0) -----------------------------------------
        gQ = cute.local_tile(cute.domain_offset((t0, 0), q[None, hk, None]), (_C, _K), (0, 0))
        gK = cute.local_tile(cute.domain_offset((t0, 0), k[None, hk, None]), (_C, _K), (0, 0))
        if cutlass.const_expr(aligned):
            # 16-byte rows: cp.async like Vnew (rows >= L zeroed, never read)
            cp_qk = _row_copy(cute.make_copy_atom(cpasync.CopyG2SOp(), BFloat16, num_bits_per_copy=128), _K)
            thr_qk_cp = cp_qk.get_slice(tid)
            tQKc = thr_qk_cp.partition_S(cute.make_identity_tensor((_C, _K)))   # (i, k) of each vector
            for gX, sX in ((gQ, sQ), (gK, sK)):
                tXg = thr_qk_cp.partition_S(gX)
                tXs = thr_qk_cp.partition_D(sX)
                for m in cutlass.range_constexpr(cute.size(tXs, mode=[1])):
                    row, _ = tQKc[(0, m, 0)]
                    if row < L:
                        cute.copy(cp_qk, tXg[None, m, None], tXs[None, m, None])
                    else:
                        cute.copy(st_atom, zero, tXs[(None, m, 0)])
            cute.arch.cp_async_commit_group()
        else:
            cp_qk = _row_copy(st_atom, _K)
            _load_rows(cp_qk, st_atom, tid, gQ, sQ, L)
            _load_rows(cp_qk, st_atom, tid, gK, sK, L)

        # every tile complete and visible to the tensor cores (async proxy)
        cute.arch.cp_async_wait_group(0)
        cute.arch.fence_proxy("async.shared", space="cta")
        cute.arch.sync_threads()

        # -- (4) MMAs 1 and 2 -----------------------------------------------------------
        thr_qk = mma_qk.get_slice(wtid)
        thr_qs = mma_qs.get_slice(wtid)
        thr_pv = mma_pv.get_slice(wtid)
        tQa1 = thr_qk.make_fragment_A(thr_qk.partition_A(sQ))               # (MMA, 1, 8)
        tKb = thr_qk.make_fragment_B(thr_qk.partition_B(sK))                # (MMA, 1, 8)
        tQa2 = thr_qs.make_fragment_A(thr_qs.partition_A(sQ))               # (MMA, 1, 8)
        tSb = thr_qs.make_fragment_B(thr_qs.partition_B(sS))                # (MMA, 1, 8, 2)
        tVb = thr_pv.make_fragment_B(thr_pv.partition_B(sV))                # (MMA, 1, 4, 2)
        accP = cute.make_rmem_tensor(thr_qk.partition_shape_C(_T_QK[:2]), Float32)
        accO = cute.make_rmem_tensor(thr_qs.partition_shape_C(_T_QS[:2]), Float32)
        # flat index e = c0 + 2 r + 4 g of both accumulators (see _check_fragment_correspondence)
        assert str(accP.layout) == "((2,2,8),1,1):((1,2,4),0,0)", str(accP.layout)
        assert str(accO.layout) == "((2,2,8),1,1):((1,2,4),0,0)", str(accO.layout)
        tPc = thr_qk.partition_C(cute.make_identity_tensor(_T_QK[:2]))      # (i, j) of accP[e]
        tOc = thr_qs.partition_C(cute.make_identity_tensor(_T_QS[:2]))      # (i, v) of accO[e]

        warpgroup.fence()
        for kb in cutlass.range_constexpr(cute.size(tQa1, mode=[2])):
            mma_qk.set(warpgroup.Field.ACCUMULATE, kb != 0)
            cute.gemm(mma_qk, accP, tQa1[None, None, kb], tKb[None, None, kb], accP)
        warpgroup.commit_group()
        for kb in cutlass.range_constexpr(cute.size(tQa2, mode=[2])):
            mma_qs.set(warpgroup.Field.ACCUMULATE, kb != 0)
            cute.gemm(mma_qs, accO, tQa2[None, None, kb], tSb[None, None, kb, wg], accO)
        warpgroup.commit_group()

        # -- (5) P = tril(accP ⊙ decay) * scale rq_i rk_j, rounded to bf16 (MMA 3's A operand) --
        # accP[e], e = c0 + 2 r + 4 g (mode 0 of ((2,2,8),1,1)) holds (i, j) = (i0 + 8 r, j0 + c0 + 8 g):
        # 2 rows and 16 columns per thread, whose scalars are read once.
        nr = 2
        ncol = cute.size(accP) // nr
        rows_g = [None] * nr
        rows_f = [None] * nr
        rows_lim = [None] * nr
        for r in cutlass.range_constexpr(nr):
            i, _ = tPc[wgmma_acc.first_of_row(r)]
            rows_g[r] = sG[i]
            rows_f[r] = sRq[i]                           # scale * rq_i (0 for rows >= L)
            rows_lim[r] = Int32(cutlass.select_(i < L, i, Int32(-1)))   # j <= lim  <=>  j <= i < L
        cols_g = [None] * ncol
        cols_f = [None] * ncol
        for cc in cutlass.range_constexpr(ncol):
            _, j = tPc[wgmma_acc.first_of_col(cc)]
            cols_g[cc] = sG[j]
            cols_f[cc] = sRk[j]
        warpgroup.wait_group(1)                          # MMA 1 done; MMA 2 may still run
        for e in cutlass.range_constexpr(cute.size(accP)):
            r = wgmma_acc.row(e)
            cc = wgmma_acc.col(e)
            _, j = tPc[e]
            p = accP[e] * _exp(rows_g[r] - cols_g[cc]) * (rows_f[r] * cols_f[cc])
            # select, not multiply: exp() above the diagonal or in rows >= L may overflow
            accP[e] = Float32(cutlass.select_(j <= rows_lim[r], p, Float32(0.0)))
        rP = cute.make_rmem_tensor_like(accP, BFloat16)
        rP.store(accP.load().to(BFloat16))               # the one rounding of P (round to nearest even)
        tPa = cute.make_tensor(rP.iterator, _p_as_a_operand_layout(accP.layout))   # (MMA, 1, 4)

        # -- (6) O_i = scale rq_i exp(gcum_i) (q_i . S) + P Vnew -----------------------------
        # accO has accP's shape: accO[e] holds (i, v) = (i0 + 8 r, v0 + c0 + 8 g), same rows i.
        rows_o = [None] * nr
        for r in cutlass.range_constexpr(nr):
            rows_o[r] = rows_f[r] * _exp(rows_g[r])
        warpgroup.wait_group(0)
        for e in cutlass.range_constexpr(cute.size(accO)):
            accO[e] = accO[e] * rows_o[wgmma_acc.row(e)]
        warpgroup.fence()
        mma_pv.set(warpgroup.Field.ACCUMULATE, True)
        for kb in cutlass.range_constexpr(cute.size(tPa, mode=[2])):
            cute.gemm(mma_pv, accO, tPa[None, None, kb], tVb[None, None, kb, wg], accO)
        warpgroup.commit_group()
        warpgroup.wait_group(0)

        # -- (7) rows i < L -> out[t0 + i, hv, 64 wg + v] -------------------------------------
        if cutlass.const_expr(aligned):
            # bf16 O_w -> swizzled row-major tile over sV_w (stmatrix) -> 16-byte row stores
            lay_o = _smem_layout_o()
            assert cute.cosize(lay_o) == cute.cosize(lay_v), (cute.cosize(lay_o), cute.cosize(lay_v))
            sO = storage.sV.get_tensor(lay_o.outer, swizzle=lay_o.inner)[None, None, wg]   # (64 i, 64 v)
            rO = cute.make_rmem_tensor_like(accO, BFloat16)
            rO.store(accO.load().to(BFloat16))
            stsm = cute.make_tiled_copy_C(
                cute.make_copy_atom(cute.nvgpu.warp.StMatrix8x8x16bOp(False, 4), BFloat16), mma_qs)
            thr_stsm = stsm.get_slice(wtid)
            # every warp of this warpgroup is past MMA 3, the last reader of sV_w
            cute.arch.barrier(barrier_id=Barrier.WG + wg, number_of_threads=_WG)
            cute.copy(stsm, stsm.retile(rO), thr_stsm.partition_D(sO))
            cute.arch.barrier(barrier_id=Barrier.WG + wg, number_of_threads=_WG)       # sO_w complete
            gO = cute.local_tile(cute.domain_offset((t0, 0), out[None, hv, None]), (_C, _VW), (0, wg))
            g = _VW // _VEC                                                   # 8 vectors per row
            cp_o = cute.make_tiled_copy_tv(st_atom, cute.make_layout((_WG // g, g), stride=(g, 1)),
                                           cute.make_layout((1, _VEC)))
            thr_o = cp_o.get_slice(wtid)
            tOs = thr_o.partition_S(sO)                                       # (CPY, passes, 1)
            tOg = thr_o.partition_D(gO)
            tOcs = thr_o.partition_S(cute.make_identity_tensor((_C, _VW)))
            frag = cute.make_rmem_tensor_like(tOs, BFloat16)
            cute.copy(st_atom, tOs, frag)
            for m in cutlass.range_constexpr(cute.size(tOs, mode=[1])):
                row, _ = tOcs[(0, m, 0)]
                if row < L:
                    cute.copy(st_atom, frag[None, m, None], tOg[None, m, None])
        else:
            # element stores: free strides
            gO = cute.domain_offset((t0, wg * _VW), out[None, hv, None])
            for r in cutlass.range_constexpr(nr):
                i, _ = tOc[2 * r]
                if i < L:
                    for cc in cutlass.range_constexpr(ncol):
                        e = wgmma_acc.first_of_col(cc) + wgmma_acc.first_of_row(r)
                        ii, v = tOc[e]
                        gO[ii, v] = BFloat16(accO[e])


@cute.jit
def fwd_o(
    q: cute.Tensor,
    k: cute.Tensor,
    gcum: cute.Tensor,
    rq: cute.Tensor,
    rk: cute.Tensor,
    h: cute.Tensor,
    vnew: cute.Tensor,
    cu_seqlens: cute.Tensor,
    state_indices: cute.Tensor,
    out: cute.Tensor,
    scale: Float32,
    use_state_indices: Int32,
    stream: cuda.CUstream,
):
    T = q.shape[0]
    N = cu_seqlens.shape[0] - 1
    Hv = out.shape[1]
    gx, gy, gz = grids.grid_fwd_o(T, N, Hv)
    # compile-time: the 16-byte path iff the q, k and out types promise 16-byte rows
    aligned = _aligned16(q) and _aligned16(k) and _aligned16(out)
    _fwd_o_kernel(
        q, k, gcum, rq, rk, h, vnew, cu_seqlens, state_indices, out,
        scale, use_state_indices, aligned,
    ).launch(grid=[gx, gy, gz], block=[THREADS, 1, 1], stream=stream, use_pdl=pdl.USE_PDL)


LAUNCH = fwd_o
THREADS = grids.FWD_O_THREADS
VARIANTS: dict[str, dict] = {
    "fwd_o_bf16": {},                          # any strides (2-byte alignment)
    "fwd_o_bf16_a16": {"aligned": True},       # q, k, out 16-byte aligned, token/head strides % 8 == 0
}


def fake_args(dims, aligned: bool = False) -> list:
    """Fake arguments of fwd_o, in parameter order, stream excluded.

    aligned: q, k and out are declared 16-byte aligned with token and head strides that
    are multiples of 8 elements (the launcher must check exactly this before choosing
    "fwd_o_bf16_a16"); the kernel takes its 16-byte load/store path from these types.
    """
    qk_kw = dict(stride_div=_VEC, align=16) if aligned else {}
    return [
        fake.qk(dims, **qk_kw),        # q
        fake.qk(dims, **qk_kw),        # k
        fake.ws_th(dims),              # gcum
        fake.ws_th(dims),              # rq
        fake.ws_th(dims),              # rk
        fake.ws_h(dims),               # h
        fake.ws_tvd(dims, _V),         # vnew
        fake.cu_seqlens(dims),         # cu_seqlens
        fake.state_indices(dims),      # state_indices
        fake.tv(dims, **qk_kw),        # out
        fake.f32(1.0),                 # scale
        fake.i32(0),                   # use_state_indices
    ]
