"""Stage 1 "recompute W/U": per (chunk slot, value head), everything the spine needs.

For the L <= 64 tokens of one chunk slot c and one value head hv (docs/DESIGN.md §1):

    gcum_i = sum_{j<=i} g_j                                  (in-chunk, fp32)
    rq_i, rk_i = rsqrt(sum x^2 + 1e-6) of the q / k rows of key head hv // (Hv // Hk)
                 (1.0 when use_qk_l2norm == 0);  k̂ = rk * k
    A_ij = beta_i (k̂_i . k̂_j) exp(gcum_i - gcum_j)  for i > j, else 0
    Tm   = (I + A)^-1                                        (fp32, unit lower triangular)
    w    = Tm diag(beta exp(gcum)) K̂,   u = Tm bf16(diag(beta) V)   (stored bf16; the unfused plan)
    tu   = Tm, beta32 = beta (fp32)          (stored bf16 / fp32; the fused plan's builds: its
                                              spine scales its bracket by beta before rounding it)

The GEMM-shaped steps run on tensor cores (warpgroup MMA, bf16 operands, fp32 accumulate); the
triangular solve stays fp32: its diagonal blocks on CUDA cores, its block merges on tensor cores in
one TF32 pass (mma_tf32: FLA's precision).  256 threads = two warpgroups (WG0 = threads 0..127,
WG1 = 128..255), four CTAs per SM: a CTA's phases are a dependent chain, so CTAs hide each
other's waits.

  phase 1  1a: warp 0 loads g, beta and scans g into gcum.  1b: all 8 warps load the rows of q
           and k (2-byte element loads: q/k/v only promise 2-byte alignment) -> rq / rk, and the
           RAW k rows go to swizzled smem as bf16 (exact copies of the inputs).
  phase 2  G = K K^T (M=64, N=64, K=128) by wgmma on the raw K tile (A and B the same smem bytes,
           both K-major); WG w computes columns 32w..32w+31.  The norms and gates are folded in
           fp32 on the accumulator, A_ij = select(i > j, beta_i rk_i rk_j G_ij exp(gcum_i -
           gcum_j), 0), and A goes to smem as fp32 (zeros on and above the diagonal).
  phase 3  Tm = (I + A)^-1 in fp32, in place over A, by 16x16 blocks, i.e. the block-triangular
           inverse [[P,0],[Q,R]]^-1 = [[P^-1,0],[-R^-1 Q P^-1,R^-1]]:
           3.1 the four diagonal blocks D_b = (I + A_bb)^-1: the first warp of warpgroup w solves
               blocks 2w, 2w+1 (lane: one column) by forward substitution (registers);
           3.2 32x32 merges: T_{2p+1,2p} = -D_{2p+1} (A_{2p+1,2p} D_{2p}), pair p = warpgroup p;
           3.3 64x64 merge: T_{[2,3],[0,1]} = -T_{[2,3],[2,3]} (A_{[2,3],[0,1]} T_{[0,1],[0,1]})
               (3.2 and 3.3: 16x8 tiles of mma.sync m16n8k8 per warp, fp32 split hi + lo);
           3.4 Tw = Tm diag(beta exp(gcum) rk) and Tu = Tm ROUNDED TO BF16 into swizzled smem: the
               A operands of phase 4 (the one rounding of Tm; FLA rounds its inverse likewise).
           3.1-3.2 touch only their warpgroup's pair of blocks, so a warp sync and warpgroup
           barriers order them; only 3.3 (both pairs) needs CTA barriers.  3.2 and 3.3 skip the
           k-steps that are exact zeros of the triangular factors.
  V load   WG1 loads the V tile where A / Tm was, each row scaled by its beta and rounded once
           (FLA's bf16(beta v): beta rounded inside Tu costs accuracy, tools/rounding_model.py);
           WG0 goes on.
  phase 4  WG0: W = Tw K (M=64, N=128 as two halves of 64, K=64, B = the raw K tile, MN-major view
           of the same bytes); WG1: U = Tu V (B = the V tile).  rk_j sits in Tw's column scale, so
           K is never rescaled or rounded a second time.  Each warpgroup stages each half's bf16
           result with stmatrix into the columns of the tile that half has just consumed, then
           writes rows i < L with 16-byte vector stores.  (Halves: 64 registers per thread, four
           CTAs per SM.)

The fused plan's builds (*_a16_pqk, `with_pqk`, for spine_rs_o*): the q tile is always loaded (a
swizzled K-major tile in the Tw/Tu region); phase 2 also runs QK = Q K^T beside G = K K^T (same B
operand) and folds
    P_ij = select(j <= i, QK_ij * scale rq_i * rk_j * exp(gcum_i - gcum_j), 0)
(the exp shared with A), rounds P to bf16 (as fwd_o rounds its P), stages it with stmatrix in the
Tw slot once both warpgroups' Q K^T have read the q tile there (one more CTA barrier) and stores
rows i < L to pqk[t0 + i, hv, :] right after the phase-2 barrier.  The kernel then ends after 3.4
with Tu alone (rows i < L -> tu[t0 + i, hv, :]; no Tw, no V load, no phase 4): the register-state spine
forms Vnew = Tu (V - diag(exp(gcum) rk) K S) itself (spine_rs.py), so stage 1 stores 8 KB per
chunk and head instead of 32.

Aligned variants (*_a16: q, k, v with 16-byte aligned bases and token/head strides that are
multiples of 8 elements, declared by fake_args(aligned=True); a compile-time branch of the same
kernel, chosen from the tensor types): 1b': warp 0 loads the k tile into the swizzled K tile and
the q tile (the pqk build always, else only with use_qk_l2norm) into the Tw/Tu region, free until
3.4, by TMA (two 64-column boxes each, one mbarrier), issued before 1a so the g scan runs while
they land; 1c: each thread zeroes its 16-byte vectors of rows >= L (a box moves all 64 rows), and
with use_qk_l2norm the 16 threads of a row group finish their sums of squares by one
reduce-scatter -> rq, rk (_row_norms); the V load is WG1's cp.async.  The plain variants (2-byte
alignment) keep the element loads of 1b.

Rows >= L (past the sequence end inside a partial chunk) are zero in smem (never read from global
memory, or zeroed after the TMA box brought them): their K, V, g and beta are zero, which makes
their rows and columns of A zero (finite) and the columns j >= L of Tw / Tu zero; their W/U rows
are never written.

Shared memory (SMEM_BYTES = 52,224 B aligned, 51,200 B plain): the K tile (bf16, 16 KB, 128-byte
swizzle) followed by A / Tm (fp32, 64 rows of stride 68), whose first 16 KB become the V tile after
3.4; the t2 region (bf16, 2 x 8 KB: the q tile, then P in the Tw slot and the solve's scratch
(fp32, 32 rows of stride 36) in the Tu slot, then Tw and Tu); gcum / beta / beta*exp(gcum) / rk
(/ rq) vectors; the TMA loads' mbarrier (aligned builds only).

Sequence order and grid: in the fused plans' builds block 0 first ranks the sequences longest first
into the workspace's `order` for the register-state spine's grid (_rank_longest_first).  A launch
covers every chunk slot, the count ready's rows (grids.grid_recompute_wu_slots); the overlap plan's
workers build (recompute_wu_workers) runs them as items on the SMs the spine leaves and publishes
each in ready[slot, hv] for the spine (_publish).

Assumptions the entry point's guards must enforce (nothing here checks them):
  Hv % Hk == 0; q, k, v last dim contiguous (stride 1) with K = V = 128; w, u compact
  [T, Hv, 128] with 16-byte aligned base (what fake.ws_tvd declares: the output uses 16-byte
  vector stores); gcum/rq/rk [T, Hv] head-major (token stride 1); cu_seqlens non-decreasing with
  cu_seqlens[N] <= T (each live slot then has 1 <= L <= 64 and t0 + L <= cu_seqlens[n+1] <= T;
  slots.chunk_of_slot maps slot -> chunk).
"""
from __future__ import annotations

import enum
import functools
import typing

import cuda.bindings.driver as cuda

import cutlass
import cutlass.cute as cute
import cutlass.utils.hopper_helpers as sm90_utils
from cutlass import BFloat16, Float32, Int32
from cutlass.cute.nvgpu import OperandMajorMode, cpasync, warpgroup
from cutlass.tensor_utils import LayoutEnum

from cute_kernels import bf16_sumsq, fake, fastexp, mma_tf32, pdl, rings, tma, wgmma_acc
from cute_kernels.gates import gate_cumsum, gate_rows
from cute_kernels.slots import chunk_of_slot
from gdn_prefill import grids

C = grids.CHUNK                   # 64 tokens per chunk
DK = grids.HEAD_DIM_K             # 128
DV = grids.HEAD_DIM_V             # 128
NTHREADS = grids.RECOMPUTE_WU_THREADS  # 256
WG = 128                          # threads per warpgroup
assert C == 64 and DK == 128 and DV == 128 and NTHREADS == 2 * WG, \
    "recompute_wu's thread mapping is written for C=64, K=V=128, 256 threads (two warpgroups)"

NWARPS = NTHREADS // 32           # 8
# Four CTAs (32 warps) per SM: a launch bound (ptxas then keeps <= 64 registers per thread) and
# <= 55 KB of shared memory each (the V tile shares the A / Tm region, the solve scratch the Tu
# slot).  A CTA's phases are serial (dependent loads, the barrier-separated steps of the inverse),
# so more CTAs per SM hide each other's load and barrier waits: at fewer the SM sits idle or
# stalled (docs/PERFORMANCE.md, stage 1).
CTAS_PER_SM = 4
# ... except beside the register-state spine: the overlap plan's workers build runs WORKER_GROUPS chunk
# workers (groups of 256 threads, shared memory of their own) in one CTA per SM, on the SMs the spine
# leaves.  With three, stage 1 on those SMs bounded the call; four run it faster than the chain slows
# beside them (docs/PERFORMANCE.md, the overlap plan).
WORKER_GROUPS = 4
GROUP_BARS = 3                    # named barriers per worker group: the group's, then its two warpgroups'
assert GROUP_BARS * WORKER_GROUPS + 1 <= 16, "named barriers 1 .. 15"
SM_SMEM_BYTES = 228 * 1024        # shared memory per H100 / H200 SM
CTA_SMEM_RESERVED = 1024          # per CTA: the driver's reserved 1 KB (the cubin's .nv.reservedSmem,
                                  # which sass.resources reports as its static shared memory)
