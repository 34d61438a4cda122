"""The register-state chain's building blocks, shared by spine_rs (its chunk loop) and the single
plan's kernel (cute_kernels/single.py, whose chain warpgroups run the same loop on two rings).

One consumer warpgroup carries S^T for 64 state columns (VB) in its accumulators; per chunk it
issues G1, G1b, G2, G3, G4 (spine_rs's module docstring): tiled_mmas makes their MMAs, Fragments
their operands and accumulators (both kernels' chains and spine_rs's map chain form them there),
acc_as_a_layout reads an accumulator in place as an A operand, issue issues one MMA's k-steps on
a ring slot, y_t and vnew turn G1's and G1b's results into the next A operands with the chunk's
coefficient table (table_row: one row of it), zero_tail zeroes a partial chunk's K and V rows,
transposed_block is the state pool's (v, k) view of the warpgroup's columns, and staged_init /
staged_signal / staged_wait hand each chunk's staged output to the store warp (the rings that feed
the chain: rings.py).
"""
from __future__ import annotations

import cutlass
import cutlass.cute as cute
import cutlass.utils.hopper_helpers as sm90_utils
from cutlass import BFloat16, Float32, Int32
from cutlass.cute.nvgpu import OperandMajorMode, warpgroup

from cute_kernels import bf16_sumsq, wgmma_acc
from gdn_prefill import grids

CHUNK = grids.CHUNK                   # 64
DK = grids.HEAD_DIM_K                 # 128
VB = grids.RS_SPINE_VBLOCK            # 64 state columns per warpgroup: M of every MMA
# the chunk's coefficient table (a slot's columns; table_row forms one row): coef_j, c_i [64 each], exp(g_last)
TAB = 2 * CHUNK + 4
TAB_C = CHUNK                         # c_i = scale rq_i exp(gcum_i)
TAB_GL = 2 * CHUNK                    # exp(g_last)

STAGED_ARRIVALS = 4                   # a chain warpgroup's four warps


def staged_init(barriers, count: int):
    """One thread: the `count` staged-output signals at `barriers` (staged_signal, staged_wait)."""
    for b in range(count):
        cute.arch.mbarrier_init(barriers + b, STAGED_ARRIVALS)    # one-way: the slot's ring frees the slot


@cute.jit
def staged_signal(barriers, stage: Int32, lane: Int32):
    """A chain warp hands its rows of an output tile staged in shared memory (stmatrix) to the store
    warp: it fences its writes for the async proxy (the TMA store reads them), then its lane 0
    arrives on signal `stage`.  A one-way signal: the buffer is a ring slot's, whose empty barrier
    the store warp arrives on once its TMA store has read the tile."""
    cute.arch.fence_proxy("async.shared", space="cta")
    cute.arch.sync_warp()
    if lane == 0:
        cute.arch.mbarrier_arrive(barriers + stage)     # one-way, not a ring: the store warp only waits on it


def staged_wait(barriers, stage: Int32, phase: Int32):
    """The store warp: the four chain warps of signal `stage` have staged their rows (its `phase`:
    the slot's pass over the ring, mod 2)."""
    cute.arch.mbarrier_wait(barriers + stage, phase)    # one-way, not a ring: nobody waits for a release


def can_implement(K: int, V: int, Hk: int, Hv: int, qkv_aligned16: bool) -> tuple[bool, str]:
    """What a kernel built on this chain accepts (spine_rs's and single.py's can_implement): K = V = 128,
    Hv a multiple of Hk, and q, k, v, out TMA-readable; the reason where it does not."""
    if K != DK or V != grids.HEAD_DIM_V:
        return False, f"head dims must be {DK} (got K={K}, V={V})"
    if Hk <= 0 or Hv % Hk != 0:
        return False, f"Hv ({Hv}) must be a multiple of Hk ({Hk})"
    if not qkv_aligned16:
        return False, "q, k, v and out must have 16-byte aligned bases and strides of 8 elements (TMA)"
    return True, ""


