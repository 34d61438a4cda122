"""Stage 2 ("the spine") of the unfused plan on Hopper tensor cores: spine="wgmma".

One CTA owns (sequence n, value head hv, V-block vb): the state columns [vb*VB*WG, (vb+1)*VB*WG)
of S (K x V, fp32), WG = warpgroups per CTA (`num_wg`), a compile-time parameter of each variant
(1: spine_wgmma_<layout>, 2: spine_wgmma_wg2_<layout>; 4 also compiles).  The launcher picks the
build per call (_wgmma_warpgroups): WG=1 has the shortest per-chunk chain (few CTAs: latency);
WG=2 shares one W/K copy between its warpgroups and, built with `multicast`, its 2 CTAs of one
(sequence, head) form a cluster in which each TMA-loads half of W and K and multicasts it to both
(many CTAs: throughput).  Warpgroup g owns the VB columns [col0, col0 + VB), col0 = (vb*WG +
g)*VB, in its fp32 accumulators for the whole sequence.  Per chunk (slot c =
slots.first_slot(cu_seqlens[n], n) + i, t0 = cu_seqlens[n] + 64 i, L = min(64, eos - t0)), for
each warpgroup:

    h[c, hv, :, cols]  = bf16(S)                         (state at chunk entry)
    Vnew               = U - W @ S                       wgmma 1: M=64 rows, N=VB, K=128
    vnew[t0 + j, cols] = bf16(Vnew_j)            j < L
    P_j                = Vnew_j * exp(g_last - gcum_j) * rk_j   (j < L, else exactly 0)
    S                  = exp(g_last) S + K^T @ P         wgmma 2: M=128 (2 x 64), N=VB, K=64

Organisation (128*WG threads, no warp specialisation):
  * W (64x128), K (64 tokens x 128, read as the MN-major A operand K^T) and U (one 64xVB tile per
    warpgroup) arrive by TMA into a ring of _stages(WG) stages shared by the CTA; each stage has
    one "full" mbarrier (arrive count 1 + the transaction bytes of all 2 + WG copies; the latency
    build adds warp 0's 32 row-data arrivals, _full_arrivals).  Warp 0 (one elected lane) issues
    the loads of chunk i + stages - 1 right after wgmma 1 of chunk i (SpineWgmma.refill), i.e. after the
    CTA barrier that says every warp is done with chunk i - 1, whose stage it reuses; all threads
    wait on the full barrier.  Without a cluster the CTA barrier is the release, no "empty"
    barrier is needed.  With one, every CTA writes into its peers' stages, so after barrier A
    thread 0 arrives on the stage's "empty" mbarrier in every CTA of the cluster (count = cluster
    size) and warp 0 waits on its own before refilling; cluster barriers bracket the kernel
    (barriers initialised before any peer traffic; nobody exits while a peer may still arrive).
  * The chunk-to-chunk chain holds only what the recurrence needs, because with one warp per
    scheduler every instruction on it is exposed: each thread computes the coefficients of its
    own two accumulator rows in registers from its rows' gcum / rk (_rows_in_smem: the latency
    build copies them into the stage with the chunk's tiles and reads them under wgmma 1, the
    throughput build loads them into registers one chunk ahead); U comes in by ldmatrix; h[c] and
    vnew leave by TMA stores issued by one warp per warpgroup (h during wgmma 1, vnew during
    wgmma 2), not by thread stores.
  * Per warpgroup (g = warp // 4, ltid = tid % 128): its accumulators, its bf16(S) tile
    sS[..., g], its P tile sP[..., g], its bf16(Vnew) tile(s) sVn[..., b*WG + g], its U tile
    sU[..., stage*WG + g], the tiled MMAs / copies sliced with ltid.  Shared by the CTA: the W/K
    ring and the full mbarriers.
  * Two CTA barriers per chunk (all warpgroups in lockstep).  A publishes bf16(S) (B operand of
    wgmma 1, TMA source of h); B publishes P (B operand of wgmma 2), bf16(Vnew) (TMA source of
    vnew) and the zeroed tail rows of the K tile.  Each is preceded by fence.proxy.async so the
    ordinary st.shared are visible to the async proxy (tensor cores, TMA); the fence before A also
    orders chunk i - 1's ordinary accesses of its stage (K tail zeroing) before the TMA that
    refills it.  Before barrier B the storing warp waits until its TMA stores have read sS and
    the older sVn buffer.  The latency build double-buffers sVn by chunk parity (_vn_buffers), so
    before barrier A that warp lets the newest store (vnew of chunk i - 1) run on; the throughput
    build has one sVn tile and waits for it there.
  * Masking: rows j >= L of the W/U/K tiles may hold another sequence's rows or uninitialised
    workspace (NaN/Inf).  Rows of Vnew depend only on the same rows of W and U, so rows j >= L of
    Vnew are dropped with a select (P = 0; a sequence's partial last chunk stores rows j < L with
    16-byte thread stores instead of the TMA box).  Because NaN * 0 = NaN inside the MMA, the tail
    rows of the K tile are overwritten with zeros in smem (only in a partial chunk; warpgroup g
    zeroes rows L + g, L + g + WG, ...).
  * Accumulator element coordinates come from partitioning identity tensors with the tiled MMAs
    (never hand-derived).
  * ptxas: touching accumulator registers while a wgmma group is in flight makes ptxas insert a
    wait for every group (C7517) or serialise all wgmma (C7514, C7520), so the decay of S and all
    zeroing happen outside those windows; a SASS test checks that each chunk has exactly the two
    waits written here.

The tensor maps span all T tokens: a box that reaches past T is zero-filled by the TMA unit (and
counted in full by the mbarrier transaction bytes).

This module writes h and vnew for stage 3 (fwd_o).  The fused plan's spine computes the chunk
output itself (no h, no vnew in HBM, no fwd_o launch): spine_rs.py, whose parameter list starts
with the one every spine build shares (fake.spine_args).
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

from gdn_prefill import grids

from cute_kernels import fake, pdl, rings, slots, state_pool, tma

CHUNK = grids.CHUNK                   # 64 tokens per chunk
DK = grids.HEAD_DIM_K                 # 128
DV = grids.HEAD_DIM_V                 # 128
VB = grids.WGMMA_SPINE_VBLOCK         # 32 state columns per warpgroup
WG_BUILDS = (1, 2, 4)                 # warpgroups per CTA that compile (VARIANTS builds 1 and 2)
def _stages(num_wg: int) -> int:
    """TMA ring depth of a build.  The latency build (1 warpgroup) issues a chunk's loads after its
    wgmma 1 (out of the MMA's way), three chunks ahead: four stages.  At B=1 it is bound by DRAM
    (its warps wait on the stages' full barriers), so the loads' distance is what pays: four is the
    depth that measured best (docs/PERFORMANCE.md, the unfused plan's kernels).  The throughput
    build, with its multicast cluster, two, its best depth likewise."""
    return 4 if num_wg == 1 else 2


def _vn_buffers(num_wg: int) -> int:
    """bf16(Vnew) tiles per warpgroup.  The latency build double-buffers them by chunk parity, so
    barrier A need not wait for the previous chunk's vnew store to read its tile.  The throughput
    build keeps one: its 115,712 B is what lets two CTAs share an SM (2 x (115,712 + 1 KB
    reserved) = 228 KB); double buffered it would hold one."""
    return 2 if num_wg == 1 else 1


def _rows_in_smem(num_wg: int) -> bool:
    """Where a chunk's row data (gcum and rk of its 64 rows) come from.  The latency build copies
    them into its ring with each stage (cp.async by warp 0, completing on the stage's full
    mbarrier) and reads its two rows with LDS under wgmma 1.  Loaded into registers one chunk ahead
    instead (the throughput build), the loop's first instruction waits on their scoreboard, which
    the initial state's loads share (docs/PERFORMANCE.md, the unfused plan's kernels).  The
    throughput build keeps the registers: 1 KB more would cost its second CTA per SM."""
    return num_wg == 1


def _full_arrivals(num_wg: int) -> int:
    """Arrivals that complete a stage's full mbarrier: the TMA issuer's expect-tx, plus each lane
    of warp 0 once its row-data cp.async have landed (latency build)."""
    return 1 + (32 if _rows_in_smem(num_wg) else 0)

assert CHUNK == 64 and DK == 128
assert VB in (16, 32, 64)             # wgmma N; MN-major B needs VB * 2 bytes in {32, 64, 128}
assert all(DV % (VB * wg) == 0 for wg in WG_BUILDS)

_W_BYTES = CHUNK * DK * 2
_U_BYTES = CHUNK * VB * 2             # one warpgroup's U tile
_K_BYTES = CHUNK * DK * 2


def _tma_bytes_per_stage(num_wg: int) -> int:
    """Transaction bytes of one stage: the W and K tiles plus one U tile per warpgroup."""
    return _W_BYTES + num_wg * _U_BYTES + _K_BYTES


def _threads(num_wg: int) -> int:
    return 128 * num_wg


def _cluster(num_wg: int, multicast: bool) -> int:
    """CTAs per cluster.  With multicast, all the V-block CTAs of one (sequence, head), which
    load the same W and K tiles: each loads 1/cluster of them and multicasts it to the others."""
    return DV // (VB * num_wg) if multicast else 1


def _smem_tiles(num_wg: int) -> dict[str, int]:
    """bf16 elements of each shared-memory tile, in allocation order (each 1024-aligned)."""
    ns = _stages(num_wg)
    return {"sW": ns * CHUNK * DK, "sK": ns * DK * CHUNK, "sU": ns * num_wg * CHUNK * VB,
            "sS": num_wg * DK * VB, "sP": num_wg * CHUNK * VB, "sVn": _vn_buffers(num_wg) * num_wg * CHUNK * VB}


def _smem_bytes(num_wg: int) -> int:
    """Dynamic shared memory of _shared_storage (checked against the struct at trace time)."""
    def up(x, a):
        return (x + a - 1) // a * a
    off = 8 * _stages(num_wg) * 2                          # full and empty mbarriers
    if _rows_in_smem(num_wg):
        off = up(off, 16) + 4 * _stages(num_wg) * 2 * CHUNK   # gcum, rk per stage (fp32)
        off = up(off, 16) + 4 * _stages(num_wg)               # a checkpoint slot per stage (int32)
    for n in _smem_tiles(num_wg).values():
        off = up(off, 1024) + 2 * n
    return off


def _shared_storage(num_wg: int):
    """The CTA's shared memory: mbarriers, then the bf16 tiles (an explicit annotation dict: this
    module's annotations are strings, `from __future__ import annotations`)."""
    fields = {"full": cute.struct.MemRange[cutlass.Int64, _stages(num_wg)],
              "empty": cute.struct.MemRange[cutlass.Int64, _stages(num_wg)]}
    if _rows_in_smem(num_wg):
        fields["rows"] = cute.struct.Align[cute.struct.MemRange[Float32, _stages(num_wg) * 2 * CHUNK], 16]
        fields["ck"] = cute.struct.Align[cute.struct.MemRange[Int32, _stages(num_wg)], 16]
    for name, n in _smem_tiles(num_wg).items():
        fields[name] = cute.struct.Align[cute.struct.MemRange[BFloat16, n], 1024]
    return cute.struct(type("SharedStorage", (), {"__annotations__": fields}))


# VB = 32: 171,008 B (WG 1: 4 stages, 2 sVn, rows), 115,712 B (WG 2), 164,864 B (WG 4; 2 stages, 1 sVn each)
assert all(_smem_bytes(wg) <= grids.MAX_SMEM for wg in WG_BUILDS)


# Per-variant launch facts for the AOT build (cute_kernels/aot.py calls these with the variant kwargs)
def THREADS(layout: str, warpgroups: int = 1, multicast: bool = False, state_dtype: str = "fp32") -> int:  # noqa: N802
    return _threads(warpgroups)


def SMEM_BYTES(layout: str, warpgroups: int = 1, multicast: bool = False, state_dtype: str = "fp32") -> int:  # noqa: N802
    return _smem_bytes(warpgroups)


def CLUSTER(layout: str, warpgroups: int = 1, multicast: bool = False, state_dtype: str = "fp32") -> int:  # noqa: N802
    return _cluster(warpgroups, multicast)


# --------------------------------------------------------------------------- layouts
def _k_atom_kind_for(n: int):
    bits = n * 16
    if bits % 1024 == 0:
        return warpgroup.SmemLayoutAtomKind.K_SW128
    if bits % 512 == 0:
        return warpgroup.SmemLayoutAtomKind.K_SW64
    return warpgroup.SmemLayoutAtomKind.K_SW32


def _smem_layouts(num_wg: int):
    """All shared-memory layouts (swizzled composed layouts) of a CTA of num_wg warpgroups;
    staged where TMA fills them.

    sW : (64 rows, 128 k, stage)   K-major A operand of wgmma 1 (the W tile as stored in HBM)
    sK : (128 k, 64 rows, stage)   MN-major A operand of wgmma 2 (the K tile [64 x 128] seen as K^T)
    sU : (64 rows, VB, stage*WG + g)  TMA destination, read into registers with ldmatrix
    sS : (VB v, 128 k, g)          MN-major B operand of wgmma 1: bf16(S)[k, v]; TMA source of h
    sP : (VB v, 64 rows, g)        MN-major B operand of wgmma 2: P[j, v]
    sVn: (64 rows, VB, b*WG + g)   bf16(Vnew) of chunks with i % _vn_buffers = b, written with
                                   stmatrix; TMA source of vnew
    (g = warpgroup; each warpgroup's sS / sP / sU / sVn tile is exactly the one-warpgroup tile)
    """
    tiler1 = (CHUNK, VB, DK)     # wgmma 1 (M, N, K)
    tiler2 = (DK, VB, CHUNK)     # wgmma 2 (M, N, K)
    ns = _stages(num_wg)
    sW = sm90_utils.make_smem_layout_a(LayoutEnum.ROW_MAJOR, tiler1, BFloat16, ns)
    sK = sm90_utils.make_smem_layout_a(LayoutEnum.COL_MAJOR, tiler2, BFloat16, ns)
    sS = sm90_utils.make_smem_layout_b(LayoutEnum.COL_MAJOR, tiler1, BFloat16, num_wg)
    sP = sm90_utils.make_smem_layout_b(LayoutEnum.COL_MAJOR, tiler2, BFloat16, num_wg)
    atom_u = warpgroup.make_smem_layout_atom(_k_atom_kind_for(VB), BFloat16)
    sU = cute.tile_to_shape(atom_u, (CHUNK, VB, ns * num_wg), order=(0, 1, 2))
    sVn = cute.tile_to_shape(atom_u, (CHUNK, VB, _vn_buffers(num_wg) * num_wg), order=(0, 1, 2))
    return sW, sK, sU, sS, sP, sVn


def _tiled_mmas():
    # wgmma 1: D[j, v] = sum_k W[j, k] S[k, v]; A = W (K-major), B = S (MN-major, v contiguous)
    mma1 = sm90_utils.make_trivial_tiled_mma(
        BFloat16, BFloat16, OperandMajorMode.K, OperandMajorMode.MN, Float32,
        (1, 1, 1), tiler_mn=(64, VB))
    # wgmma 2: D[k, v] += sum_j K[j, k] P[j, v]; A = K^T (MN-major, k contiguous), B = P (MN-major)
    mma2 = sm90_utils.make_trivial_tiled_mma(
        BFloat16, BFloat16, OperandMajorMode.MN, OperandMajorMode.MN, Float32,
        (1, 1, 1), tiler_mn=(64, VB))
    return mma1, mma2


# State pool (state_pool.py): the initial state from `state`, `initial_state` or zeros; the final
# one into `state`; a checkpoint after a chunk from the accumulators once wgmma 2 is waited for.
# The latency build's loop issues no LDG (tests/test_sass.py): a checkpoint's slot arrives with the
# chunk's row data (a 4-byte cp.async on the stage's full mbarrier, sCk); the throughput build loads
# it into a register where the checkpoint is due.

# --------------------------------------------------------------------------- kernel
class Warp(enum.IntEnum):
    """A warp with a role of its own beside its warpgroup's chunk step (the first warp of each
    warpgroup, 4 wg, issues that warpgroup's TMA stores of h and vnew)."""
    LOAD = 0                  # every TMA load: the prologue's and each refill (latency build: the row data too)


class _Tiles(typing.NamedTuple):
    """The CTA's shared-memory views (_smem_layouts; sS_kv, sP_jv: the same bytes as sS, sP
    transposed); sRow, sCk: the latency build's row data and checkpoint slots per stage, else None."""
    sW: cute.Tensor           # (64, 128, NS)
    sK: cute.Tensor           # (128, 64, NS)
    sU: cute.Tensor           # (64, VB, NS*WG)
    sS: cute.Tensor           # (VB, 128, WG)   B operand
    sS_kv: cute.Tensor        # (128, VB, WG)
    sP: cute.Tensor           # (VB, 64, WG)    B operand
    sP_jv: cute.Tensor        # (64, VB, WG)
    sVn: cute.Tensor          # (64, VB, buffers*WG)
    sRow: object              # (row, gcum|rk, stage)
    sCk: object               # checkpoint slot, stage


class _Seq(typing.NamedTuple):
    """The CTA's sequence: n, its head hv, tokens [bos, eos), nch chunks; the CTA's first state
    column and its rank in the cluster."""
    n: Int32
    hv: Int32
    bos: Int32
    eos: Int32
    nch: Int32
    cta_col0: Int32
    rank: Int32


class _Loads(typing.NamedTuple):
    """What fills a stage: the TMA atoms with this (sequence, head)'s coordinate tensors of W, U
    and K, and the row data's sources."""
    tma_w: cute.CopyAtom
    mW_h: cute.Tensor         # (T, 128) rows, k
    tma_u: cute.CopyAtom
    mU_h: cute.Tensor         # (T, 128) rows, v
    tma_k: cute.CopyAtom
    mK_h: cute.Tensor         # (128, T) k, rows
    gcum: cute.Tensor
    rk: cute.Tensor


class _Frag(typing.NamedTuple):
    """A warpgroup's MMA operands, accumulators and register copies (SpineWgmma.fragments)."""
    tWr: cute.Tensor          # (MMA, 1, 8, NS) descriptors of W
    tSr: cute.Tensor          # (MMA, 1, 8, WG) of bf16(S)
    tKr: cute.Tensor          # (MMA, 2, 4, NS) of K^T
    tPr: cute.Tensor          # (MMA, 1, 4, WG) of P
    accS: cute.Tensor         # S[k, v]
    accV: cute.Tensor         # W S, then Vnew, then P
    rU: cute.Tensor           # U[j, v]
    tScS: cute.Tensor         # (k, v) of accS[e]
    tVcV: cute.Tensor         # (j, v) of accV[e]
    row_a: Int32              # the thread's two accumulator rows: row_a, row_a + 8
    row_b: Int32
    st_S: cute.TiledCopy      # stmatrix S into sS
    st_V: cute.TiledCopy      # stmatrix Vnew into sVn, P into sP
    ld_U: cute.TiledCopy      # ldmatrix U from sU
    tSsS: cute.Tensor
    tPsP: cute.Tensor
    accS_cv: cute.Tensor      # accS in stmatrix order
    rS_bf: cute.Tensor
    accV_cv: cute.Tensor
    rV_bf: cute.Tensor
    rU_cv: cute.Tensor        # rU in ldmatrix order
    rU_bf: cute.Tensor
    cp_v: cute.TiledCopy      # a partial chunk's vnew rows, 16-byte vectors
    thr_v: object
    tVnC: cute.Tensor


class SpineWgmma:
    """One build of the unfused plan's spine (module docstring).  Config: num_wg (warpgroups per
    CTA: 1, the latency build; 2, the throughput build; 4 compiles) and cz (CTAs per cluster: 1, the
    CTA barrier releases a stage; else W/K multicast, empty mbarriers release).  `kernel` sets up the
    CTA, `sequence` runs the chunks; each step of the chunk with a name of its own is a method."""

    def __init__(self, num_wg: int, cz: int):
        self.num_wg = num_wg
        self.cz = cz
        self.ns = _stages(num_wg)
        self.rows_smem = _rows_in_smem(num_wg)

    @cute.jit
    def kernel(self, tma_w, mW, tma_u, mU, tma_k, mK, tma_h, mH, tma_vn, mVn, gcum, rk, cu_seqlens, state,
               state_indices, vnew, has_state, use_state_indices, hv_per_hk, checkpoints, checkpoint_chunks,
               initial_state, state_in, has_initial, checkpoint_pool):
        """The kernel's body (spine_wgmma_kernel, the entry, declares the parameters' types and calls
        it): shared memory, the W/K ring and the TMA descriptors, then the sequence unless it is
        padding."""
        num_wg, cz = self.num_wg, self.cz
        pdl.enter()
        tidx, _, _ = cute.arch.thread_idx()
        n, hv, vb = cute.arch.block_idx()
        warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        wg = warp_idx // 4                     # this thread's warpgroup (warp-uniform)
        ltid = tidx % 128                      # thread index within the warpgroup

        lay_w, lay_k, lay_u, lay_s, lay_p, lay_vn = _smem_layouts(num_wg)
        mma1, mma2 = _tiled_mmas()

        SharedStorage = _shared_storage(num_wg)
        tiles = _smem_tiles(num_wg)
        for name, lay in (("sW", lay_w), ("sK", lay_k), ("sU", lay_u), ("sS", lay_s), ("sP", lay_p), ("sVn", lay_vn)):
            assert cute.cosize(lay) == tiles[name], name
        assert SharedStorage.size_in_bytes() == _smem_bytes(num_wg), (SharedStorage.size_in_bytes(), num_wg)
        smem = cutlass.utils.SmemAllocator()
        storage = smem.allocate(SharedStorage)
        # the W/K ring (full: the TMA bytes and the latency build's row-data lanes; empty: one arrival
        # per CTA of the cluster; without a cluster the CTA barrier A releases a stage, and the empty
        # barriers stay unused)
        ring = rings.thread_ring(self.ns, storage.full.data_ptr(), _full_arrivals(num_wg), cz)
        sW = storage.sW.get_tensor(lay_w.outer, swizzle=lay_w.inner)
        sK = storage.sK.get_tensor(lay_k.outer, swizzle=lay_k.inner)
        sU = storage.sU.get_tensor(lay_u.outer, swizzle=lay_u.inner)
        sS = storage.sS.get_tensor(lay_s.outer, swizzle=lay_s.inner)
        lay_s_kv = cute.select(lay_s, mode=[1, 0, 2])
        sS_kv = storage.sS.get_tensor(lay_s_kv.outer, swizzle=lay_s_kv.inner)
        sP = storage.sP.get_tensor(lay_p.outer, swizzle=lay_p.inner)
        lay_p_jv = cute.select(lay_p, mode=[1, 0, 2])
        sP_jv = storage.sP.get_tensor(lay_p_jv.outer, swizzle=lay_p_jv.inner)
        sVn = storage.sVn.get_tensor(lay_vn.outer, swizzle=lay_vn.inner)
        sRow = None
        sCk = None
        if cutlass.const_expr(self.rows_smem):
            sRow = storage.rows.get_tensor(cute.make_layout((CHUNK, 2, self.ns)))
            sCk = storage.ck.get_tensor(cute.make_layout(self.ns))
        t = _Tiles(sW, sK, sU, sS, sS_kv, sP, sP_jv, sVn, sRow, sCk)

        if warp_idx == Warp.LOAD:
            cpasync.prefetch_descriptor(tma_w)
            cpasync.prefetch_descriptor(tma_u)
            cpasync.prefetch_descriptor(tma_k)
            cpasync.prefetch_descriptor(tma_vn)
            cpasync.prefetch_descriptor(tma_h)
        # every CTA (of the cluster) has initialised its barriers before a peer multicasts or arrives
        rings.publish(cz)

        # ---- which sequence / slot; PADDING: state_indices[n] == -1 skips everything
        run, slot = state_pool.pool_slot(n, state_indices, use_state_indices)

        if run != 0:
            self.sequence(mma1, mma2, tidx, ltid, wg, warp_idx, n, hv, vb, slot, t, ring,
                          tma_w, mW, tma_u, mU, tma_k, mK, tma_h, mH, tma_vn, mVn,
                          gcum, rk, cu_seqlens, state,
                          vnew, has_state, hv_per_hk, checkpoints, checkpoint_chunks, initial_state, state_in,
                          has_initial, checkpoint_pool)
        if cutlass.const_expr(cz > 1):
            # no CTA leaves while a peer may still arrive on its barriers (one chunk count per cluster)
            cute.arch.cluster_arrive()
            cute.arch.cluster_wait()

    @cute.jit
    def fragments(self, mma1: cute.TiledMma, mma2: cute.TiledMma, ltid: Int32, wg: Int32, t: _Tiles) -> _Frag:
        """Warpgroup wg's views for thread ltid: the one-warpgroup tiled MMAs' operands and
        accumulators, the stmatrix / ldmatrix copies between them and smem, and the 16-byte copies
        of a partial chunk's vnew rows."""
        # ---- per-thread MMA views (one-warpgroup tiled MMAs, sliced by the thread in its warpgroup)
        thr1 = mma1.get_slice(ltid)
        thr2 = mma2.get_slice(ltid)
        tWr = thr1.make_fragment_A(thr1.partition_A(t.sW))
        tSr = thr1.make_fragment_B(thr1.partition_B(t.sS))
        tKr = thr2.make_fragment_A(thr2.partition_A(t.sK))
        tPr = thr2.make_fragment_B(thr2.partition_B(t.sP))

        accS = cute.make_rmem_tensor(thr2.partition_shape_C((DK, VB)), Float32)
        accV = cute.make_rmem_tensor(thr1.partition_shape_C((CHUNK, VB)), Float32)
        rU = cute.make_rmem_tensor(thr1.partition_shape_C((CHUNK, VB)), Float32)
        tScS = thr2.partition_C(cute.make_identity_tensor((DK, VB)))
        tVcV = thr1.partition_C(cute.make_identity_tensor((CHUNK, VB)))
        # a warpgroup accumulator of 64 rows gives each thread two rows: row_a, and row_b = row_a + 8
        # (element e holds row tVcV[e][0]; the row test in vnew_and_p picks the coefficient per element)
        row_a = tVcV[0][0]
        row_b = row_a + 8

        # accumulator <-> smem (bf16): stmatrix S into sS (wgmma 1 B), P into sP (wgmma 2 B), Vnew
        # into sVn; ldmatrix U from sU (the inverse map, 4 matrices per instruction)
        stsm = cute.make_copy_atom(cute.nvgpu.warp.StMatrix8x8x16bOp(False, 4), BFloat16)
        ldsm = cute.make_copy_atom(cute.nvgpu.warp.LdMatrix8x8x16bOp(False, 4), BFloat16)
        st_S = cute.make_tiled_copy_C(stsm, mma2).get_slice(ltid)
        st_V = cute.make_tiled_copy_C(stsm, mma1).get_slice(ltid)
        ld_U = cute.make_tiled_copy_C(ldsm, mma1).get_slice(ltid)
        tSsS = st_S.partition_D(t.sS_kv[None, None, wg])
        tPsP = st_V.partition_D(t.sP_jv[None, None, wg])
        accS_cv = st_S.retile(accS)
        rS_bf = cute.make_rmem_tensor_like(accS_cv, BFloat16)
        accV_cv = st_V.retile(accV)
        rV_bf = cute.make_rmem_tensor_like(accV_cv, BFloat16)
        rU_cv = ld_U.retile(rU)
        rU_bf = cute.make_rmem_tensor_like(rU_cv, BFloat16)

        # partial chunks: bf16(Vnew) rows j < L from sVn to vnew with 16-byte vectors (a warpgroup's
        # 128 threads = 32 rows x 4 groups of 8 columns; 2 row passes over the 64-row tile)
        cp_v = tma.rows_copy(VB)
        thr_v = cp_v.get_slice(ltid)
        tVnC = thr_v.partition_S(cute.make_identity_tensor((CHUNK, VB)))

        mma1.set(warpgroup.Field.ACCUMULATE, True)
        mma2.set(warpgroup.Field.ACCUMULATE, True)
        return _Frag(tWr, tSr, tKr, tPr, accS, accV, rU, tScS, tVcV, row_a, row_b, st_S, st_V, ld_U, tSsS, tPsP,
                     accS_cv, rS_bf, accV_cv, rV_bf, rU_cv, rU_bf, cp_v, thr_v, tVnC)

    @cute.jit
    def sequence(self, mma1: cute.TiledMma, mma2: cute.TiledMma, tidx: Int32, ltid: Int32, wg: Int32,
                 warp_idx: Int32, n: Int32, hv: Int32, vb: Int32, slot: Int32, t: _Tiles, ring,
                 tma_w, mW, tma_u, mU, tma_k, mK, tma_h, mH, tma_vn, mVn,
                 gcum, rk, cu_seqlens, state,
                 vnew, has_state: Int32, hv_per_hk: Int32, checkpoints: cute.Tensor, checkpoint_chunks: Int32,
                 initial_state: cute.Tensor, state_in: Int32, has_initial: cute.Tensor, checkpoint_pool: cute.Tensor):
        """Everything one CTA does for a sequence that is not padding: the initial state, the
        prologue's loads, the chunks in segments of checkpoint_chunks, the final state.

        tidx: thread in the CTA (TMA issue); ltid = tidx % 128 and wg = warpgroup (of num_wg):
        the per-warpgroup MMA / copy partitions and smem tiles.
        """
        num_wg, ns, rows_smem = self.num_wg, self.ns, self.rows_smem
        bos = cu_seqlens[n]
        eos = cu_seqlens[n + 1]
        nch = (eos - bos + (CHUNK - 1)) // CHUNK
        coff = slots.first_slot(bos, n)                             # slot of chunk 0 (h)
        hk = hv // hv_per_hk
        cta_col0 = vb * (VB * num_wg)                              # first state column of the CTA
        vblk = vb * num_wg + wg                                    # this warpgroup's VB-column block
        col0 = vblk * VB                                           # = cta_col0 + wg * VB
        store_warp = warp_idx == wg * 4                            # issues this warpgroup's TMA stores
        rank = Int32(0)
        if cutlass.const_expr(self.cz > 1):
            rank = cute.arch.make_warp_uniform(cute.arch.block_idx_in_cluster())  # = vb: grid z is one cluster
        sq = _Seq(n, hv, bos, eos, nch, cta_col0, rank)

        f = self.fragments(mma1, mma2, ltid, wg, t)
        accS, row_a, row_b = f.accS, f.row_a, f.row_b

        # ---- initial state
        gS = cute.domain_offset((0, col0), state[slot, hv, None, None])    # (k, v) -> S[k, col0+v]
        gI = cute.domain_offset((0, col0), initial_state[slot, hv, None, None])
        state_pool.load(accS, f.tScS, gS, gI, state_pool.source(state_in, has_initial, n))

        # TMA views of this (sequence, head); the chunk offset is applied per copy
        ld = _Loads(tma_w, mW[None, None, hv], tma_u, mU[None, None, hv], tma_k, mK[None, None, hk], gcum, rk)
        mVn_h = mVn[None, None, hv]                                        # (T, 128) rows, v

        # ---- prologue: the loads of the first stages - 1 chunks (issue_loads); the throughput
        # build's row data of chunk 0 into registers
        if warp_idx == Warp.LOAD:
            for p in cutlass.range_constexpr(ns - 1):
                if p < nch:
                    self.issue_loads(ld, t, ring, rings.state_at(ns, Int32(p), True), bos + p * CHUNK, sq,
                                     Int32(p), (eos - bos) // CHUNK, checkpoints, checkpoint_chunks)
        # throughput build: per-row data of the NEXT chunk to run, loaded one chunk ahead (off the
        # dependency chain): g_last of the chunk, and gcum_j, rk_j of this thread's rows row_a, row_b
        nx_glast = Float32(0.0)
        nx_ga = Float32(0.0)
        nx_ra = Float32(0.0)
        nx_gb = Float32(0.0)
        nx_rb = Float32(0.0)
        if cutlass.const_expr(not rows_smem):
            if nch > 0:
                nx_glast, nx_ga, nx_ra, nx_gb, nx_rb = _row_data(gcum, rk, hv, bos, eos, row_a, row_b,
                                                                 nx_ga, nx_ra, nx_gb, nx_rb)

        # the chunks in segments of checkpoint_chunks (state_pool.segment_chunks): the chunk loop
        # holds no checkpoint code, the store goes between segments (as in spine_rs)
        seg = state_pool.segment_chunks(nch, checkpoint_chunks)
        for sg in cutlass.range((nch + seg - 1) // seg, unroll=1):
            i_end = cutlass.min((sg + 1) * seg, nch)
            for i in cutlass.range(sg * seg, i_end, unroll=1):
                stage = i % ns
                t0 = bos + i * CHUNK
                L = cutlass.min(eos - t0, CHUNK)
                c = coff + i

                # (0) coef_j = exp(g_last - gcum_j) * rk_j for this thread's rows j < L, exactly 0 for
                # j >= L; decay = exp(g_last).  Throughput build: here, from registers; latency build:
                # under wgmma 1, from the stage's row data
                if cutlass.const_expr(not rows_smem):
                    decay, coef_a, coef_b = _coefs(nx_glast, nx_ga, nx_ra, nx_gb, nx_rb, L, row_a, row_b)

                # (1) bf16(S) into smem (wgmma 1's B operand; also the TMA source of h[c]).  The TMA
                # store of h[c - 1] finished reading sS before barrier B of chunk i - 1
                _stmatrix_bf16(f.st_S, f.accS_cv, f.rS_bf, f.tSsS)

                # barrier A (CTA-wide): sS visible to all (and to the async proxy: tensor cores, TMA);
                # every warp of every warpgroup is done with chunk i - 1 (its wgmma 2 waited, its K tail
                # zeroing and sVn reads done), so chunk i - 1's stage may be refilled.  In the latency
                # build the TMA store of vnew of chunk i - 1 may still be reading its buffer (sVn is
                # double-buffered: (3) writes the other one), so the store warp lets that newest bulk
                # group run on: it is waited for at barrier B, a whole wgmma 1 later, off the chain; the
                # throughput build waits for it here, as (3) rewrites its one tile
                _barrier(store_warp, _vn_buffers(num_wg) - 1)

                if cutlass.const_expr(self.cz > 1):
                    self.release(ring, i, tidx)
                # Off the chain: the store warp writes h[c, hv, :, cols] = bf16(S) from sS, warp 0 refills
                # chunk i - 1's stage (free since barrier A) with chunk i + stages - 1, and in the
                # throughput build every thread loads the next chunk's row data into registers.  The
                # latency build (1 warpgroup, B=1) issues the h store here, as early as possible (issued
                # after wgmma 1, barrier B waits for the store's read), and the stage's loads after wgmma
                # 1, which starts only when its last warp has issued it; with four stages they still land
                # three chunks ahead (_stages).  The throughput build (2 warpgroups, many CTAs: slack in
                # every chunk) issues all of it after wgmma 1, out of the MMAs' way.
                if cutlass.const_expr(num_wg == 1):
                    nx_glast, nx_ga, nx_ra, nx_gb, nx_rb = self.h_and_rows(
                        i, nch, eos, t0, c, hv, vblk, store_warp, wg, row_a, row_b, tma_h, mH, t.sS_kv,
                        gcum, rk, nx_glast, nx_ga, nx_ra, nx_gb, nx_rb)

                ring.consumer_wait(rings.state_at(ns, i, False))
                self.mma1(f, mma1, t, L, ltid, wg, stage)
                self.refill(i, sq, warp_idx, ld, t, ring, checkpoints, checkpoint_chunks)
                if cutlass.const_expr(rows_smem):
                    decay, coef_a, coef_b = _coefs(*_rows_from_smem(t.sRow, stage, L, row_a, row_b), L, row_a, row_b)
                if cutlass.const_expr(num_wg > 1):
                    nx_glast, nx_ga, nx_ra, nx_gb, nx_rb = self.h_and_rows(
                        i, nch, eos, t0, c, hv, vblk, store_warp, wg, row_a, row_b, tma_h, mH, t.sS_kv,
                        gcum, rk, nx_glast, nx_ga, nx_ra, nx_gb, nx_rb)
                self.load_u(f, t, stage, wg)
                warpgroup.wait_group(0)
                # (4) S *= exp(g_last) after the wait: accumulator registers touched while a wgmma is in
                # flight make ptxas insert a wait for every group (ptxas -v: C7517), so it cannot run
                # under wgmma 1
                for e in cutlass.range_constexpr(cute.size(accS)):
                    accS[e] = accS[e] * decay

                vbuf = self.vnew_and_p(f, t, i, L, wg, coef_a, coef_b)

                # barrier B: sP, sVn and the zeroed K rows visible to the tensor cores / TMA; the TMA
                # store of h[c] has read sS, which (1) of chunk i + 1 rewrites
                _barrier(store_warp, 0)

                self.mma2(f, mma2, t, stage, wg, L, store_warp, tma_vn, mVn_h, vnew, t0, hv, col0, vbuf)
            self.checkpoint(f, t, i_end, sq, hv, col0, checkpoints, checkpoint_chunks, checkpoint_pool)

        # ---- final state; every TMA store of this CTA complete before its shared memory is released
        if has_state != 0:
            state_pool.store(accS, f.tScS, gS)
        if store_warp:
            cute.arch.cp_async_bulk_wait_group(0)

    # ------------------------------------------------------------------ the chunk's steps
    @cute.jit
    def release(self, ring, i: Int32, tidx: Int32):
        """Cluster builds, after barrier A of chunk i: thread 0 releases chunk i - 1's stage to every
        CTA of the cluster (each multicasts into it)."""
        if tidx == 0:
            if i > 0:
                for r in cutlass.range_constexpr(self.cz):
                    ring.sync_object_empty.arrive(rings.state_at(self.ns, i - 1, False).index, r)

    @cute.jit
    def mma1(self, f: _Frag, mma1: cute.TiledMma, t: _Tiles, L: Int32, ltid: Int32, wg: Int32, stage: Int32):
        """(2) wgmma 1 issued: accV = W @ S (S read from sS).  A partial chunk first zeroes its K rows
        j >= L so that NaN/Inf there cannot reach S (NaN * 0 = NaN); the shared tile is split between
        the warpgroups by row (thread ltid = column k)."""
        if L < CHUNK:
            for j in cutlass.range(L + wg, CHUNK, self.num_wg, unroll=1):
                t.sK[ltid, j, stage] = BFloat16(0.0)
        f.accV.fill(0.0)
        warpgroup.fence()
        for kb in cutlass.range_constexpr(cute.size(f.tWr, mode=[2])):
            cute.gemm(mma1, f.accV, f.tWr[None, None, kb, stage], f.tSr[None, None, kb, wg], f.accV)
        warpgroup.commit_group()

    @cute.jit
    def load_u(self, f: _Frag, t: _Tiles, stage: Int32, wg: Int32):
        """Under wgmma 1: U -> registers (ldmatrix), fp32."""
        cute.copy(f.ld_U, f.ld_U.partition_S(t.sU[None, None, stage * self.num_wg + wg]), f.rU_bf)
        for e in cutlass.range_constexpr(cute.size(f.rU_cv)):
            f.rU_cv[e] = Float32(f.rU_bf[e])

    @cute.jit
    def vnew_and_p(self, f: _Frag, t: _Tiles, i: Int32, L: Int32, wg: Int32, coef_a: Float32, coef_b: Float32):
        """(3) Vnew = U - W S -> sVn (bf16); P = Vnew * coef_j -> sP.  Rows j >= L of Vnew are set to 0
        by a select, not a product (they may be NaN), so P rows j >= L are exactly 0.  Returns the
        chunk's sVn buffer."""
        accV, rU, tVcV = f.accV, f.rU, f.tVcV
        for e in cutlass.range_constexpr(cute.size(accV)):
            accV[e] = rU[e] - accV[e]
        if L < CHUNK:
            for e in cutlass.range_constexpr(cute.size(accV)):
                vval = Float32(0.0)
                if tVcV[e][0] < L:
                    vval = accV[e]
                accV[e] = vval
        vbuf = (i % _vn_buffers(self.num_wg)) * self.num_wg + wg   # this chunk's sVn buffer
        _stmatrix_bf16(f.st_V, f.accV_cv, f.rV_bf, f.st_V.partition_D(t.sVn[None, None, vbuf]))
        for e in cutlass.range_constexpr(cute.size(accV)):
            cf = coef_b
            if tVcV[e][0] == f.row_a:
                cf = coef_a
            accV[e] = accV[e] * cf
        _stmatrix_bf16(f.st_V, f.accV_cv, f.rV_bf, f.tPsP)
        return vbuf

    @cute.jit
    def mma2(self, f: _Frag, mma2: cute.TiledMma, t: _Tiles, stage: Int32, wg: Int32, L: Int32, store_warp,
             tma_vn, mVn_h, vnew: cute.Tensor, t0: Int32, hv: Int32, col0: Int32, vbuf: Int32):
        """(5) wgmma 2: S += K^T P; meanwhile vnew[t0 + j, cols] = bf16(Vnew_j), j < L; then its wait."""
        warpgroup.fence()
        for kb in cutlass.range_constexpr(cute.size(f.tKr, mode=[2])):
            cute.gemm(mma2, f.accS, f.tKr[None, None, kb, stage], f.tPr[None, None, kb, wg], f.accS)
        warpgroup.commit_group()
        tma.store_rows(L, store_warp, tma_vn, t.sVn, mVn_h, vnew, f.cp_v, f.thr_v,
                       f.thr_v.partition_S(t.sVn[None, None, vbuf]), f.tVnC, t0, hv, col0, vbuf, VB)
        warpgroup.wait_group(0)

    @cute.jit
    def checkpoint(self, f: _Frag, t: _Tiles, i_end: Int32, sq: _Seq, hv: Int32, col0: Int32,
                   checkpoints: cute.Tensor, checkpoint_chunks: Int32, checkpoint_pool: cute.Tensor):
        """A checkpoint (state_pool.py) after a segment's last chunk i_end - 1, from the accumulators
        wgmma 2 wrote; the latency build reads its slot from that chunk's stage (copied with its row
        data)."""
        ck = Int32(-1)
        if cutlass.const_expr(self.rows_smem):
            if state_pool.checkpoint_index_after(i_end - 1, (sq.eos - sq.bos) // CHUNK, checkpoint_chunks,
                                                 checkpoints.shape[1]) >= 0:
                ck = t.sCk[(i_end - 1) % self.ns]
        else:
            ck = state_pool.checkpoint_slot_after(i_end - 1, (sq.eos - sq.bos) // CHUNK, sq.n, checkpoints,
                                                  checkpoint_chunks)
        if ck >= 0:
            state_pool.store(f.accS, f.tScS, cute.domain_offset((0, col0), checkpoint_pool[ck, hv, None, None]))

    # ------------------------------------------------------------------ the loads and h
    @cute.jit
    def refill(self, i: Int32, sq: _Seq, warp_idx: Int32, ld: _Loads, t: _Tiles, ring, checkpoints: cute.Tensor,
               checkpoint_chunks: Int32):
        """The load warp: the TMA loads (and the latency build's row data) of chunk i + stages - 1 into
        chunk i - 1's stage (called after barrier A of chunk i; with a cluster, once every CTA has
        released that stage)."""
        ns = self.ns
        if warp_idx == Warp.LOAD:
            nxt = i + (ns - 1)
            if nxt < sq.nch:
                st = rings.state_at(ns, nxt, True)
                if cutlass.const_expr(self.cz > 1):
                    if nxt >= ns:     # the stage's previous chunk released by every CTA
                        ring.producer_acquire(st)
                self.issue_loads(ld, t, ring, st, sq.bos + nxt * CHUNK, sq, nxt, (sq.eos - sq.bos) // CHUNK,
                                 checkpoints, checkpoint_chunks)

    @cute.jit
    def issue_loads(self, ld: _Loads, t: _Tiles, ring, st, t0: Int32, sq: _Seq, ci: Int32, nfull: Int32,
                    checkpoints: cute.Tensor, checkpoint_chunks: Int32):
        """Everything that fills a stage with the chunk at t0.  Called by one whole (converged) warp:
        one elected lane arms the stage's mbarrier with the byte count of all 2 + num_wg copies; each
        TMA copy is issued by one elected lane (cute.copy elects internally).  U comes as num_wg tiles
        of (64, VB): warpgroup g's columns cta_col0 + g*VB .. + VB land in sU[:, :, stage*num_wg + g].
        The latency build also copies the chunk's row data (_issue_rows) and the slot of a checkpoint
        after it (chunk ci of a sequence of nfull full chunks, state_pool.copy_checkpoint_slot_after:
        its loop issues no LDG)."""
        num_wg, cz = self.num_wg, self.cz
        stage = st.index
        bar = ring.producer_get_barrier(st)
        rings.arm(bar, _tma_bytes_per_stage(num_wg))
        tma.load(ld.tma_w, tma.gmem_tile(ld.mW_h, (t0, 0), (CHUNK, DK)), t.sW[None, None, stage], bar, sq.rank, cz)
        for g in cutlass.range_constexpr(num_wg):
            tma.load(ld.tma_u, tma.gmem_tile(ld.mU_h, (t0, sq.cta_col0 + g * VB), (CHUNK, VB)),
                     t.sU[None, None, stage * num_wg + g], bar, Int32(0), 1)
        tma.load(ld.tma_k, tma.gmem_tile(ld.mK_h, (0, t0), (DK, CHUNK)), t.sK[None, None, stage], bar, sq.rank, cz)
        if cutlass.const_expr(self.rows_smem):
            if cute.arch.lane_idx() == 0:
                state_pool.copy_checkpoint_slot_after(ci, nfull, sq.n, checkpoints, checkpoint_chunks,
                                                      cute.local_tile(t.sCk, (1,), (stage,)))
            _issue_rows(ld.gcum, ld.rk, t.sRow, sq.hv, t0, sq.eos, stage, bar)

    @cute.jit
    def h_and_rows(self, i: Int32, nch: Int32, eos: Int32, t0: Int32, c: Int32, hv: Int32, vblk: Int32, store_warp,
                   wg: Int32, row_a: Int32, row_b: Int32, tma_h, mH, sS_kv, gcum: cute.Tensor, rk: cute.Tensor,
                   nx_glast: Float32, nx_ga: Float32, nx_ra: Float32, nx_gb: Float32, nx_rb: Float32):
        """The store warp: the TMA store of h[c, hv, :, cols] = bf16(S) from sS; every thread of the
        throughput build (row data in registers, _rows_in_smem): the loads of the next chunk's row
        data (returned: g_last, gcum and rk of its two rows).  Called after barrier A of chunk i."""
        if store_warp:
            tma.store(tma_h, sS_kv[None, None, wg],
                      cute.zipped_divide(mH[None, None, c, hv], (DK, VB))[((None, None), (0, vblk))])
        if cutlass.const_expr(not self.rows_smem):
            if i + 1 < nch:
                nx_glast, nx_ga, nx_ra, nx_gb, nx_rb = _row_data(gcum, rk, hv, t0 + CHUNK, eos, row_a, row_b,
                                                                 nx_ga, nx_ra, nx_gb, nx_rb)
        return nx_glast, nx_ga, nx_ra, nx_gb, nx_rb


@cute.kernel
def spine_wgmma_kernel(
    tma_w: cute.CopyAtom, mW: cute.Tensor,
    tma_u: cute.CopyAtom, mU: cute.Tensor,
    tma_k: cute.CopyAtom, mK: cute.Tensor,
    tma_h: cute.CopyAtom, mH: cute.Tensor,
    tma_vn: cute.CopyAtom, mVn: cute.Tensor,
    gcum: cute.Tensor, rk: cute.Tensor,
    cu_seqlens: cute.Tensor,
    state: cute.Tensor, state_indices: cute.Tensor, vnew: cute.Tensor,
    has_state: Int32, use_state_indices: Int32, hv_per_hk: Int32,
    checkpoints: cute.Tensor, checkpoint_chunks: Int32, initial_state: cute.Tensor, state_in: Int32,
    has_initial: cute.Tensor, checkpoint_pool: cute.Tensor,
    num_wg: cutlass.Constexpr, cz: cutlass.Constexpr,
):
    """The entry of every build: SpineWgmma(num_wg, cz).kernel is the body (num_wg: warpgroups of
    the CTA, 1, 2 or 4; cz: CTAs per cluster).  A module function, not a method: the kernel's symbol
    is made of its function's name and first arguments (a method's would name the class)."""
    SpineWgmma(num_wg, cz).kernel(
        tma_w, mW, tma_u, mU, tma_k, mK, tma_h, mH, tma_vn, mVn, gcum, rk, cu_seqlens, state, state_indices, vnew,
        has_state, use_state_indices, hv_per_hk, checkpoints, checkpoint_chunks, initial_state, state_in,
        has_initial, checkpoint_pool)


@cute.jit
def _stmatrix_bf16(st: cute.TiledCopy, acc_cv: cute.Tensor, r_bf: cute.Tensor, dst: cute.Tensor):
    """fp32 accumulators (viewed in stmatrix order) -> bf16 registers -> a shared-memory tile."""
    for e in cutlass.range_constexpr(cute.size(acc_cv)):
        r_bf[e] = BFloat16(acc_cv[e])
    cute.copy(st, r_bf, dst)


@cute.jit
def _barrier(store_warp, pending: cutlass.Constexpr):
    """The CTA barrier of a chunk: the storing warp first waits until its TMA stores but the
    `pending` newest have read their shared-memory tiles; fence.proxy.async makes this thread's
    ordinary shared-memory writes visible to the async proxy (tensor cores, TMA) before the
    barrier publishes them."""
    if store_warp:
        cute.arch.cp_async_bulk_wait_group(pending, read=True)
    cute.arch.fence_proxy("async.shared", space="cta")
    cute.arch.sync_threads()


@cute.jit
def _coefs(g_last: Float32, ga: Float32, ra: Float32, gb: Float32, rb: Float32, L: Int32,
           row_a: Int32, row_b: Int32):
    """decay = exp(g_last) and coef_j = exp(g_last - gcum_j) * rk_j for this thread's rows j < L,
    exactly 0 for j >= L (a select: the row data of rows >= L are never used)."""
    decay = cute.math.exp(g_last)
    coef_a = Float32(0.0)
    coef_b = Float32(0.0)
    if row_a < L:
        coef_a = cute.math.exp(g_last - ga) * ra
    if row_b < L:
        coef_b = cute.math.exp(g_last - gb) * rb
    return decay, coef_a, coef_b


@cute.jit
def _issue_rows(gcum: cute.Tensor, rk: cute.Tensor, sRow: cute.Tensor, hv: Int32, t0: Int32, eos: Int32,
                stage: Int32, bar):
    """Warp 0 (latency build): the row data of the chunk at t0 into the stage's row tile, 4-byte
    cp.async per row j < L (lane j and j + 32; rows >= L are not read), then each lane arrives on
    the stage's full mbarrier once its copies have landed (noinc: counted in _full_arrivals)."""
    lane = cute.arch.lane_idx()
    L = cutlass.min(eos - t0, CHUNK)
    atom = cute.make_copy_atom(cpasync.CopyG2SOp(), Float32, num_bits_per_copy=32)
    gG = gcum[None, hv]
    gR = rk[None, hv]
    for h in cutlass.range_constexpr(2):
        j = lane + 32 * h
        if j < L:
            cute.copy(atom, cute.local_tile(gG, (1,), (t0 + j,)), cute.local_tile(sRow[None, 0, stage], (1,), (j,)))
            cute.copy(atom, cute.local_tile(gR, (1,), (t0 + j,)), cute.local_tile(sRow[None, 1, stage], (1,), (j,)))
    cute.arch.cp_async_mbarrier_arrive_noinc(bar)   # the ring's second producer: cp.async, not a thread's arrive


@cute.jit
def _rows_from_smem(sRow: cute.Tensor, stage: Int32, L: Int32, row_a: Int32, row_b: Int32):
    """g_last, and gcum, rk of rows row_a and row_b of the stage's chunk (rows >= L: stale values,
    unused by _coefs)."""
    return (sRow[L - 1, 0, stage], sRow[row_a, 0, stage], sRow[row_a, 1, stage],
            sRow[row_b, 0, stage], sRow[row_b, 1, stage])


@cute.jit
def _row_data(gcum: cute.Tensor, rk: cute.Tensor, hv: Int32, t0: Int32, eos: Int32,
              row_a: Int32, row_b: Int32, ga: Float32, ra: Float32, gb: Float32, rb: Float32):
    """Row data of the chunk starting at token t0 (< eos): gcum of its last row, and gcum, rk
    of rows row_a and row_b.  Rows at or past eos are never read (their values stay as given,
    and are unused: their coefficients are 0)."""
    L = cutlass.min(eos - t0, CHUNK)
    g_last = gcum[t0 + L - 1, hv]
    if row_a < L:
        ga = gcum[t0 + row_a, hv]
        ra = rk[t0 + row_a, hv]
    if row_b < L:
        gb = gcum[t0 + row_b, hv]
        rb = rk[t0 + row_b, hv]
    return g_last, ga, ra, gb, rb


# --------------------------------------------------------------------------- launch
@functools.cache
def _make_launch(num_wg: int, multicast: bool):
    """The launch function of the num_wg-warpgroup build, W/K multicast across a cluster or not
    (parameter names: gdn_problem_t fields).

    One kernel, one body: num_wg and the cluster size reach the kernel as compile-time
    constants.  The parameter list is the one every spine build shares (fake_args); q, pqk, rq,
    out and scale are not used here."""
    assert num_wg in WG_BUILDS, num_wg
    threads = _threads(num_wg)

    @cute.jit
    def spine_wgmma(
        q: cute.Tensor, k: cute.Tensor, w: cute.Tensor, u: cute.Tensor, pqk: cute.Tensor,
        gcum: cute.Tensor, rq: cute.Tensor, rk: cute.Tensor,
        cu_seqlens: cute.Tensor,
        state: cute.Tensor, state_indices: cute.Tensor,
        vnew: cute.Tensor, h: cute.Tensor, out: cute.Tensor, scale: Float32,
        has_state: Int32, use_state_indices: Int32, checkpoints: cute.Tensor, checkpoint_chunks: Int32,
        initial_state: cute.Tensor, state_in: Int32, has_initial: cute.Tensor, checkpoint_pool: cute.Tensor,
        stream: cuda.CUstream,
    ):
        lay_w, lay_k, lay_u, lay_s, _, lay_vn = _smem_layouts(num_wg)
        load, store = cpasync.CopyBulkTensorTileG2SOp(), cpasync.CopyBulkTensorTileS2GOp()
        cz = _cluster(num_wg, multicast)
        wk_load = cpasync.CopyBulkTensorTileG2SMulticastOp() if cz > 1 else load
        # TMA views whose first two modes match the smem tiles: w, u, vnew -> (T, 128, Hv) for
        # (rows, cols) tiles; k -> (128, T, Hk) so the K tile lands as K^T (the MN-major A operand
        # of wgmma 2); h -> (128 k, 128 v, C, Hv) stored from the (k, v) view of bf16(S)
        w_view, u_view, vn_view = tma.view(w, [0, 2, 1]), tma.view(u, [0, 2, 1]), tma.view(vnew, [0, 2, 1])
        k_view = tma.view(k, [2, 0, 1])
        h_view = tma.view(h, [2, 3, 0, 1])
        lay_s_kv = cute.select(lay_s, mode=[1, 0, 2])
        tma_w, mW = cpasync.make_tiled_tma_atom(wk_load, w_view, cute.slice_(lay_w, (None, None, 0)), (CHUNK, DK), cz)
        tma_u, mU = cpasync.make_tiled_tma_atom(load, u_view, cute.slice_(lay_u, (None, None, 0)), (CHUNK, VB))
        tma_k, mK = cpasync.make_tiled_tma_atom(wk_load, k_view, cute.slice_(lay_k, (None, None, 0)), (DK, CHUNK), cz)
        tma_h, mH = cpasync.make_tiled_tma_atom(store, h_view, cute.slice_(lay_s_kv, (None, None, 0)), (DK, VB))
        tma_vn, mVn = cpasync.make_tiled_tma_atom(store, vn_view, cute.slice_(lay_vn, (None, None, 0)), (CHUNK, VB))

        T = w.shape[0]
        N = cu_seqlens.shape[0] - 1
        Hv = w.shape[1]
        hv_per_hk = Hv // k.shape[1]
        spine_wgmma_kernel(
            tma_w, mW, tma_u, mU, tma_k, mK, tma_h, mH, tma_vn, mVn,
            gcum, rk, cu_seqlens,
            state, state_indices, vnew, has_state, use_state_indices, hv_per_hk, checkpoints, checkpoint_chunks,
            initial_state, state_in, has_initial, checkpoint_pool, num_wg, cz,
        ).launch(grid=grids.grid_spine_wgmma(T, N, Hv, num_wg), block=[threads, 1, 1],
                 cluster=[1, 1, cz], stream=stream, use_pdl=pdl.USE_PDL)

    return spine_wgmma


# --------------------------------------------------------------------------- AOT variants
def launch_for(layout: str, warpgroups: int = 1, multicast: bool = False, state_dtype: str = "fp32"):
    """The launch function of a variant (cute_kernels/aot.py calls it with the variant kwargs);
    the state layout is a property of the fake state tensor only."""
    return _make_launch(warpgroups, multicast)


# Two builds (bench_spine.py --crossover; docs/PERFORMANCE.md, GDN_WGMMA_WG1_MAX_CTAS): with few
# CTAs the cluster's lockstep costs more than the L2 traffic it saves, with many CTAs less,
# so the latency build (WG=1, <= GDN_WGMMA_WG1_MAX_CTAS CTAs) runs without clusters and the
# throughput build (WG=2) multicasts W and K to the 2 CTAs of a (sequence, head).
VARIANTS: dict[str, dict] = state_pool.variants({
    "spine_wgmma_kv": {"layout": "kv", "warpgroups": 1, "multicast": False},
    "spine_wgmma_vk": {"layout": "vk", "warpgroups": 1, "multicast": False},
    "spine_wgmma_wg2_kv": {"layout": "kv", "warpgroups": 2, "multicast": True},
    "spine_wgmma_wg2_vk": {"layout": "vk", "warpgroups": 2, "multicast": True},
})


def fake_args(dims, layout, warpgroups=1, multicast=False, state_dtype="fp32"):
    """Fake tensors/scalars for every parameter of spine_wgmma except stream, in order: the list every
    spine build shares (fake.spine_args; warpgroups and multicast are variant kwargs that do not
    change it)."""
    return fake.spine_args(dims, layout, state_pool.state_dtype(state_dtype))