ROWS_PER_WARP = C // NWARPS       # 8 rows of q/k/v loaded by each warp
BLK = 16                          # diagonal block of the solve
HALF = C // 2                     # 32
AS = C + 4                        # A / Tm smem row stride (fp32): 16-byte rows, conflict-free float4 rows
XS = HALF + 4                     # solve scratch row stride (fp32)
A_OFF = C * DK                    # the A / Tm matrix (fp32) and later the V tile: the kv region's
                                  # second tile, in bf16 elements from its start
L2_EPS = 1e-6
ORDER_MAX_SEQS = grids.ORDER_MAX_SEQS  # sequences _rank_longest_first ranks (gdn_abi.h)
ORDER_PER_THREAD = ORDER_MAX_SEQS // NTHREADS
assert ORDER_PER_THREAD * NTHREADS == ORDER_MAX_SEQS


class Barrier(enum.IntEnum):
    """Named barriers (0: the CTA's)."""
    WG = 1                        # + wg: warpgroup wg's own (the solve's, the V load's and phase 4's steps)


def _up(x: int, a: int) -> int:
    return (x + a - 1) // a * a


def _kv_elems() -> int:
    """bf16 elements of the kv region: the K tile, then the A / Tm matrix (fp32, 64 rows of stride
    AS: 17,408 B) until phase 3.4 has read it, then the V tile (16,384 B) in its first bytes."""
    return A_OFF + 2 * C * AS


def _smem_bytes(with_pqk: bool, aligned: bool) -> int:
    """Dynamic shared memory of _shared_storage(with_pqk, aligned) (checked against the struct at
    trace time)."""
    off = 2 * _kv_elems()                    # kv: K tile | A, Tm, then V tile (offset 0, 1024-aligned)
    off = _up(off, 1024) + 2 * C * C * 2     # t2: q (with_pqk), P, the solve scratch, Tw and Tu, bf16
    off = _up(off, 16) + 4 * 4 * C           # gcum, beta, beta*exp(gcum), rk
    if with_pqk:
        off = _up(off, 16) + 4 * C           # rq
    if aligned:
        off = _up(off, 8) + 8                # the mbarrier of the k / q tiles' TMA loads
    return _up(off, 1024)                    # the struct's size is a multiple of its alignment


assert (_smem_bytes(False, False), _smem_bytes(False, True), _smem_bytes(True, True)) == (51200, 52224, 52224)
assert 2 * C * AS * 2 >= 2 * C * DV and A_OFF * 2 % 1024 == 0   # V fits where A was, swizzle-aligned
assert 4 * HALF * XS <= 2 * C * C        # the solve scratch fits in t2's Tu slot
assert CTAS_PER_SM * (_smem_bytes(True, True) + CTA_SMEM_RESERVED) <= SM_SMEM_BYTES