def tiled_mmas():
    """mma_n64: G1, G2, G4 (M = 64 v, N = 64, B K-major); mma_s: G3 (N = 128 k, B MN-major);
    both with the A operand in registers."""
    mma_n64 = sm90_utils.make_trivial_tiled_mma(
        BFloat16, BFloat16, OperandMajorMode.K, OperandMajorMode.K, Float32, (1, 1, 1),
        tiler_mn=(VB, CHUNK), a_source=warpgroup.OperandSource.RMEM)
    mma_s = sm90_utils.make_trivial_tiled_mma(
        BFloat16, BFloat16, OperandMajorMode.K, OperandMajorMode.MN, Float32, (1, 1, 1),
        tiler_mn=(VB, DK), a_source=warpgroup.OperandSource.RMEM)
    # a 64-row accumulator is read in place as the A fragment of a 64-row MMA (acc_as_a_layout):
    # same thread modes, value modes (2, 2, N/8) against (2, 2, 2) per 16-wide k block
    assert str(mma_s.tv_layout_C) == "((4,8,4),(2,2,16)):((128,1,16),(64,8,512))", str(mma_s.tv_layout_C)
    assert str(mma_n64.tv_layout_C) == "((4,8,4),(2,2,8)):((128,1,16),(64,8,512))", str(mma_n64.tv_layout_C)
    assert str(mma_n64.tv_layout_A) == "((4,8,4),(2,2,2)):((128,1,16),(64,8,512))", str(mma_n64.tv_layout_A)
    assert str(mma_s.tv_layout_A) == str(mma_n64.tv_layout_A)
    return mma_n64, mma_s


class Fragments:
    """A chain warpgroup's MMAs (tiled_mmas), their B fragments on the ring's tiles, its accumulators
    and the register A operands read from them in place, formed once for both kernels' chains (and
    spine_rs's map chain, which has no output: no sQ / sP tiles, no G2 / G4 fragments):
      accSt  S^T (64 v x 128 k, fp32)       rS = bf16(S^T): the A of G1, G2 (tSa)
      accX   Z, then Vnew^T (64 x 64)       rP: the A of G1b and G3 (tPa)
      accY   Q S, then O^T (64 x 64)        rV: the A of G4 (tVa)
    tKkb, tQb, tTb, tPqb, tKb: the B fragments of G1, G2, G1b, G4, G3; tScS, tXc: the (v, k) and
    (v, j) coordinates of accSt's and accX's values; ld_v reads V^T by transposing ldmatrix (rVt,
    rVt_cv), st_o writes O^T by transposing stmatrix (accY_cv, rO)."""

    def __init__(self, ltid, sKk, sT, sK, sQ=None, sP=None):
        output = sQ is not None
        self.mma_n64, self.mma_s = tiled_mmas()
        thr_n = self.mma_n64.get_slice(ltid)
        thr_s = self.mma_s.get_slice(ltid)
        self.tKkb = thr_n.make_fragment_B(thr_n.partition_B(sKk))        # (MMA, 1, 8, slot)
        if output:
            self.tQb = thr_n.make_fragment_B(thr_n.partition_B(sQ))      # (MMA, 1, 8, slot)
        self.tTb = thr_n.make_fragment_B(thr_n.partition_B(sT))          # (MMA, 1, 4, slot)
        if output:
            self.tPqb = thr_n.make_fragment_B(thr_n.partition_B(sP))     # (MMA, 1, 4, slot)
        self.tKb = thr_s.make_fragment_B(thr_s.partition_B(sK))          # (MMA, 1, 4, slot)
        self.accSt = cute.make_rmem_tensor(thr_s.partition_shape_C((VB, DK)), Float32)
        self.accX = cute.make_rmem_tensor(thr_n.partition_shape_C((VB, CHUNK)), Float32)
        if output:
            self.accY = cute.make_rmem_tensor(thr_n.partition_shape_C((VB, CHUNK)), Float32)
        assert str(self.accSt.layout) == "((2,2,16),1,1):((1,2,4),0,0)", str(self.accSt.layout)
        assert str(self.accX.layout) == "((2,2,8),1,1):((1,2,4),0,0)", str(self.accX.layout)
        self.rS = cute.make_rmem_tensor_like(self.accSt, BFloat16)
        self.rP = cute.make_rmem_tensor_like(self.accX, BFloat16)
        if output:
            self.rV = cute.make_rmem_tensor_like(self.accX, BFloat16)
        self.tSa = cute.make_tensor(self.rS.iterator, acc_as_a_layout(self.accSt.layout, DK // 16))
        self.tPa = cute.make_tensor(self.rP.iterator, acc_as_a_layout(self.accX.layout, CHUNK // 16))
        if output:
            self.tVa = cute.make_tensor(self.rV.iterator, acc_as_a_layout(self.accX.layout, CHUNK // 16))
        self.tScS = thr_s.partition_C(cute.make_identity_tensor((VB, DK)))
        self.tXc = thr_n.partition_C(cute.make_identity_tensor((VB, CHUNK)))
        self.ld_v = cute.make_tiled_copy_C(
            cute.make_copy_atom(cute.nvgpu.warp.LdMatrix8x8x16bOp(True, 4), BFloat16), self.mma_n64).get_slice(ltid)
        if output:
            self.st_o = cute.make_tiled_copy_C(
                cute.make_copy_atom(cute.nvgpu.warp.StMatrix8x8x16bOp(True, 4), BFloat16), self.mma_n64
            ).get_slice(ltid)
        self.rVt = cute.make_rmem_tensor_like(self.accX, BFloat16)       # V^T (64 v, 64 m)
        self.rVt_cv = self.ld_v.retile(self.rVt)
        if output:
            self.accY_cv = self.st_o.retile(self.accY)
            self.rO = cute.make_rmem_tensor_like(self.accY_cv, BFloat16)


def acc_as_a_layout(acc_layout, n_kb: int):
    """Register layout reading a 64-row accumulator as the A fragment of a 64-row MMA whose K is
    the accumulator's N: A value (k0, r, h) of k block kb is accumulator value (c0, r, 2 kb + h)."""
    (s0, s1, s2) = acc_layout.stride[0]
    return cute.make_layout(((2, 2, 2), 1, n_kb), stride=((s0, s1, s2), 0, 2 * s2))


@cute.jit
def issue(mma, acc, tA, tB, s: Int32, overwrite: cutlass.Constexpr):
    """One MMA of a chunk on slot s of the ring: the fence for the registers it reads, its k-steps
    (the first one overwriting acc when `overwrite`), the commit of its group."""
    warpgroup.fence()
    for kb in cutlass.range_constexpr(cute.size(tA, mode=[2])):
        if cutlass.const_expr(overwrite):
            mma.set(warpgroup.Field.ACCUMULATE, kb > 0)
        cute.gemm(mma, acc, tA[None, None, kb], tB[None, None, kb, s], acc)
    warpgroup.commit_group()


@cute.jit
def y_t(rP, rVt, accX, sTab, sBt, tXc, s: Int32, bs: Int32):
    """Y'^T = (V^T - Z diag(a)) diag(beta) as bf16 (the A operand of G1b), a_m = exp(gcum_m) rk_m
    (columns m >= L: (0 - 0 * 0) beta_m, the V and K rows zeroed and beta_m finite: stage 1's or 0).
    beta scales Y before its one rounding and Tu holds Tm alone, as FLA rounds beta v once: with beta
    inside Tu it would be rounded twice (Tu's entry, then Y; docs/PERFORMANCE.md, numerics).  (a_m, beta_m)
    is loaded once per column, one 8-byte pair (a thread's 32 values lie on 16 columns), and no
    element is selected: a load inside `if m < L` would make each element
    predicated code with a conversion of its own (32 F2FP and 16 PRMT where 16 F2FP pack the pairs)."""
    a_col = [sBt[0, tXc[wgmma_acc.first_of_col(c)][1], bs] for c in range(cute.size(accX) // 2)]
    b_col = [sBt[1, tXc[wgmma_acc.first_of_col(c)][1], bs] for c in range(cute.size(accX) // 2)]
    # V^T's values widened a word (two adjacent columns) at a time: a shift and a mask, exactly
    words = cute.recast_tensor(rVt, Int32)
    pair = None
    for e in cutlass.range_constexpr(cute.size(accX)):
        if cutlass.const_expr(e % 2 == 0):
            pair = bf16_sumsq.widen_bf16x2(words[e // 2])
        rP[e] = BFloat16((pair[e % 2] - accX[e] * a_col[wgmma_acc.col(e)]) * b_col[wgmma_acc.col(e)])


@cute.jit
def table_row(gl: Float32, g: Float32, rk: Float32, rq, scale: Float32, live):
    """One row of the chunk's coefficient table from its gate data (gl: the chunk's last gcum; g,
    rk of the row; rq(): its rq, read only where live): coef = exp(gl - g) rk (G3's P^T), c =
    scale rq exp(g) (the output's rows) and a = exp(g) rk (y_t's); all 0 where not live (past L)."""
    coef = Float32(0.0)
    c = Float32(0.0)
    a = Float32(0.0)
    if live:
        e = cute.math.exp(g)
        coef = cute.math.exp(gl - g) * rk
        c = scale * rq() * e
        a = e * rk
    return coef, c, a


@cute.jit
def vnew(rV, rP, accX, sTab, tXc, L: Int32, s: Int32):
    """Vnew^T (G1b's result) with columns j >= L selected to 0 (Tu rows there are another
    sequence's): bf16 into rV (the A operand of G4; None without an output), and P^T = Vnew^T coef_j
    into rP (the A operand of G3)."""
    if L >= CHUNK:      # a full chunk: every column is live, no select (a warp-uniform branch)
        _vnew_columns(rV, rP, accX, sTab, tXc, L, s, True)
    else:
        _vnew_columns(rV, rP, accX, sTab, tXc, L, s, False)


@cute.jit
def _vnew_columns(rV, rP, accX, sTab, tXc, L: Int32, s: Int32, full: cutlass.Constexpr):
    """vnew's values; full: every column is live (no select)."""
    for e in cutlass.range_constexpr(cute.size(accX)):
        j = tXc[e][1]
        vn = accX[e]
        if cutlass.const_expr(not full):
            vn = Float32(0.0)
            if j < L:
                vn = accX[e]
        if cutlass.const_expr(rV is not None):
            rV[e] = BFloat16(vn)
        rP[e] = BFloat16(vn * sTab[j, s])


@cute.jit
def zero_tail(sK, sV_vj, L: Int32, ltid: Int32, wg, active, s: Int32, nwg: cutlass.Constexpr, bar: cutlass.Constexpr,
              vs=None):
    """A partial chunk's rows j >= L in the ring's slot s, before G1.  K rows may be NaN (NaN * 0 =
    NaN inside G3): thread ltid owns column k = ltid, warpgroup wg the rows L + wg, L + wg + active,
    ... (the tile is every active warpgroup's); and this warpgroup's V rows (another sequence's),
    column ltid % 64, rows L + ltid // 64, + 2, ...: with Z's columns there 0 (K rows) and a_j = 0
    (the table), Y^T's columns j >= L are then exactly 0 without a select per element.  vs: the
    V tile's slot where it is not s (the single kernel's rings); bar: the named barrier of the
    consumer warpgroups (128 active threads)."""
    for j in cutlass.range(L + wg, CHUNK, active, unroll=1):
        sK[ltid, j, s] = BFloat16(0.0)
    v_slot = s
    if cutlass.const_expr(vs is not None):
        v_slot = vs
    for j in cutlass.range(L + ltid // VB, CHUNK, 128 // VB, unroll=1):
        sV_vj[ltid % VB, j, v_slot * nwg + wg] = BFloat16(0.0)
    cute.arch.fence_proxy("async.shared", space="cta")
    cute.arch.barrier(barrier_id=bar, number_of_threads=128 * active)


@cute.jit
def transposed_block(pool: cute.Tensor, slot: Int32, hv: Int32, col0: Int32) -> cute.Tensor:
    """S^T[v, k] = S[k, col0 + v] of one slot and head: the (v, k) view the accumulators index."""
    g = cute.domain_offset((0, col0), pool[slot, hv, None, None])
    return cute.make_tensor(g.iterator, cute.select(g.layout, mode=[1, 0]))