def ctas_per_sm(smem_bytes: int) -> int:
    """CTAs of this kernel one SM holds at a launch's dynamic shared memory (registers allow four:
    the launch bound); ncu's occupancy limit agrees."""
    return min(CTAS_PER_SM, SM_SMEM_BYTES // (smem_bytes + CTA_SMEM_RESERVED))


for _pqk, _al in ((False, False), (False, True), (True, True)):
    assert ctas_per_sm(_smem_bytes(_pqk, _al)) == CTAS_PER_SM
# the workers build: its groups' copies fill more than half of an SM's shared memory, so no two of its
# CTAs, and none beside a spine CTA, share an SM
assert SM_SMEM_BYTES // 2 < WORKER_GROUPS * _smem_bytes(True, True) + CTA_SMEM_RESERVED <= SM_SMEM_BYTES


def SMEM_BYTES(beta_dtype=Float32, aligned: bool = False, with_pqk: bool = False, workers: bool = False) -> int:  # noqa: N802
    return _smem_bytes(with_pqk, aligned) * (WORKER_GROUPS if workers else 1)


def _shared_storage(with_pqk: bool, aligned: bool):
    """The CTA's shared memory, in the order _smem_bytes counts it (built from an explicit
    annotation dict: this module's annotations are strings, `from __future__ import annotations`)."""
    def bf16(n):
        return cute.struct.Align[cute.struct.MemRange[BFloat16, n], 1024]

    def f32(n):
        return cute.struct.Align[cute.struct.MemRange[Float32, n], 16]

    fields = {"kv": bf16(_kv_elems()), "t2": bf16(2 * C * C)}
    fields.update(gc=f32(C), be=f32(C), ee=f32(C), rr=f32(C))
    if with_pqk:
        fields["rq"] = f32(C)
    if aligned:
        fields["mbar"] = cute.struct.Align[cute.struct.MemRange[cutlass.Int64, 1], 8]   # the k / q tiles' TMA
    return cute.struct(type("SharedStorage", (), {"__annotations__": fields}))


# --------------------------------------------------------------------------- layouts / MMAs
def _smem_layouts():
    """Swizzled bf16 layouts (composed layouts, 128-byte swizzle).

    kv    : (128 cols, 64 rows, 2)  MN-major B operand of phase 4; stage 0 = K tile, 1 = V tile
    kv_rc : (64 rows, 128 cols, 2)  the same bytes indexed (row, col): fills and output staging
    kk    : (64 rows, 128 k, 1)     K-major A and B operand of K K^T: the same bytes as kv_rc stage 0
    t2    : (64 rows, 64 k, 2)      K-major A operands of phase 4; stage 0 = Tw, 1 = Tu
    """
    kv = sm90_utils.make_smem_layout_b(LayoutEnum.COL_MAJOR, (C, DK, C), BFloat16, 2)
    kv_rc = cute.select(kv, mode=[1, 0, 2])
    kk = sm90_utils.make_smem_layout_a(LayoutEnum.ROW_MAJOR, (C, C, DK), BFloat16, 1)
    # the K-major K K^T operand must address exactly the bytes of the MN-major B tile (stage 0)
    assert str(cute.slice_(kk, (None, None, 0))) == str(cute.slice_(kv_rc, (None, None, 0))), (kk, kv_rc)
    t2 = sm90_utils.make_smem_layout_a(LayoutEnum.ROW_MAJOR, (C, DK, C), BFloat16, 2)
    return kv, kv_rc, kk, t2


def _tiled_mmas():
    # G[i, j] = sum_d K[i, d] K[j, d]: A = K (K-major), B = K (K-major); one warpgroup owns 32 columns
    mma_g = sm90_utils.make_trivial_tiled_mma(
        BFloat16, BFloat16, OperandMajorMode.K, OperandMajorMode.K, Float32,
        (1, 1, 1), tiler_mn=(C, HALF))
    # O[i, d] = sum_j T[i, j] X[j, d]: A = Tw / Tu (K-major), B = K / V tile (MN-major, d contiguous),
    # one half of the d columns at a time (a 64 x 128 accumulator needs >= 90 registers per thread,
    # ptxas C7602, which would keep the CTA at two per SM)
    mma_o = sm90_utils.make_trivial_tiled_mma(
        BFloat16, BFloat16, OperandMajorMode.K, OperandMajorMode.MN, Float32,
        (1, 1, 1), tiler_mn=(C, DK // 2))
    return mma_g, mma_o


def _copy_128b():
    return cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), BFloat16, num_bits_per_copy=128)


def _row_copy_g2s(threads: int = NTHREADS):
    """16-byte cp.async (L2 only) of 64 x 128 bf16 rows by `threads` threads: thread t moves the 8
    columns 8*(t % 16) .. +7 of rows t // 16 + (threads / 16) m.  (_load_v copies the V tile with it;
    the TMA-loaded K and q tiles use only its thread mapping: which vectors a thread zeroes and
    which its norms read.)"""
    atom = cute.make_copy_atom(cpasync.CopyG2SOp(cache_mode=cpasync.LoadCacheMode.GLOBAL), BFloat16,
                               num_bits_per_copy=128)
    g = DK // 8
    return cute.make_tiled_copy_tv(atom, cute.make_layout((threads // g, g), stride=(g, 1)),
                                   cute.make_layout((1, 8)))


def _aligned16(t: cute.Tensor) -> bool:
    """Trace-time: t ([T, H, 128] bf16) has a 16-byte aligned base and token/head strides that
    are multiples of 8 elements (what fake.qk / fake.tv declare with align=16, stride_div=8)."""
    return (t.iterator.alignment >= 16
            and cute.get_divisibility(t.stride[0]) % 8 == 0
            and cute.get_divisibility(t.stride[1]) % 8 == 0)


# --------------------------------------------------------------------------- kernel
class Warp(enum.IntEnum):
    """A warp with work of its own beside the CTA's phases."""
    LEAD = 0                      # the k / q tiles' TMA loads (1b'), the gate scan (1a), P's and Tu's stores


class Group(enum.IntEnum):
    """The warpgroups' parts after phase 3.4 (the first warp of each issues its TMA store)."""
    W = 0                         # W = Tw K
    U = 1                         # the V load, then U = Tu V


class _Thread(typing.NamedTuple):
    """A thread's place in the CTA."""
    tidx: Int32
    lane: Int32
    warp: Int32
    wg: Int32                     # warpgroup 0 / 1
    wtid: Int32                   # thread index inside the warpgroup
    grp: object                   # the workers build: the thread's group (a chunk worker), else None


class _Chunk(typing.NamedTuple):
    """The CTA's work: chunk slot, value head, key head, first token and rows (1 <= L <= 64)."""
    slot: Int32
    hv: Int32
    hk: Int32
    t0: Int32
    L: Int32


class _Smem(typing.NamedTuple):
    """The views of the CTA's shared memory (_shared_storage; RecomputeWU.shared)."""
    storage: object
    kv: cute.Tensor               # (128, 64, 2) MN-major B of phase 4: K tile, V tile
    rc: cute.Tensor               # (64, 128, 2) the same bytes as (row, col)
    kk: cute.Tensor               # (64, 128, 1) the K K^T operand
    t2: cute.Tensor               # (64, 64, 2) Tw, Tu (first the q tile, P, the solve scratch)
    a: cute.Tensor                # A / Tm (fp32, row stride AS) over the V tile's bytes
    a4: cute.Tensor               # ... as float4
    a2: cute.Tensor               # ... as float2
    x: cute.Tensor                # the solve scratch (fp32) in t2's Tu slot
    g: cute.Tensor                # gcum
    b: cute.Tensor                # beta
    e: cute.Tensor                # beta * exp(gcum)
    r: cute.Tensor                # rk
    qk: cute.Tensor               # (64, 128, 1) the q tile, K-major, in t2
    rq: object                    # rq (with_pqk), else None
    mbar: object                  # the k / q tiles' TMA mbarrier (aligned), else None


class RecomputeWU:
    """One build of stage 1 (module docstring).  Config: aligned (the k / q tiles by TMA, the V
    tile by cp.async) and with_pqk (P and Tu for the register-state spine, no phase 4).  `kernel` runs the
    phases in order, a method each: tiles (1b'), gates (1a), rows (1b / 1c), products (2), solve
    (3.1-3.3), stage_t (3.4), then outputs (the V load and phase 4) or the pqk build's Tu store."""

    def __init__(self, aligned: bool, with_pqk: bool, groups: int = 1):
        assert groups == 1 or (aligned and with_pqk), "the workers build is the fused plans' (aligned, pqk)"
        self.aligned = aligned
        self.with_pqk = with_pqk
        self.groups = groups          # chunk workers per CTA: 1, or WORKER_GROUPS in the workers build

    @cute.jit
    def kernel(
        self, q: cute.Tensor, k: cute.Tensor, v: cute.Tensor, g: cute.Tensor, beta: cute.Tensor,
        cu_seqlens: cute.Tensor, state_indices: cute.Tensor,
        gcum: cute.Tensor, rq: cute.Tensor, rk: cute.Tensor, beta32: cute.Tensor, w: cute.Tensor, u: cute.Tensor,
        pqk: cute.Tensor, tu: cute.Tensor, tma_w: cute.CopyAtom, mW: cute.Tensor, tma_u: cute.CopyAtom,
        mU: cute.Tensor, tma_p: cute.CopyAtom, mP: cute.Tensor, tma_t: cute.CopyAtom, mT: cute.Tensor,
        tma_kl: cute.CopyAtom, mKl: cute.Tensor, tma_ql: cute.CopyAtom, mQl: cute.Tensor, ready: cute.Tensor,
        order: cute.Tensor, scale: Float32, use_qk_l2norm: Int32, use_state_indices: Int32,
        div_hv: cute.FastDivmodDivisorV2, div_group: cute.FastDivmodDivisorV2,
    ):
        """The kernel's body (recompute_wu_kernel, the entry, calls it): the CTA's chunk slot and
        head, its shared memory, then the phases."""
        pdl.enter()
        tidx, _, _ = cute.arch.thread_idx()
        bx, _, _ = cute.arch.block_idx()
        # grids.grid_recompute_wu_slots: the value head runs fastest.  Both divisions by runtime head
        # counts use divisors the launch precomputes (a multiply and a shift each, where ptxas emulated
        # three divisions at ~17 instructions per thread; not measurable in time on its own)
        slot, hv = divmod(bx, div_hv)
        th = _Thread(tidx, tidx % 32, tidx // 32, tidx // WG, tidx % WG, None)

        lay = _smem_layouts()
        mma_g, mma_o = _tiled_mmas()
        s = self.shared(lay, th)

        if cutlass.const_expr(self.with_pqk):
            if bx == 0:
                # the fused plan's first CTA: the sequences longest first, for the register-state spine's grid
                _rank_longest_first(cu_seqlens, order, s.storage.kv.data_ptr(), tidx, self.sync, th)

        self.chunk(s, th, mma_g, mma_o, slot, hv, Int32(0), q, k, v, g, beta, cu_seqlens, state_indices,
                   gcum, rq, rk, beta32, w, u, pqk, tu, tma_w, mW, tma_u, mU, tma_p, mP, tma_t, mT,
                   tma_kl, mKl, tma_ql, mQl, ready, scale, use_qk_l2norm, use_state_indices, div_group)

    @cute.jit
    def workers(
        self, q: cute.Tensor, k: cute.Tensor, v: cute.Tensor, g: cute.Tensor, beta: cute.Tensor,
        cu_seqlens: cute.Tensor, state_indices: cute.Tensor,
        gcum: cute.Tensor, rq: cute.Tensor, rk: cute.Tensor, beta32: cute.Tensor, pqk: cute.Tensor, tu: cute.Tensor,
        tma_p: cute.CopyAtom, mP: cute.Tensor, tma_t: cute.CopyAtom, mT: cute.Tensor,
        tma_kl: cute.CopyAtom, mKl: cute.Tensor, tma_ql: cute.CopyAtom, mQl: cute.Tensor, ready: cute.Tensor,
        order: cute.Tensor, scale: Float32, use_qk_l2norm: Int32, use_state_indices: Int32, items: Int32,
        div_hv: cute.FastDivmodDivisorV2, div_group: cute.FastDivmodDivisorV2,
    ):
        """The workers build's body (recompute_wu_workers_kernel): each of the CTA's GROUPS groups of
        256 threads is one chunk worker with shared memory of its own; worker b GROUPS + grp of the
        grid runs items b GROUPS + grp, + GROUPS * grid, ... of the (slot, head) items, value head
        fastest, and publishes each in `ready` (an item no chunk maps to too: the spine's first wait
        is on item 0).  The grid has at most one CTA per SM (the groups' shared memory), all started
        before the spine's (they issue launch_dependents first): the spine waits only on CTAs that
        run, whatever else holds the GPU."""
        pdl.enter()
        tidx_cta, _, _ = cute.arch.thread_idx()
        bx, _, _ = cute.arch.block_idx()
        nb, _, _ = cute.arch.grid_dim()
        grp = cute.arch.make_warp_uniform(tidx_cta // NTHREADS)
        tidx = tidx_cta % NTHREADS
        th = _Thread(tidx, tidx % 32, tidx // 32, tidx // WG, tidx % WG, grp)

        lay = _smem_layouts()
        mma_g, mma_o = _tiled_mmas()
        s = self.shared(lay, th)
        if bx == 0:
            if grp == 0:
                # worker 0, before item 0 (slot 0, head 0): the sequences longest first, for the
                # spine's grid, which reads them once it has acquired ready[0, 0]
                _rank_longest_first(cu_seqlens, order, s.storage.kv.data_ptr(), tidx, self.sync, th)
        phase = Int32(0)
        for item in cutlass.range(bx * self.groups + grp, items, nb * self.groups, unroll=1):
            slot, hv = divmod(item, div_hv)
            active = self.chunk(s, th, mma_g, mma_o, slot, hv, phase, q, k, v, g, beta, cu_seqlens, state_indices,
                                gcum, rq, rk, beta32, pqk, pqk, pqk, tu, tma_p, mP, tma_t, mT, tma_p, mP, tma_t, mT,
                                tma_kl, mKl, tma_ql, mQl, ready, scale, use_qk_l2norm, use_state_indices, div_group)
            if active == 0:
                _publish(ready, slot, hv, tidx, th.warp == Warp.LEAD, self.sync, th)
            phase = phase ^ cutlass.select_(active != 0, Int32(1), Int32(0))

    @cute.jit
    def chunk(self, s: _Smem, th: _Thread, mma_g, mma_o, slot: Int32, hv: Int32, phase: Int32,
              q: cute.Tensor, k: cute.Tensor, v: cute.Tensor, g: cute.Tensor, beta: cute.Tensor,
              cu_seqlens: cute.Tensor, state_indices: cute.Tensor,
              gcum: cute.Tensor, rq: cute.Tensor, rk: cute.Tensor, beta32: cute.Tensor, w: cute.Tensor, u: cute.Tensor,
              pqk: cute.Tensor, tu: cute.Tensor, tma_w, mW, tma_u, mU, tma_p, mP, tma_t, mT,
              tma_kl, mKl, tma_ql, mQl, ready: cute.Tensor, scale: Float32, use_qk_l2norm: Int32,
              use_state_indices: Int32, div_group: cute.FastDivmodDivisorV2):
        """One (chunk slot, value head): the phases in order (the k / q tiles' mbarrier at `phase`).
        Returns whether a chunk maps to the slot."""
        tidx = th.tidx
        active, n, t0, L = chunk_of_slot(slot, cu_seqlens, state_indices, use_state_indices)
        if active != 0:
            ch = _Chunk(slot, hv, hv // div_group, t0, L)
            tl = None
            if cutlass.const_expr(self.aligned):
                tl = self.tiles(s, th, ch, tma_kl, mKl, tma_ql, mQl, use_qk_l2norm)
            if th.warp == Warp.LEAD:
                self.gates(s, th, ch, g, beta, gcum, beta32)
            self.rows(s, th, ch, tl, q, k, rq, rk, use_qk_l2norm, phase)
            # the K tile is read by the tensor cores (async proxy) next
            cute.arch.fence_proxy("async.shared", space="cta")
            self.sync(th)
            self.products(s, th, mma_g, scale)
            self.sync(th)
            if cutlass.const_expr(self.with_pqk):
                # pqk[t0 + i, hv, :] = P row i: a full chunk by one TMA store (the lead warp; it waits for
                # the store's reads before the barrier that lets phase 3.4 overwrite the slot), a partial
                # one by 16-byte thread stores of rows i < L (rows >= L are the next sequence's)
                _store_t2(L, tidx, th.warp == Warp.LEAD, tma_p, s.t2, mP[None, None, hv], pqk, t0, hv, 0)
            self.solve(s, th)
            self.stage_t(s, th)
            if cutlass.const_expr(self.with_pqk):
                # ---- the fused plan's end: Tu (64 x 64 bf16) -> tu[t0 + i, hv, :], as P left ----
                # (its spine forms Vnew = Tu (V - diag(exp(gcum) rk) K S) itself: no V load, no W, U)
                _store_t2(L, tidx, th.warp == Warp.LEAD, tma_t, s.t2, mT[None, None, hv], tu, t0, hv, 1)
                self.finish_stores(ready, slot, hv, tidx, th.warp == Warp.LEAD, th)
            else:
                self.outputs(s, th, ch, mma_o, v, w, u, tma_w, mW, tma_u, mU)
        return active

    def sync(self, th: _Thread):
        """The barrier of the threads that work on one chunk: the CTA's, or in the workers build the
        group's (named barrier GROUP_BARS grp + 1)."""
        if cutlass.const_expr(self.groups == 1):
            cute.arch.sync_threads()
        else:
            cute.arch.barrier(barrier_id=GROUP_BARS * th.grp + 1, number_of_threads=NTHREADS)

    @cute.jit
    def finish_stores(self, ready: cute.Tensor, slot: Int32, hv: Int32, tidx: Int32, store_warp, th: _Thread):
        """The fused plans' chunk, after its stores are issued: the workers build publishes the
        (slot, head) the running register-state spine waits for (_publish); the others' storing warp
        waits until its TMA stores have read their staging tiles, before the CTA's shared memory is
        released."""
        if cutlass.const_expr(self.groups > 1):
            _publish(ready, slot, hv, tidx, store_warp, self.sync, th)
        elif store_warp:
            cute.arch.cp_async_bulk_wait_group(0, read=True)

    def wg_sync(self, th: _Thread):
        """The barrier of the thread's warpgroup (the workers build: its group's warpgroup)."""
        if cutlass.const_expr(self.groups == 1):
            cute.arch.barrier(barrier_id=Barrier.WG + th.wg, number_of_threads=WG)
        else:
            cute.arch.barrier(barrier_id=GROUP_BARS * th.grp + 2 + th.wg, number_of_threads=WG)

    @cute.jit
    def shared(self, lay, th: _Thread) -> _Smem:
        """The CTA's shared memory and its views (the workers build: the thread's group's copy);
        thread 0 (of the group) initialises the aligned builds' mbarrier."""
        lay_kv, lay_kv_rc, lay_kk, lay_t2 = lay
        SharedStorage = _shared_storage(self.with_pqk, self.aligned)
        assert cute.cosize(lay_kv) == 2 * C * DK <= _kv_elems() and cute.cosize(lay_t2) == 2 * C * C
        assert SharedStorage.size_in_bytes() == _smem_bytes(self.with_pqk, self.aligned), \
            (SharedStorage.size_in_bytes(), self.with_pqk)
        smem = cutlass.utils.SmemAllocator()
        storage = smem.allocate(SharedStorage)
        for _ in cutlass.range_constexpr(self.groups - 1):
            smem.allocate(SharedStorage)                   # the workers build: a copy per group, in a row

        def ptr(field, dtype, align):
            """The field's first element in the thread's group's copy (the copies lie size_in_bytes
            apart, a multiple of 1024: every alignment and 128-byte swizzle holds in each)."""
            base = getattr(storage, field).data_ptr()
            if cutlass.const_expr(self.groups == 1):
                return base
            return cute.make_ptr(dtype, base.toint() + th.grp * SharedStorage.size_in_bytes(),
                                 cute.AddressSpace.smem, assumed_align=align)

        def view(field, dtype, align, layout):
            if cutlass.const_expr(self.groups == 1):
                return getattr(storage, field).get_tensor(layout.outer, swizzle=layout.inner)
            return cute.make_tensor(cute.recast_ptr(ptr(field, dtype, align), layout.inner, dtype=dtype), layout.outer)

        def vec(field):
            if cutlass.const_expr(self.groups == 1):
                return getattr(storage, field).get_tensor(cute.make_layout(C))
            return cute.make_tensor(ptr(field, Float32, 16), cute.make_layout(C))

        sKV = view("kv", BFloat16, 1024, lay_kv)          # (128, 64, 2) B of phase 4
        sRC = view("kv", BFloat16, 1024, lay_kv_rc)       # (64, 128, 2) rows, cols
        sKK = view("kv", BFloat16, 1024, lay_kk)          # (64, 128, 1) K K^T operand
        sT2 = view("t2", BFloat16, 1024, lay_t2)          # (64, 64, 2) Tw, Tu
        # A / Tm (fp32) over the V tile's bytes (stage 1 of sKV / sRC), V loaded there after phase 3.4;
        # the solve scratch (fp32) in t2's Tu slot, free from phase 2's end (P is in the Tw slot) to 3.4
        a_ptr = cute.recast_ptr(ptr("kv", BFloat16, 1024) + A_OFF, dtype=Float32)
        sA = cute.make_tensor(a_ptr, cute.make_layout((C, C), stride=(AS, 1)))
        sA4 = cute.make_tensor(a_ptr, cute.make_layout((C, C // 4, 4), stride=(AS, 4, 1)))   # float4 view
        sA2 = cute.make_tensor(a_ptr, cute.make_layout((C, C // 2, 2), stride=(AS, 2, 1)))   # float2 view
        x_ptr = cute.recast_ptr(ptr("t2", BFloat16, 1024) + C * C, dtype=Float32)
        sX = cute.make_tensor(x_ptr, cute.make_layout((HALF, HALF), stride=(XS, 1)))
        sG = vec("gc")
        sB = vec("be")
        sE = vec("ee")
        sR = vec("rr")
        # the q tile (K-major, swizzled as the K tile: the A operand of Q K^T with_pqk, else only the
        # norms read it) occupies the Tw/Tu region (the same 16 KB) until phase 2 is done with it; P is
        # staged there next, Tw/Tu written in phase 3.4
        sQK = view("t2", BFloat16, 1024, lay_kk)          # (64, 128, 1)
        sRq = None
        if cutlass.const_expr(self.with_pqk):
            sRq = vec("rq")
        mbar = None
        if cutlass.const_expr(self.aligned):
            mbar = ptr("mbar", cutlass.Int64, 8)
            if th.tidx == 0:
                cute.arch.mbarrier_init(mbar, 1)    # not a ring: one load per chunk (workers: phases alternate)
                cute.arch.mbarrier_init_fence()     # (a ring's publish would sync the CTA here, tiles does)
        return _Smem(storage, sKV, sRC, sKK, sT2, sA, sA4, sA2, sX, sG, sB, sE, sR, sQK, sRq, mbar)

    # ------------------------------------------------------------------ phase 1
    @cute.jit
    def tiles(self, s: _Smem, th: _Thread, ch: _Chunk, tma_kl, mKl, tma_ql, mQl, use_qk_l2norm: Int32):
        """Phase 1b' (aligned q/k/v): the k and q tiles by TMA (the lead warp, one mbarrier), after a
        CTA barrier that publishes the mbarrier's initialisation (every thread waits on it in rows).
        A TMA box moves the whole 64-row window: rows >= L of a partial chunk (the next sequence's,
        or zero-filled past T) are zeroed once it has landed.  Issued before phase 1a so the loads
        are in flight during the g scan.  (One TMA issue replaces 8 cp.async per thread with their
        64-bit addresses, ~110 warp instructions per warp.)  Returns this thread's (row, col)
        coordinates and vectors of the two tiles: thread (tidx // 16, tidx % 16) holds the 8 columns
        8 (tidx % 16) .. +7 of rows tidx // 16 + 16 m, m = 0..3, what it zeroes and its norms read."""
        need_q = Int32(1) if cutlass.const_expr(self.with_pqk) else use_qk_l2norm
        self.sync(th)
        if th.warp == Warp.LEAD:
            rings.arm(s.mbar, cutlass.select_(need_q != 0, Int32(2 * C * DK * 2), Int32(C * DK * 2)))
            tma.load(tma_kl, tma.gmem_tile(mKl[None, None, ch.hk], (ch.t0, 0), (C, DK)), s.kk[None, None, 0],
                     s.mbar, Int32(0), 1)
            if need_q != 0:
                tma.load(tma_ql, tma.gmem_tile(mQl[None, None, ch.hk], (ch.t0, 0), (C, DK)), s.qk[None, None, 0],
                         s.mbar, Int32(0), 1)
        thr_l = _row_copy_g2s().get_slice(th.tidx)
        tLc = thr_l.partition_S(cute.make_identity_tensor((C, DK)))       # (row, col) of each vector
        tLk = thr_l.partition_D(s.rc[None, None, 0])                      # K tile (swizzled)
        tLq = thr_l.partition_D(s.qk[None, None, 0])                      # q tile (swizzled)
        return tLc, tLk, tLq

    @cute.jit
    def gates(self, s: _Smem, th: _Thread, ch: _Chunk, g: cute.Tensor, beta: cute.Tensor, gcum: cute.Tensor,
              beta32: cute.Tensor):
        """Phase 1a (the lead warp, lane l: rows 2 l, 2 l + 1): g, beta -> gcum, beta, beta exp(gcum)
        in smem, gcum (and with_pqk beta32) of rows < L to HBM."""
        lane, t0, L, hv = th.lane, ch.t0, ch.L, ch.hv
        r0 = 2 * lane
        c0, c1, b0, b1 = gate_scan(g, beta, t0, L, hv, lane)
        s.g[r0] = c0
        s.g[r0 + 1] = c1
        s.b[r0] = b0
        s.b[r0 + 1] = b1
        s.e[r0] = b0 * cute.math.exp(c0)
        s.e[r0 + 1] = b1 * cute.math.exp(c1)
        if r0 < L:
            gcum[t0 + r0, hv] = c0
            if cutlass.const_expr(self.with_pqk):
                beta32[t0 + r0, hv] = b0      # the register-state spine scales Y by it (Tu holds no beta)
        if r0 + 1 < L:
            gcum[t0 + r0 + 1, hv] = c1
            if cutlass.const_expr(self.with_pqk):
                beta32[t0 + r0 + 1, hv] = b1

    @cute.jit
    def rows(self, s: _Smem, th: _Thread, ch: _Chunk, tl, q: cute.Tensor, k: cute.Tensor, rq: cute.Tensor,
             rk: cute.Tensor, use_qk_l2norm: Int32, phase: Int32):
        """The K tile and the row norms rk, rq.  Aligned (1c): once the tiles have landed, rows >= L
        zeroed, the norms from the thread's own vectors (_row_norms).  Plain (1b): q, k rows by
        element loads (warp w: rows 8w..8w+7, lane: cols lane+32*e); the raw bf16 k values go to
        smem unchanged (rows >= L: zeros, never loaded)."""
        lane, warp, t0, L, hv, hk = th.lane, th.warp, ch.t0, ch.L, ch.hv, ch.hk
        if cutlass.const_expr(self.aligned):
            tLc, tLk, tLq = tl
            cute.arch.mbarrier_wait(s.mbar, phase)  # not a ring: the tiles' one load (workers: of this chunk)
            if L < C:
                zero8 = cute.make_rmem_tensor_like(tLk[(None, 0, 0)], BFloat16)
                zero8.fill(0.0)
                for m in cutlass.range_constexpr(cute.size(tLk, mode=[1])):
                    row, _ = tLc[(0, m, 0)]
                    if row >= L:
                        cute.copy(_copy_128b(), zero8, tLk[(None, m, 0)])
                        cute.copy(_copy_128b(), zero8, tLq[(None, m, 0)])
            _row_norms(tLk, tLq, th.tidx, L, t0, hv, use_qk_l2norm, rk, rq, s.r, s.rq)
        else:
            for half in cutlass.range_constexpr(2):
                fk = cute.make_rmem_tensor((4, 4), Float32)
                fq = cute.make_rmem_tensor((4, 4), Float32)
                fk.fill(0.0)
                fq.fill(0.0)
                for r_ in cutlass.range_constexpr(4):
                    r = warp * ROWS_PER_WARP + half * 4 + r_
                    if r < L:
                        t = t0 + r
                        for e in cutlass.range_constexpr(4):
                            fk[r_, e] = k[t, hk, lane + 32 * e].to(Float32)
                        if use_qk_l2norm != 0:
                            for e in cutlass.range_constexpr(4):
                                fq[r_, e] = q[t, hk, lane + 32 * e].to(Float32)
                for r_ in cutlass.range_constexpr(4):
                    r = warp * ROWS_PER_WARP + half * 4 + r_
                    rkv = Float32(1.0)
                    rqv = Float32(1.0)
                    if use_qk_l2norm != 0:
                        ssk = Float32(0.0)
                        ssq = Float32(0.0)
                        for e in cutlass.range_constexpr(4):
                            ssk = ssk + fk[r_, e] * fk[r_, e]
                            ssq = ssq + fq[r_, e] * fq[r_, e]
                        ssk = cute.arch.warp_reduction_sum(ssk)
                        ssq = cute.arch.warp_reduction_sum(ssq)
                        rkv = cute.math.rsqrt(ssk + L2_EPS)
                        rqv = cute.math.rsqrt(ssq + L2_EPS)
                    for e in cutlass.range_constexpr(4):
                        s.rc[r, lane + 32 * e, 0] = BFloat16(fk[r_, e])     # exact (bf16 -> fp32 -> bf16)
                    if lane == 0:
                        s.r[r] = rkv
                        if r < L:
                            rk[t0 + r, hv] = rkv
                            rq[t0 + r, hv] = rqv

    # ------------------------------------------------------------------ phase 2
    @cute.jit
    def products(self, s: _Smem, th: _Thread, mma_g, scale: Float32):
        """Phase 2: G = K K^T on wgmma (WG w: columns 32w..32w+31), folded -> A (fp32 smem); with_pqk
        also Q K^T (same B operand), folded -> P (bf16), staged in the Tw slot by stmatrix."""
        wg, wtid = th.wg, th.wtid
        mma_g.set(warpgroup.Field.ACCUMULATE, True)
        thr_g = mma_g.get_slice(wtid)
        sK0 = s.kk[None, None, 0]
        tGa = thr_g.make_fragment_A(thr_g.partition_A(sK0))          # (MMA, 1, 8)
        sKw = cute.local_tile(sK0, (HALF, DK), (wg, 0))               # K rows 32w..32w+31: B of WG w
        tGb = thr_g.make_fragment_B(thr_g.partition_B(sKw))          # (MMA, 1, 8)
        accG = cute.make_rmem_tensor(thr_g.partition_shape_C((C, HALF)), Float32)
        accG.fill(0.0)
        accQ = cute.make_rmem_tensor(thr_g.partition_shape_C((C, HALF)), Float32)   # Q K^T (with_pqk)
        warpgroup.fence()
        for kb in cutlass.range_constexpr(cute.size(tGa, mode=[2])):
            cute.gemm(mma_g, accG, tGa[None, None, kb], tGb[None, None, kb], accG)
        if cutlass.const_expr(self.with_pqk):
            accQ.fill(0.0)
            tQa = thr_g.make_fragment_A(thr_g.partition_A(s.qk[None, None, 0]))
            for kb in cutlass.range_constexpr(cute.size(tQa, mode=[2])):
                cute.gemm(mma_g, accQ, tQa[None, None, kb], tGb[None, None, kb], accQ)
        warpgroup.commit_group()
        warpgroup.wait_group(0)
        tGc = thr_g.partition_C(cute.make_identity_tensor((C, HALF)))   # (i, j - 32w) of accG[e]
        # The fold reads each gcum / beta / rk value it needs once: a thread's 16 elements
        # (fragment (2 columns, 2 rows, 4 column blocks)) lie on 2 rows and 8 columns, loaded into
        # registers first (22 LDS; loaded per element, interleaved with the sA stores, the compiler
        # reloads them: 96 LDS per thread).
        # Every element is computed and then selected, with the decay as one MUFU.EX2
        # (fastexp): a branch on i >= j per element diverges inside every warp (both sides run)
        # and libdevice's exp is ~10 instructions.  Above the diagonal the exponent
        # gcum_i - gcum_j can be large and positive: the select discards it (never a 0/1 product).
        assert str(accG.layout) == "((2,2,4),1,1):((1,2,4),0,0)", str(accG.layout)
        rows = [tGc[wgmma_acc.first_of_row(h)][0] for h in range(2)]
        cols = [tGc[wgmma_acc.first_of_col(c)][1] + HALF * wg for c in range(8)]
        g_row = [s.g[r] for r in rows]
        br_row = [s.b[r] * s.r[r] for r in rows]
        # the columns' values are loaded when their 4 elements come up (e = 4 p .. 4 p + 3 use
        # columns 2 p, 2 p + 1): 8 fewer live registers than all 8 columns at once, which four
        # CTAs per SM (64 registers) need
        g_col = [None] * 8
        r_col = [None] * 8
        if cutlass.const_expr(self.with_pqk):
            q_row = [scale * s.rq[r] for r in rows]
        # elements e, e + 1 (v0 = 0, 1) are columns j, j + 1 of one row: one 8-byte store
        pair = cute.make_rmem_tensor(2, Float32)
        for e in cutlass.range_constexpr(cute.size(accG)):
            h = wgmma_acc.row(e)
            c = wgmma_acc.col(e)
            if cutlass.const_expr(e % 4 == 0):
                for cc in (c, c + 1):
                    g_col[cc] = s.g[cols[cc]]
                    r_col[cc] = s.r[cols[cc]]
            i = rows[h]
            j = cols[c]
            rx = r_col[c] * fastexp.exp(g_row[h] - g_col[c])            # rk_j exp(gcum_i - gcum_j)
            pair[e % 2] = Float32(cutlass.select_(i > j, accG[e] * br_row[h] * rx, Float32(0.0)))
            if cutlass.const_expr(e % 2 == 1):
                s.a2[i, j // 2, None].store(pair.load())
            if cutlass.const_expr(self.with_pqk):
                # the in-chunk attention of fwd_o: scale rq_i rk_j (q_i . k_j) exp(gcum_i - gcum_j)
                accQ[e] = Float32(cutlass.select_(i >= j, accQ[e] * q_row[h] * rx, Float32(0.0)))
        if cutlass.const_expr(self.with_pqk):
            # P (bf16, exactly 0 above the diagonal) -> the Tw slot of t2 (free until phase 3.4),
            # once both warpgroups' Q K^T have read the q tile there
            self.sync(th)
            stsm_g = cute.make_copy_atom(cute.nvgpu.warp.StMatrix8x8x16bOp(False, 4), BFloat16)
            st_g = cute.make_tiled_copy_C(stsm_g, mma_g).get_slice(wtid)
            accQ_cv = st_g.retile(accQ)
            rP = cute.make_rmem_tensor_like(accQ_cv, BFloat16)
            for e in cutlass.range_constexpr(cute.size(accQ_cv)):
                rP[e] = BFloat16(accQ_cv[e])
            cute.copy(st_g, rP, st_g.partition_D(cute.local_tile(s.t2[None, None, 0], (C, HALF), (0, wg))))
            cute.arch.fence_proxy("async.shared", space="cta")      # the TMA store reads the tile next

    # ------------------------------------------------------------------ phase 3
    @cute.jit
    def solve(self, s: _Smem, th: _Thread):
        """Phase 3.1-3.3: Tm = (I + A)^-1 in fp32, in place over sA (16x16 blocks)."""
        lane, warp, wg = th.lane, th.warp, th.wg
        # 3.1 diagonal blocks: the first warp of warpgroup w solves blocks 2w, 2w + 1 (the pair its
        #     warpgroup merges in 3.2): lane l, column jj = l % 16 of block b = 2w + l // 16, of
        #     D_b = (I + A_bb)^-1 by forward substitution (exact zeros above the diagonal).  Every
        #     reader of a block's A rows is in that warp, and 3.2's readers of D_b in its warpgroup:
        #     a warp sync and a warpgroup barrier, not two CTA barriers
        xcol = cute.make_rmem_tensor(BLK, Float32)
        solver = th.wtid < 32
        if solver:
            rb = (2 * wg + lane // BLK) * BLK
            jj = lane % BLK
            for ii in cutlass.range_constexpr(BLK):
                part = cute.make_rmem_tensor(4, Float32)
                part.fill(0.0)
                for mc in cutlass.range_constexpr((ii + 3) // 4):
                    arow = cute.make_rmem_tensor(4, Float32)
                    arow.store(s.a4[rb + ii, rb // 4 + mc, None].load())
                    for e in cutlass.range_constexpr(4):
                        if cutlass.const_expr(mc * 4 + e < ii):
                            part[e] = part[e] + arow[e] * xcol[mc * 4 + e]
                diag = Float32(0.0)
                if jj == ii:
                    diag = Float32(1.0)
                xcol[ii] = diag - ((part[0] + part[1]) + (part[2] + part[3]))
        if solver:
            cute.arch.sync_warp()           # the warp is done reading its diagonal blocks of A
            rb = (2 * wg + lane // BLK) * BLK
            jj = lane % BLK
            for ii in cutlass.range_constexpr(BLK):
                s.a[rb + ii, rb + jj] = xcol[ii]
        self.wg_sync(th)

        # 3.2 32x32 merges, pair p = warpgroup p (blocks 2p, 2p+1), on the tensor cores in one TF32
        #     pass (mma_tf32): warp wl < 2 of the warpgroup owns the 16x8 tile of columns 8 wl ..:
        #     X_p = A_{2p+1,2p} D_{2p} -> scratch rows 16p..16p+15 (D lower triangular: k-steps >= wl);
        #     T_{2p+1,2p} = -D_{2p+1} X_p -> sA.  Each warpgroup reads and writes only its pair's
        #     blocks and scratch rows: warpgroup barriers between its steps, the CTA barrier only
        #     before 3.3 reads both pairs.  (Tensor cores rather than CUDA cores, where every two
        #     FMAs need an LDS: mma_tf32.)
        sA, sX = s.a, s.x
        wl = (th.tidx % WG) // 32
        lo = 2 * BLK * wg                  # first row/column of block 2p
        hi = lo + BLK                      # first row/column of block 2p+1
        acc_t = cute.make_rmem_tensor(4, Float32)
        if wl < 2:
            acc_t.fill(0.0)
            mma_tf32.tile_16x8(acc_t, sA, hi, lo, sA, lo, lo + 8 * wl, wl, 2, lane, 2)
            mma_tf32.store_tile_16x8(acc_t, sX, BLK * wg, 8 * wl, lane, False)
        self.wg_sync(th)
        if wl < 2:
            acc_t.fill(0.0)
            mma_tf32.tile_16x8(acc_t, sA, hi, hi, sX, BLK * wg, 8 * wl, 0, 2, lane, 2)
            mma_tf32.store_tile_16x8(acc_t, sA, hi, lo + 8 * wl, lane, True)
        self.sync(th)

        # 3.3 64x64 merge: Y = A[32:, :32] Tm[:32, :32] -> scratch;  Tm[32:, :32] = -Tm[32:, 32:] Y -> sA,
        #     on the tensor cores (one TF32 pass): warp w owns the 16x8 tile (rows 16 (w // 4) ..,
        #     columns 8 (w % 4) ..) of each product.  Both Tm blocks are lower triangular with exact
        #     zeros above the diagonal, so each product skips the 8-deep k-steps that only add 0 * x
        #     (warp-uniform bounds): Y's tile of column block n needs k-steps >= n, the second
        #     product's tile of row block m k-steps <= 2 m + 1.  (On CUDA cores: 1,127 wavefronts.)
        mi = warp // 4
        nj = warp % 4
        acc_t.fill(0.0)
        mma_tf32.tile_16x8(acc_t, sA, HALF + BLK * mi, 0, sA, 0, 8 * nj, nj, 4, lane, 4)
        mma_tf32.store_tile_16x8(acc_t, sX, BLK * mi, 8 * nj, lane, False)
        self.sync(th)
        acc_t.fill(0.0)
        mma_tf32.tile_16x8(acc_t, sA, HALF + BLK * mi, HALF, sX, 0, 8 * nj, 0, 2 * mi + 2, lane, 4)
        mma_tf32.store_tile_16x8(acc_t, sA, HALF + BLK * mi, 8 * nj, lane, True)
        if cutlass.const_expr(self.with_pqk):
            if warp == Warp.LEAD:
                cute.arch.cp_async_bulk_wait_group(0, read=True)   # pqk's TMA store has read the Tw slot
        self.sync(th)

    @cute.jit
    def stage_t(self, s: _Smem, th: _Thread):
        """Phase 3.4: Tw = Tm diag(beta exp(gcum) rk), Tu = Tm, ROUNDED TO BF16 (the A operands of
        phase 4; this is the one rounding of Tm, as in FLA) -> swizzled smem, 16-byte stores (the
        pqk build: Tu only, its stage 1 ends with Tu's store)."""
        cp_t = cute.make_tiled_copy_tv(_copy_128b(), cute.make_layout((C, 4), stride=(4, 1)),
                                       cute.make_layout((1, 8)))
        thr_t = cp_t.get_slice(th.tidx)
        tTc = thr_t.partition_D(cute.make_identity_tensor((C, C)))
        tTw = thr_t.partition_D(s.t2[None, None, 0])
        tTu = thr_t.partition_D(s.t2[None, None, 1])
        rTw = cute.make_rmem_tensor(tTc.shape, BFloat16)
        rTu = cute.make_rmem_tensor(tTc.shape, BFloat16)
        for e in cutlass.range_constexpr(cute.size(rTw)):
            i, j = tTc[e]
            tm = s.a[i, j]
            if cutlass.const_expr(not self.with_pqk):
                rTw[e] = BFloat16(tm * (s.e[j] * s.r[j]))
            rTu[e] = BFloat16(tm)             # Tm alone: beta goes on Y (the register-state spine) or V (the V load)
        if cutlass.const_expr(not self.with_pqk):
            cute.copy(cp_t, rTw, tTw)
        cute.copy(cp_t, rTu, tTu)
        cute.arch.fence_proxy("async.shared", space="cta")
        self.sync(th)

    # ------------------------------------------------------------------ phase 4
    @cute.jit
    def outputs(self, s: _Smem, th: _Thread, ch: _Chunk, mma_o, v: cute.Tensor, w: cute.Tensor, u: cute.Tensor,
                tma_w, mW, tma_u, mU):
        """The unfused plan's end: WG1 loads the V tile into the A / Tm bytes, now read (WG0's
        W = Tw K starts at once; WG1's U = Tu V waits for these loads); then phase 4, WG0 W = Tw K,
        WG1 U = Tu V on wgmma, each half staged by stmatrix into the columns it has consumed, and
        rows t0 .. t0 + 63 -> HBM (a full chunk by one TMA store of the warpgroup's first warp, a
        partial one by 16-byte thread stores of rows i < L)."""
        warp, wg, wtid, t0, L, hv = th.warp, th.wg, th.wtid, ch.t0, ch.L, ch.hv
        if wg == Group.U:
            _load_v(v, hv, t0, L, wtid, s.rc[None, None, 1], s.b, self.aligned)
            cute.arch.fence_proxy("async.shared", space="cta")       # wgmma reads the tile next
            cute.arch.barrier(barrier_id=Barrier.WG + wg, number_of_threads=WG)

        mma_o.set(warpgroup.Field.ACCUMULATE, True)
        thr_o = mma_o.get_slice(wtid)
        tOa = thr_o.make_fragment_A(thr_o.partition_A(s.t2))          # (MMA, 1, 4, 2)
        stsm = cute.make_copy_atom(cute.nvgpu.warp.StMatrix8x8x16bOp(False, 4), BFloat16)
        st_o = cute.make_tiled_copy_C(stsm, mma_o).get_slice(wtid)
        sO = s.rc[None, None, wg]                                    # (64 rows, 128 cols)
        accO = cute.make_rmem_tensor(thr_o.partition_shape_C((C, DK // 2)), Float32)
        accO_cv = st_o.retile(accO)
        rO = cute.make_rmem_tensor_like(accO_cv, BFloat16)
        for nh in cutlass.range_constexpr(2):
            # columns 64 nh .. 64 nh + 63 of the product: the B tile's matching 128-byte swizzle atoms
            tOb = thr_o.make_fragment_B(thr_o.partition_B(cute.local_tile(s.kv[None, None, wg], (DK // 2, C), (nh, 0))))
            accO.fill(0.0)
            warpgroup.fence()
            for kb in cutlass.range_constexpr(cute.size(tOa, mode=[2])):
                cute.gemm(mma_o, accO, tOa[None, None, kb, wg], tOb[None, None, kb], accO)
            warpgroup.commit_group()
            warpgroup.wait_group(0)
            # every warp of this warpgroup is past this half's MMA: the columns it read (and only
            # those: the other half reads the other swizzle atoms) may be overwritten
            cute.arch.barrier(barrier_id=Barrier.WG + wg, number_of_threads=WG)
            # accumulator -> bf16 -> the consumed columns of the tile (stmatrix)
            for e in cutlass.range_constexpr(cute.size(accO_cv)):
                rO[e] = BFloat16(accO_cv[e])
            cute.copy(st_o, rO, st_o.partition_D(cute.local_tile(sO, (C, DK // 2), (0, nh))))
        cute.arch.fence_proxy("async.shared", space="cta")          # the TMA store reads the tile next
        cute.arch.barrier(barrier_id=Barrier.WG + wg, number_of_threads=WG)
        cp_o = tma.rows_copy(DK)
        thr_s = cp_o.get_slice(wtid)
        tSs = thr_s.partition_S(sO)                                  # (CPY, 8 row groups, 1)
        tSc = thr_s.partition_S(cute.make_identity_tensor((C, DK)))
        store_warp = warp == 4 * wg
        if wg == Group.W:
            tma.store_rows(L, store_warp, tma_w, s.rc, mW[None, None, hv], w, cp_o, thr_s, tSs, tSc,
                           t0, hv, 0, wg, DK)
        else:
            tma.store_rows(L, store_warp, tma_u, s.rc, mU[None, None, hv], u, cp_o, thr_s, tSs, tSc,
                           t0, hv, 0, wg, DV)
        if store_warp:
            # the tile's bytes are read out before the CTA's shared memory is released
            cute.arch.cp_async_bulk_wait_group(0, read=True)


@cute.kernel
def recompute_wu_kernel(
    q: cute.Tensor, k: cute.Tensor, v: cute.Tensor, g: cute.Tensor, beta: cute.Tensor,
    cu_seqlens: cute.Tensor, state_indices: cute.Tensor,
    gcum: cute.Tensor, rq: cute.Tensor, rk: cute.Tensor, beta32: cute.Tensor, w: cute.Tensor, u: cute.Tensor,
    pqk: cute.Tensor, tu: cute.Tensor, tma_w: cute.CopyAtom, mW: cute.Tensor, tma_u: cute.CopyAtom,
    mU: cute.Tensor, tma_p: cute.CopyAtom, mP: cute.Tensor, tma_t: cute.CopyAtom, mT: cute.Tensor,
    tma_kl: cute.CopyAtom, mKl: cute.Tensor, tma_ql: cute.CopyAtom, mQl: cute.Tensor, ready: cute.Tensor,
    order: cute.Tensor, scale: Float32, use_qk_l2norm: Int32, use_state_indices: Int32,
    div_hv: cute.FastDivmodDivisorV2, div_group: cute.FastDivmodDivisorV2,
    aligned: cutlass.Constexpr, with_pqk: cutlass.Constexpr,
):
    """The entry of every build: RecomputeWU(aligned, with_pqk).kernel is the body.  A module
    function, not a method: the kernel's symbol is made of its function's name and first arguments
    (a method's would name the class)."""
    RecomputeWU(aligned, with_pqk).kernel(
        q, k, v, g, beta, cu_seqlens, state_indices, gcum, rq, rk, beta32, w, u, pqk, tu,
        tma_w, mW, tma_u, mU, tma_p, mP, tma_t, mT, tma_kl, mKl, tma_ql, mQl, ready, order,
        scale, use_qk_l2norm, use_state_indices, div_hv, div_group)


@cute.jit
def gate_scan(g: cute.Tensor, beta: cute.Tensor, t0: Int32, L: Int32, hv: Int32, lane: Int32):
    """One warp, lane l: g and beta (fp32) of rows 2 l, 2 l + 1 of the chunk at t0 (0 at or past L)
    and their in-chunk inclusive scan of g: (gcum of row 2 l, gcum of row 2 l + 1, beta_2l,
    beta_2l+1), by a shuffle scan of the pair sums (stage 1 and intra_chunk's gates).  L >= 1."""
    g0, g1, b0, b1 = gate_rows(g, beta, t0, L, hv, lane)
    return gate_cumsum(g0, g1, b0, b1, L, lane)


@cute.jit
def _rank_longest_first(cu_seqlens: cute.Tensor, order: cute.Tensor, kv_ptr, tidx: Int32, sync, th):
    """order[r] = the sequence of rank r when the N <= ORDER_MAX_SEQS sequences are ordered longest
    first, equal lengths by index (the register-state spine reads it: handoff.longest_first).  Block 0 of
    the plan's first recompute_wu launch, before its own chunk: the lengths go to the kv region
    (free until the K tile's TMA load), each thread counts, for its up to ORDER_MAX_SEQS / NTHREADS
    sequences held in registers, the sequences ahead of them in one pass over the lengths (an
    O(N^2) count, ~13 K instructions per thread at 1024 sequences, against ~125 us of stage 1
    that such a batch has at least).  Beyond the cap nothing is written: the spine then places
    only the longest first."""
    N = cu_seqlens.shape[0] - 1
    if N <= ORDER_MAX_SEQS:
        lens = cute.make_tensor(cute.recast_ptr(kv_ptr, dtype=Int32), cute.make_layout(ORDER_MAX_SEQS))
        for s in cutlass.range(tidx, N, NTHREADS, unroll=1):
            lens[s] = cu_seqlens[s + 1] - cu_seqlens[s]
        sync(th)
        mine = cute.make_rmem_tensor(ORDER_PER_THREAD, Int32)
        ahead = cute.make_rmem_tensor(ORDER_PER_THREAD, Int32)
        for e in cutlass.range_constexpr(ORDER_PER_THREAD):
            mine[e] = Int32(-1)
            if tidx + NTHREADS * e < N:
                mine[e] = lens[tidx + NTHREADS * e]
            ahead[e] = Int32(0)
        for m in cutlass.range(N, unroll=2):
            other = lens[m]
            for e in cutlass.range_constexpr(ORDER_PER_THREAD):
                s = tidx + NTHREADS * e
                ahead[e] = ahead[e] + cutlass.select_(other > mine[e], Int32(1), Int32(0)) \
                    + cutlass.select_(other == mine[e], cutlass.select_(m < s, Int32(1), Int32(0)), Int32(0))
        for e in cutlass.range_constexpr(ORDER_PER_THREAD):
            if tidx + NTHREADS * e < N:
                order[ahead[e]] = tidx + NTHREADS * e
        sync(th)                            # the kv region's next bytes: the K tile's TMA load


@cute.jit
def _row_norms(tLk, tLq, tidx: Int32, L: Int32, t0: Int32, hv: Int32, use_qk_l2norm: Int32,
               rk: cute.Tensor, rq: cute.Tensor, sR: cute.Tensor, sRq):
    """rk, rq of the 64 rows (phase 1c, aligned loads): thread t holds 8-column vectors of the k and
    q rows t // 16 + 16 m, m = 0..3 (_row_copy_g2s), i.e. eight partial sums of squares that the 16
    threads of its row group complete.  A reduce-scatter over the group (xor 8, 4, 2: each round sends
    half of the thread's sums and keeps the other half, then xor 1) leaves one finished sum per
    thread pair: 8 shuffles where a butterfly per sum takes 32, one rsqrt per thread rather than
    eight, and one global store per even thread rather than four address computations per row
    leader.
    After the rounds thread lg = t % 16 owns k (lg < 8) or q (lg >= 8) of row t // 16 + 16 ((lg >> 1) & 3)."""
    lg = tidx % (DK // 8)
    rs = Float32(1.0)
    if use_qk_l2norm != 0:          # pre-normed inputs skip all of it (the benchmarks' setting)
        ss = []
        for tl in (tLk, tLq):
            for m in cutlass.range_constexpr(cute.size(tLk, mode=[1])):
                xw = bf16_sumsq.words(tl[(None, m, 0)])
                ss.append(bf16_sumsq.sumsq_bf16x8(xw[0], xw[1], xw[2], xw[3]))
        assert len(ss) == 8
        ss = bf16_sumsq.reduce_scatter(ss, lg, (8, 4, 2))
        total = ss[0] + cute.arch.shuffle_sync_bfly(ss[0], offset=1)
        rs = cute.math.rsqrt(total + L2_EPS)
    row = tidx // (DK // 8) + (NTHREADS // (DK // 8)) * ((lg >> 1) & 3)
    if lg % 2 == 0:
        if lg < 8:
            sR[row] = rs
            if row < L:
                rk[t0 + row, hv] = rs
        else:
            if cutlass.const_expr(sRq is not None):
                sRq[row] = rs
            if row < L:
                rq[t0 + row, hv] = rs


@cute.jit
def _store_t2(L: Int32, tidx: Int32, store_warp, atom, sT2, g_head, rows_out: cute.Tensor, t0: Int32, hv: Int32,
              stage: cutlass.Constexpr):
    """The staged 64 x 64 bf16 tile sT2[..., stage] (P or Tu) -> rows t0 .. t0 + 63 of head hv of
    rows_out [T, Hv, 64]: one TMA store by store_warp for a full chunk, 16-byte thread stores of
    rows i < L for a partial one (rows >= L are the next sequence's)."""
    cp = cute.make_tiled_copy_tv(_copy_128b(), cute.make_layout((NTHREADS // 8, 8), stride=(8, 1)),
                                 cute.make_layout((1, 8)))
    thr = cp.get_slice(tidx)
    tma.store_rows(L, store_warp, atom, sT2, g_head, rows_out, cp, thr, thr.partition_S(sT2[None, None, stage]),
                   thr.partition_S(cute.make_identity_tensor((C, C))), t0, hv, 0, stage, C)


@cute.jit
def _load_v(v: cute.Tensor, hv: Int32, t0: Int32, L: Int32, wtid: Int32, sV: cute.Tensor, sB: cute.Tensor,
            aligned: cutlass.Constexpr):
    """Rows t0 .. t0 + 63 of value head hv, each scaled by its beta and rounded to bf16 once
    (FLA's bf16(beta v): the operand of U = Tm (beta V); beta rounded inside Tm instead cost up to
    1.5x FLA's state error on decays that underflow, tools/rounding_model.py) -> the swizzled V tile
    sV (64 rows, 128 cols), by the 128 threads of one warpgroup; rows >= L are zeroed, never read.
    Aligned: 16-byte cp.async (thread wtid: the 8 columns 8 (wtid % 16) .. +7 of rows wtid // 16 + 8 m),
    waited for here, then each thread scales its own vectors in place (the caller's barrier
    publishes them); plain: element loads (warp w: rows 16 w .. 16 w + 15, lane: columns
    lane + 32 e), scaled as they are stored."""
    if cutlass.const_expr(aligned):
        cp_g2s = _row_copy_g2s(WG)
        thr_l = cp_g2s.get_slice(wtid)
        tLc = thr_l.partition_S(cute.make_identity_tensor((C, DV)))
        tLv = thr_l.partition_D(sV)
        gVr = cute.local_tile(cute.domain_offset((t0, 0), v[None, hv, None]), (C, DV), (0, 0))
        tLgv = thr_l.partition_S(gVr)
        zero8 = cute.make_rmem_tensor_like(tLv[(None, 0, 0)], BFloat16)
        zero8.fill(0.0)
        for m in cutlass.range_constexpr(cute.size(tLv, mode=[1])):
            row, _ = tLc[(0, m, 0)]
            if row < L:
                cute.copy(cp_g2s, tLgv[None, m, None], tLv[None, m, None])
            else:
                cute.copy(_copy_128b(), zero8, tLv[(None, m, 0)])
        cute.arch.cp_async_commit_group()
        cute.arch.cp_async_wait_group(0)
        rv = cute.make_rmem_tensor_like(tLv[(None, 0, 0)], BFloat16)
        for m in cutlass.range_constexpr(cute.size(tLv, mode=[1])):
            row, _ = tLc[(0, m, 0)]
            b = sB[row]                                  # 0 on rows >= L, whose vectors are zero
            cute.autovec_copy(tLv[(None, m, 0)], rv)
            for e in cutlass.range_constexpr(cute.size(rv)):
                rv[e] = BFloat16(rv[e].to(Float32) * b)
            cute.autovec_copy(rv, tLv[(None, m, 0)])
    else:
        lane = wtid % 32
        w4 = wtid // 32
        for s in cutlass.range_constexpr(C // 4):
            r = 16 * w4 + s
            for e in cutlass.range_constexpr(DV // 32):
                x = BFloat16(0.0)
                if r < L:
                    x = BFloat16(v[t0 + r, hv, lane + 32 * e].to(Float32) * sB[r])
                sV[r, lane + 32 * e] = x


@cute.jit
def _publish(ready: cute.Tensor, c: Int32, hv: Int32, tidx: Int32, store_warp, sync, th):
    """ready[c, hv] = 1 once every store of this CTA (the TMA stores of W, U or Tu, P: complete, not just
    read out of smem; the thread stores of gcum, rq, rk and of a partial chunk's rows) is visible
    at GPU scope: bulk wait, proxy fence, CTA barrier, then one release store.  The spine's loader
    acquires the flag before it reads the slot (handoff.await_ready)."""
    if store_warp:
        cute.arch.cp_async_bulk_wait_group(0, read=False)
        cute.arch.fence_proxy("async.global")
    sync(th)
    if tidx == 0:
        cute.arch.fence_acq_rel_gpu()
        cute.arch.store(ready.iterator + cute.crd2idx((c, hv), ready.layout), Int32(1),
                        sem="release", scope="gpu")


@cute.kernel
def recompute_wu_workers_kernel(
    q: cute.Tensor, k: cute.Tensor, v: cute.Tensor, g: cute.Tensor, beta: cute.Tensor,
    cu_seqlens: cute.Tensor, state_indices: cute.Tensor,
    gcum: cute.Tensor, rq: cute.Tensor, rk: cute.Tensor, beta32: cute.Tensor, pqk: cute.Tensor, tu: cute.Tensor,
    tma_p: cute.CopyAtom, mP: cute.Tensor, tma_t: cute.CopyAtom, mT: cute.Tensor,
    tma_kl: cute.CopyAtom, mKl: cute.Tensor, tma_ql: cute.CopyAtom, mQl: cute.Tensor, ready: cute.Tensor,
    order: cute.Tensor, scale: Float32, use_qk_l2norm: Int32, use_state_indices: Int32, items: Int32,
    div_hv: cute.FastDivmodDivisorV2, div_group: cute.FastDivmodDivisorV2,
):
    """The workers build's entry: RecomputeWU(True, True, WORKER_GROUPS).workers is the body."""
    RecomputeWU(True, True, WORKER_GROUPS).workers(
        q, k, v, g, beta, cu_seqlens, state_indices, gcum, rq, rk, beta32, pqk, tu,
        tma_p, mP, tma_t, mT, tma_kl, mKl, tma_ql, mQl, ready, order,
        scale, use_qk_l2norm, use_state_indices, items, div_hv, div_group)


# --------------------------------------------------------------------------- launch
def _pqk_store_atoms(pqk: cute.Tensor, tu: cute.Tensor):
    """The fused plans' TMA stores from the t2 staging tiles: P -> pqk, Tu -> tu (tma_p, mP, tma_t, mT)."""
    lay_t2 = _smem_layouts()[3]
    store = cpasync.CopyBulkTensorTileS2GOp()
    tma_p, mP = cpasync.make_tiled_tma_atom(store, tma.view(pqk, [0, 2, 1]), cute.slice_(lay_t2, (None, None, 0)), (C, C))
    tma_t, mT = cpasync.make_tiled_tma_atom(store, tma.view(tu, [0, 2, 1]), cute.slice_(lay_t2, (None, None, 1)), (C, C))
    return tma_p, mP, tma_t, mT


def _tile_load_atoms(q: cute.Tensor, k: cute.Tensor):
    """The aligned builds' TMA loads of the k and q tiles (tma_kl, mKl, tma_ql, mQl)."""
    load = cpasync.CopyBulkTensorTileG2SOp()
    one_kk = cute.slice_(_smem_layouts()[2], (None, None, 0))
    tma_kl, mKl = cpasync.make_tiled_tma_atom(load, tma.view(k, [0, 2, 1]), one_kk, (C, DK))
    tma_ql, mQl = cpasync.make_tiled_tma_atom(load, tma.view(q, [0, 2, 1]), one_kk, (C, DK))
    return tma_kl, mKl, tma_ql, mQl


@functools.cache
def _make_launch(with_pqk: bool):
    """The launch function; with_pqk (compile time): also the in-chunk attention P -> pqk, for
    the register-state spine + output (spine_rs_o).  Parameter names: gdn_problem_t fields."""

    @cute.jit
    def recompute_wu(
        q: cute.Tensor, k: cute.Tensor, v: cute.Tensor, g: cute.Tensor, beta: cute.Tensor,
        cu_seqlens: cute.Tensor, state_indices: cute.Tensor,
        gcum: cute.Tensor, rq: cute.Tensor, rk: cute.Tensor, beta32: cute.Tensor, w: cute.Tensor, u: cute.Tensor,
        pqk: cute.Tensor, tu: cute.Tensor, ready: cute.Tensor, order: cute.Tensor, scale: Float32,
        use_qk_l2norm: Int32,
        use_state_indices: Int32,
        stream: cuda.CUstream,
    ):
        Hv = v.shape[1]
        aligned = _aligned16(q) and _aligned16(k) and _aligned16(v)     # a Python bool at trace time
        assert aligned or not with_pqk, "the pqk build is written for the aligned (TMA) loads"
        # W, U (or Tu) and P leave by TMA stores from their staging tiles (workspace tensors: aligned)
        # each build encodes TMA descriptors only for the tensors it stores: the launcher gives
        # the other plan's workspace tensors no memory (data NULL), which a descriptor rejects
        if cutlass.const_expr(with_pqk):
            tma_p, mP, tma_t, mT = _pqk_store_atoms(pqk, tu)
            tma_w, mW, tma_u, mU = tma_p, mP, tma_t, mT          # unused: phase 4 is not built
        else:
            lay_kv_rc = _smem_layouts()[1]
            store = cpasync.CopyBulkTensorTileS2GOp()
            tma_w, mW = cpasync.make_tiled_tma_atom(store, tma.view(w, [0, 2, 1]),
                                                    cute.slice_(lay_kv_rc, (None, None, 0)), (C, DK))
            tma_u, mU = cpasync.make_tiled_tma_atom(store, tma.view(u, [0, 2, 1]),
                                                    cute.slice_(lay_kv_rc, (None, None, 0)), (C, DV))
            tma_p, mP, tma_t, mT = tma_w, mW, tma_w, mW          # unused without with_pqk
        # the aligned builds load the k and q tiles by TMA (16-byte aligned rows: what _aligned16 checks)
        tma_kl, mKl, tma_ql, mQl = tma_w, mW, tma_w, mW                  # unused by the plain builds
        if cutlass.const_expr(aligned):
            tma_kl, mKl, tma_ql, mQl = _tile_load_atoms(q, k)
        smem = _smem_bytes(with_pqk, aligned)
        recompute_wu_kernel(
            q, k, v, g, beta, cu_seqlens, state_indices,
            gcum, rq, rk, beta32, w, u, pqk, tu, tma_w, mW, tma_u, mU, tma_p, mP, tma_t, mT, tma_kl, mKl, tma_ql, mQl,
            ready, order,
            scale, use_qk_l2norm, use_state_indices,
            cute.fast_divmod_create_divisor_v2(Hv), cute.fast_divmod_create_divisor_v2(Hv // k.shape[1]),
            aligned, with_pqk,
        ).launch(grid=grids.grid_recompute_wu_slots(ready.shape[0], Hv), block=[NTHREADS, 1, 1], stream=stream,
             smem=smem, min_blocks_per_mp=CTAS_PER_SM, preferred_smem_carveout=100, use_pdl=pdl.USE_PDL)

    return recompute_wu


@cute.jit
def recompute_wu_workers(
    q: cute.Tensor, k: cute.Tensor, v: cute.Tensor, g: cute.Tensor, beta: cute.Tensor,
    cu_seqlens: cute.Tensor, state_indices: cute.Tensor,
    gcum: cute.Tensor, rq: cute.Tensor, rk: cute.Tensor, beta32: cute.Tensor,
    pqk: cute.Tensor, tu: cute.Tensor, ready: cute.Tensor, order: cute.Tensor, scale: Float32,
    use_qk_l2norm: Int32, use_state_indices: Int32, wu_ctas: Int32,
    stream: cuda.CUstream,
):
    """The overlap plan's stage 1: wu_ctas CTAs (one per SM, the SMs the spine leaves) of
    WORKER_GROUPS chunk workers run every (chunk slot, head), ready's rows, and publish each in
    `ready` (the fused plans' outputs: Tu, pqk, gcum, rq, rk, beta32).  Parameter names: gdn_problem_t
    fields."""
    Hv = v.shape[1]
    assert _aligned16(q) and _aligned16(k) and _aligned16(v), "the workers build is written for the aligned loads"
    tma_p, mP, tma_t, mT = _pqk_store_atoms(pqk, tu)
    tma_kl, mKl, tma_ql, mQl = _tile_load_atoms(q, k)
    recompute_wu_workers_kernel(
        q, k, v, g, beta, cu_seqlens, state_indices, gcum, rq, rk, beta32, pqk, tu,
        tma_p, mP, tma_t, mT, tma_kl, mKl, tma_ql, mQl, ready, order,
        scale, use_qk_l2norm, use_state_indices, ready.shape[0] * Hv,
        cute.fast_divmod_create_divisor_v2(Hv), cute.fast_divmod_create_divisor_v2(Hv // k.shape[1]),
    ).launch(grid=grids.grid_recompute_wu_workers(wu_ctas), block=[WORKER_GROUPS * NTHREADS, 1, 1], stream=stream,
             smem=WORKER_GROUPS * _smem_bytes(True, True), min_blocks_per_mp=1, preferred_smem_carveout=100,
             use_pdl=pdl.USE_PDL)


def launch_for(beta_dtype=Float32, aligned: bool = False, with_pqk: bool = False, workers: bool = False):
    return recompute_wu_workers if workers else _make_launch(with_pqk)


def THREADS(beta_dtype=Float32, aligned: bool = False, with_pqk: bool = False, workers: bool = False) -> int:  # noqa: N802
    return NTHREADS * (WORKER_GROUPS if workers else 1)


VARIANTS: dict[str, dict] = {
    "recompute_wu_bf16_betaf32": {"beta_dtype": Float32},
    "recompute_wu_bf16_betabf16": {"beta_dtype": BFloat16},
    # q/k/v with 16-byte aligned bases and token/head strides that are multiples of 8 elements
    "recompute_wu_bf16_betaf32_a16": {"beta_dtype": Float32, "aligned": True},
    "recompute_wu_bf16_betabf16_a16": {"beta_dtype": BFloat16, "aligned": True},
    # ... that also write the in-chunk attention P for the register-state spine + output (spine_rs_o)
    "recompute_wu_bf16_betaf32_a16_pqk": {"beta_dtype": Float32, "aligned": True, "with_pqk": True},
    "recompute_wu_bf16_betabf16_a16_pqk": {"beta_dtype": BFloat16, "aligned": True, "with_pqk": True},
    # ... as the overlap plan's chunk workers beside the spine (recompute_wu_workers)
    "recompute_wu_bf16_betaf32_a16_pqk_workers": {"beta_dtype": Float32, "aligned": True, "with_pqk": True,
                                                  "workers": True},
    "recompute_wu_bf16_betabf16_a16_pqk_workers": {"beta_dtype": BFloat16, "aligned": True, "with_pqk": True,
                                                   "workers": True},
}


def fake_args(dims: fake.Dims, beta_dtype=Float32, aligned: bool = False, with_pqk: bool = False,
              workers: bool = False) -> list:
    qkv = {"stride_div": 8, "align": 16} if aligned else {}
    if workers:
        return [
            fake.qk(dims, **qkv), fake.qk(dims, **qkv), fake.tv(dims, **qkv),    # q, k, v
            fake.th(dims, Float32), fake.th(dims, beta_dtype),                   # g, beta
            fake.cu_seqlens(dims), fake.state_indices(dims),
            fake.ws_th(dims), fake.ws_th(dims), fake.ws_th(dims), fake.ws_th(dims),   # gcum, rq, rk, beta32
            fake.ws_tvd(dims, C), fake.ws_tvd(dims, C),                          # pqk, tu
            fake.ws_ready(dims), fake.ws_order(dims),                            # ready, order
            fake.f32(1.0), fake.i32(1), fake.i32(0),                             # scale, use_qk_l2norm, use_state_indices
            fake.i32(1),                                                         # wu_ctas
        ]
    return [
        fake.qk(dims, **qkv),             # q
        fake.qk(dims, **qkv),             # k
        fake.tv(dims, **qkv),             # v
        fake.th(dims, Float32),           # g
        fake.th(dims, beta_dtype),        # beta
        fake.cu_seqlens(dims),            # cu_seqlens
        fake.state_indices(dims),         # state_indices
        fake.ws_th(dims),                 # gcum
        fake.ws_th(dims),                 # rq
        fake.ws_th(dims),                 # rk
        fake.ws_th(dims),                 # beta32
        fake.ws_tvd(dims, DK),            # w
        fake.ws_tvd(dims, DV),            # u
        fake.ws_tvd(dims, C),             # pqk
        fake.ws_tvd(dims, C),             # tu
        fake.ws_ready(dims),              # ready
        fake.ws_order(dims),              # order
        fake.f32(1.0),                    # scale
        fake.i32(1),                      # use_qk_l2norm
        fake.i32(0),                      # use_state_indices
    ]
