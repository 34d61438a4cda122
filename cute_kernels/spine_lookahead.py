"""The fused spine with a one-chunk lookahead (builds spine_la_o_<layout>): spine="wgmma".

The fused plan's spine for few CTAs (the latency regime: plan.spine_wgmma_warpgroups == 1).
Same contract, grid and output as spine_wgmma's fused builds (one CTA per (sequence n, value
head hv, 32 state columns), O = rowscale * Q S + P Vnew, no h, no vnew), but the chunk-to-chunk
chain is cut in two.  The recurrence (spine_wgmma.py) is

    Vnew_i = U_i - W_i S_i,   P_i = coef_i * Vnew_i (bf16),   S_{i+1} = g_i S_i + K_i^T P_i

so in one warpgroup each chunk waits for S_i -> bf16 -> W S -> Vnew -> P -> K^T P -> S_{i+1}:
two dependent MMAs and two shared-memory round trips.  Expanding S_{i+1} inside the next
chunk's product,

    W_{i+1} S_{i+1} = g_i (W_{i+1} S_i) + E_i P_i,      E_i = W_{i+1} K_i^T  (64 x 64),

makes Vnew_{i+1} depend on P_i through one small MMA (E_i P_i: M=64, N=32, K=64) while
W_{i+1} S_i needs only the previous state.  Two warpgroups and one TMA warp split the work:

  warpgroup 0, "chain" (step s = -1 .. nch-2 makes Vnew_{s+1}, P_{s+1}):
      Z = W_{s+1} bf16(S_s)        (S_0 at s = -1; smem B operand published by warpgroup 1)
      C = E_s P_s                  (A operand E_s from registers: the bf16 accumulator of E_s)
      Vnew_{s+1} = U_{s+1} - g_s Z - C   (s = -1: U_0 - Z);  rows >= L are 0 (a select)
      P_{s+1} -> sP, Vnew_{s+1} -> sVb, published; only then E_{s+1} = W_{s+2} K_{s+1}^T
      (M=N=64, K=128; state-independent) is issued, so that it never queues ahead of a
      critical MMA (Z, E P, K^T P) on the tensor cores: it runs while the chain waits for S.
  warpgroup 1, "state" (step s = 0 .. nch-1):
      S_{s+1} = g_s S_s + K_s^T P_s  -> bf16 -> sS, published (the chain's next Z); only then
      O_s = rowscale_s (Q_s bf16(S_s)) + Pqk_s Vnew_s is issued -> TMA store (thread stores
      of rows < L for a sequence's last, partial chunk).
  warp 8, "loads": every TMA load (below), outside both chains.

The product W_{s+1} S_{s+1} is thus formed from bf16(S_s) and bf16(E_s) bf16(P_s) instead of
bf16(S_{s+1}); S itself is updated exactly as before (fp32 in registers).  Per chunk and CTA
this adds E (8 k-steps of N = 64) and E P (4) to the 28 k-steps of spine_wgmma_o.

Measured (H200, B=1, Hv=32, run 24): 1.32 us/chunk at T=4K against 1.44 for spine_wgmma_o
(1x8K: 161 against 173 us).  Not the halving the split allows on paper: the two halves share
the SM's tensor cores, the L2 feeds 60 KB of tiles per CTA and chunk (L2 throughput 77 %,
and the TMA waits of the chain show in ncu), and each handoff costs a fence and two barriers.
Tried on the way (same run): the handoffs on mbarriers instead of named barriers (1.35 ->
1.38 us/chunk), the TMA issue inside the state warpgroup (1.43), E issued before the chain's
elementwise work with the output MMAs queued behind K^T P (1.35); the 4 CTAs of a head as a cluster multicasting W, K, q, pqk: 2.52
(each slot then waits for the slowest of four CTAs, as in run 10).

TMA ring (NSLOT slots, "ring index" r = s + 1 holds what step s consumes): the W and U tiles of
chunk r and the K, q and pqk tiles of chunk r - 1 (W/U one chunk ahead of the rest), so each
slot is consumed within one step: by the chain (Z: W, U; E of the previous step: W, K) and by
the state warpgroup (K^T P: K; Q S: q; Pqk Vnew: pqk).  Ring 0 holds W_0, U_0 only; ring nch
holds no W / U (nothing past the sequence).  Both warpgroups release a slot on its "empty"
mbarrier (count 2); the TMA warp waits for that and loads ring r + NSLOT into it.

Shared-memory buffers and who may rewrite them (each reader is complete before its writer is
released): sS[2] (S_s in s % 2: read by the chain's Z_s and the state's Q S_s), sP[2] (P_s in
s % 2), sVb[3] (Vnew_s in s % 3: the state warpgroup reads it one step later than sP), sO (one
output tile; its TMA store has read it before the next is staged).  The handoffs P_s and S_s
are named barriers, two of each used alternately (bar.arrive by the 128 producing threads after
their fence.proxy.async and their warpgroup's own barrier, bar.sync by the 128 consumers): a
producer can run at most one handoff ahead, so the alternate barrier is always free.

Masking as in spine_wgmma: rows >= L of a partial chunk's W/U/q/pqk tiles may be another
sequence's rows or uninitialised workspace; Vnew rows >= L are selected to 0, O rows >= L are
never stored, and the K tail rows of a partial chunk are zeroed in smem before K^T P (a partial
chunk is a sequence's last, so no E is ever formed from it).
"""
from __future__ import annotations

import cuda.bindings.driver as cuda

import cutlass
import cutlass.cute as cute
import cutlass.utils.hopper_helpers as sm90_utils
from cutlass import BFloat16, Float32, Int32
from cutlass.cute.nvgpu import OperandMajorMode, cpasync, warpgroup
from cutlass.tensor_utils import LayoutEnum

from gdn_prefill import plan

from cute_kernels import spine_wgmma as sw

CHUNK = sw.CHUNK                      # 64
DK = sw.DK                            # 128
DV = sw.DV                            # 128
VB = sw.VB                            # 32 state columns per CTA (grid z = DV / VB, as spine_wgmma WG=1)
NSLOT = 3                             # TMA ring slots: step s reads ring s + 1 and (E) ring s + 2
THREADS = 288                         # warpgroup 0: chain; warpgroup 1: state and output; warp 8: TMA loads
LOAD_WARP = 8
BAR_CHAIN, BAR_STATE = 1, 2           # named barriers of the two warpgroups (0 is the CTA barrier)
BAR_P, BAR_S = 3, 5                   # + buffer index: P_s / S_s handoffs (the producer arrives, the consumer syncs)
NVB = 3                               # sVb buffers (Vnew_s is read one step after P_s)

_W_BYTES, _U_BYTES, _K_BYTES, _Q_BYTES, _PQ_BYTES = sw._W_BYTES, sw._U_BYTES, sw._K_BYTES, sw._Q_BYTES, sw._PQ_BYTES


def _smem_tiles() -> dict[str, int]:
    """bf16 elements of each shared-memory tile, in allocation order (each 1024-aligned)."""
    return {"sW": NSLOT * CHUNK * DK, "sK": NSLOT * DK * CHUNK, "sU": NSLOT * CHUNK * VB,
            "sQ": NSLOT * CHUNK * DK, "sPq": NSLOT * CHUNK * CHUNK,
            "sS": 2 * DK * VB, "sP": 2 * CHUNK * VB, "sVb": NVB * CHUNK * VB, "sO": CHUNK * VB}


_NBARS = 2 * NSLOT                    # full[NSLOT], empty[NSLOT]


def _smem_bytes() -> int:
    def up(x, a):
        return (x + a - 1) // a * a
    off = 8 * _NBARS
    for n in _smem_tiles().values():
        off = up(off, 1024) + 2 * n
    return off


assert _smem_bytes() <= 227 * 1024, _smem_bytes()      # 226,304 B


def _shared_storage():
    fields = {"full": cute.struct.MemRange[cutlass.Int64, NSLOT],
              "empty": cute.struct.MemRange[cutlass.Int64, NSLOT]}
    for name, n in _smem_tiles().items():
        fields[name] = cute.struct.Align[cute.struct.MemRange[BFloat16, n], 1024]
    return cute.struct(type("SharedStorage", (), {"__annotations__": fields}))


def _smem_layouts():
    """sW, sQ (64 rows, 128 k, slot): K-major A (W S, Q S, and A of E = W K^T);
    sK (128 k, 64 rows, slot): MN-major A of K^T P; sKe: the same bytes as (64 rows, 128 k, slot),
    the K-major B operand of E; sU (64, VB, slot); sPq (64, 64, slot): K-major A of Pqk Vnew;
    sS (VB, 128, 2): MN-major B of W S / Q S; sP, sVb (VB, 64, n): MN-major B of K^T P, E P and
    Pqk Vnew; sO (64, VB, 1): the output tile (TMA store source)."""
    tiler1 = (CHUNK, VB, DK)
    tiler2 = (DK, VB, CHUNK)
    sW = sm90_utils.make_smem_layout_a(LayoutEnum.ROW_MAJOR, tiler1, BFloat16, NSLOT)
    sK = sm90_utils.make_smem_layout_a(LayoutEnum.COL_MAJOR, tiler2, BFloat16, NSLOT)
    sKe = sm90_utils.make_smem_layout_a(LayoutEnum.ROW_MAJOR, (CHUNK, CHUNK, DK), BFloat16, NSLOT)
    # the K-major view must address exactly the bytes the MN-major K tile occupies
    assert str(sKe) == str(cute.select(sK, mode=[1, 0, 2])), (sKe, sK)
    atom = warpgroup.make_smem_layout_atom(sw._k_atom_kind_for(VB), BFloat16)
    sU = cute.tile_to_shape(atom, (CHUNK, VB, NSLOT), order=(0, 1, 2))
    sQ = sm90_utils.make_smem_layout_a(LayoutEnum.ROW_MAJOR, tiler1, BFloat16, NSLOT)
    sPq = sm90_utils.make_smem_layout_a(LayoutEnum.ROW_MAJOR, (CHUNK, VB, CHUNK), BFloat16, NSLOT)
    sS = sm90_utils.make_smem_layout_b(LayoutEnum.COL_MAJOR, tiler1, BFloat16, 2)
    sP = sm90_utils.make_smem_layout_b(LayoutEnum.COL_MAJOR, tiler2, BFloat16, 2)
    sVb = sm90_utils.make_smem_layout_b(LayoutEnum.COL_MAJOR, tiler2, BFloat16, NVB)
    sO = cute.tile_to_shape(atom, (CHUNK, VB, 1), order=(0, 1, 2))
    return dict(sW=sW, sK=sK, sKe=sKe, sU=sU, sQ=sQ, sPq=sPq, sS=sS, sP=sP, sVb=sVb, sO=sO)


def _tiled_mmas():
    """mma1, mma2: spine_wgmma's (W S, Q S, Pqk Vnew; K^T P); mma_e: E = W K^T (A, B K-major,
    N = 64); mma_ep: E P with A from registers."""
    mma1, mma2 = sw._tiled_mmas()
    mma_e = sm90_utils.make_trivial_tiled_mma(BFloat16, BFloat16, OperandMajorMode.K, OperandMajorMode.K,
                                              Float32, (1, 1, 1), tiler_mn=(CHUNK, CHUNK))
    mma_ep = sm90_utils.make_trivial_tiled_mma(BFloat16, BFloat16, OperandMajorMode.K, OperandMajorMode.MN,
                                               Float32, (1, 1, 1), tiler_mn=(CHUNK, VB),
                                               a_source=warpgroup.OperandSource.RMEM)
    # the E accumulator (64 x 64) is read in place as the A fragment of E P (K = 64): same thread
    # modes, value modes (2, 2, 8) of the accumulator against (2, 2, 2) per 16-wide k block
    assert str(mma_e.tv_layout_C) == "((4,8,4),(2,2,8)):((128,1,16),(64,8,512))", str(mma_e.tv_layout_C)
    assert str(mma_ep.tv_layout_A) == "((4,8,4),(2,2,2)):((128,1,16),(64,8,512))", str(mma_ep.tv_layout_A)
    return mma1, mma2, mma_e, mma_ep


def _acc_as_a_layout(acc_layout, n_kb: int):
    """Register layout reading a 64-row accumulator as the A fragment of a 64-row MMA whose K is
    the accumulator's N: A value (k0, r, h) of k block kb is accumulator value (c0, r, 2 kb + h)."""
    (s0, s1, s2) = acc_layout.stride[0]
    return cute.make_layout(((2, 2, 2), 1, n_kb), stride=((s0, s1, s2), 0, 2 * s2))


@cute.jit
def _load_ring(r: Int32, nch: Int32, bos: Int32, col0: Int32, full_bar,
               tma_w, mW_h, tma_u, mU_h, tma_k, mK_h, tma_q, mQ_h, tma_pq, mPq_h, sW, sU, sK, sQ, sPq):
    """Called by one whole warp: ring index r (0 <= r <= nch) into slot r % NSLOT: W and U of
    chunk r (if r < nch), K, q and pqk of chunk r - 1 (if r >= 1)."""
    slot = r % NSLOT
    bar = full_bar + slot
    nbytes = Int32(0)
    if r < nch:
        nbytes += _W_BYTES + _U_BYTES
    if r >= 1:
        nbytes += _K_BYTES + _Q_BYTES + _PQ_BYTES
    with cute.arch.elect_one():
        cute.arch.mbarrier_arrive_and_expect_tx(bar, nbytes)
    rank = Int32(0)                       # no cluster: this CTA loads whole tiles
    if r < nch:
        t = bos + r * CHUNK
        sw._tma_load(tma_w, sw._gmem_tile(mW_h, (t, 0), (CHUNK, DK)), sW[None, None, slot], bar, rank, 1)
        sw._tma_load(tma_u, sw._gmem_tile(mU_h, (t, col0), (CHUNK, VB)), sU[None, None, slot], bar, rank, 1)
    if r >= 1:
        t = bos + (r - 1) * CHUNK
        sw._tma_load(tma_k, sw._gmem_tile(mK_h, (0, t), (DK, CHUNK)), sK[None, None, slot], bar, rank, 1)
        sw._tma_load(tma_q, sw._gmem_tile(mQ_h, (t, 0), (CHUNK, DK)), sQ[None, None, slot], bar, rank, 1)
        sw._tma_load(tma_pq, sw._gmem_tile(mPq_h, (t, 0), (CHUNK, CHUNK)), sPq[None, None, slot], bar, rank, 1)


# --------------------------------------------------------------------------- kernel
@cute.kernel
def spine_la_kernel(
    tma_w: cute.CopyAtom, mW: cute.Tensor, tma_u: cute.CopyAtom, mU: cute.Tensor,
    tma_k: cute.CopyAtom, mK: cute.Tensor, tma_o: cute.CopyAtom, mO: cute.Tensor,
    tma_q: cute.CopyAtom, mQ: cute.Tensor, tma_pq: cute.CopyAtom, mPq: cute.Tensor,
    gcum: cute.Tensor, rk: cute.Tensor, rq: cute.Tensor,
    cu_seqlens: cute.Tensor, chunk_offsets: cute.Tensor,
    state: cute.Tensor, state_indices: cute.Tensor, out: cute.Tensor, scale: Float32,
    has_state: Int32, use_state_indices: Int32, hv_per_hk: Int32,
):
    tidx, _, _ = cute.arch.thread_idx()
    n, hv, vb = cute.arch.block_idx()
    warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())
    wg = warp_idx // 4
    ltid = tidx % 128

    lay = _smem_layouts()
    SharedStorage = _shared_storage()
    tiles = _smem_tiles()
    for name in tiles:
        assert cute.cosize(lay[name]) == tiles[name], name
    assert SharedStorage.size_in_bytes() == _smem_bytes(), SharedStorage.size_in_bytes()
    smem = cutlass.utils.SmemAllocator()
    storage = smem.allocate(SharedStorage)
    full_bar = storage.full.data_ptr()
    empty_bar = storage.empty.data_ptr()
    def view(field, layout):
        return getattr(storage, field).get_tensor(layout.outer, swizzle=layout.inner)
    sW, sK, sU, sQ, sPq = view("sW", lay["sW"]), view("sK", lay["sK"]), view("sU", lay["sU"]), \
        view("sQ", lay["sQ"]), view("sPq", lay["sPq"])
    sS, sP, sVb, sO = view("sS", lay["sS"]), view("sP", lay["sP"]), view("sVb", lay["sVb"]), view("sO", lay["sO"])
    sKe = view("sK", lay["sKe"])                                          # (64 rows, 128 k, NSLOT)
    # stmatrix destinations: the (row, col) views of the B-operand tiles
    sS_kv = view("sS", cute.select(lay["sS"], mode=[1, 0, 2]))           # (128 k, VB, 2)
    sP_jv = view("sP", cute.select(lay["sP"], mode=[1, 0, 2]))           # (64 rows, VB, 2)
    sVb_jv = view("sVb", cute.select(lay["sVb"], mode=[1, 0, 2]))        # (64 rows, VB, NVB)

    if warp_idx == LOAD_WARP:
        for t in (tma_w, tma_u, tma_k, tma_o, tma_q, tma_pq):
            cpasync.prefetch_descriptor(t)
    if tidx == 0:
        for s in cutlass.range_constexpr(NSLOT):
            cute.arch.mbarrier_init(full_bar + s, 1)
            cute.arch.mbarrier_init(empty_bar + s, 2)      # released by the chain and the state warpgroup
    cute.arch.mbarrier_init_fence()
    cute.arch.sync_threads()

    run, slot = sw._pool_slot(n, state_indices, use_state_indices)      # padding entries skip
    if run != 0:
        bos = cu_seqlens[n]
        eos = cu_seqlens[n + 1]
        nch = (eos - bos + (CHUNK - 1)) // CHUNK
        col0 = vb * VB
        hk = hv // hv_per_hk
        if warp_idx == LOAD_WARP:
            _loads(nch, bos, hv, hk, col0, full_bar, empty_bar, tma_w, mW, tma_u, mU, tma_k, mK,
                   tma_q, mQ, tma_pq, mPq, sW, sU, sK, sQ, sPq)
        elif wg == 0:
            _chain(ltid, hv, bos, eos, nch, sW, sU, sS, sP, sKe, sP_jv, sVb_jv,
                   full_bar, empty_bar, gcum, rk)
        else:
            _state(ltid, warp_idx, hv, slot, bos, eos, nch, col0, sK, sQ, sPq, sS, sP, sVb, sO, sS_kv,
                   full_bar, empty_bar, tma_o, mO, gcum, rk, rq, state, out, scale, has_state)


@cute.jit
def _coefs(L: Int32, row_a: Int32, row_b: Int32, glast: Float32, ga: Float32, ra: Float32,
           gb: Float32, rb: Float32):
    """coef_j = exp(g_last - gcum_j) rk_j of this thread's two rows (0 for rows >= L)."""
    ca = Float32(0.0)
    cb = Float32(0.0)
    if row_a < L:
        ca = cute.math.exp(glast - ga) * ra
    if row_b < L:
        cb = cute.math.exp(glast - gb) * rb
    return ca, cb


@cute.jit
def _chain(ltid: Int32, hv: Int32, bos: Int32, eos: Int32, nch: Int32,
           sW, sU, sS, sP, sKe, sP_jv, sVb_jv, full_bar, empty_bar,
           gcum: cute.Tensor, rk: cute.Tensor):
    """Warpgroup 0: Vnew_{s+1}, P_{s+1} for s = -1 .. nch - 2 (module docstring)."""
    mma1, _, mma_e, mma_ep = _tiled_mmas()
    thr1 = mma1.get_slice(ltid)
    thr_e = mma_e.get_slice(ltid)
    thr_ep = mma_ep.get_slice(ltid)
    tWa = thr1.make_fragment_A(thr1.partition_A(sW))            # (MMA, 1, 8, NSLOT)
    tSb = thr1.make_fragment_B(thr1.partition_B(sS))            # (MMA, 1, 8, 2)
    tEWa = thr_e.make_fragment_A(thr_e.partition_A(sW))         # (MMA, 1, 8, NSLOT)
    tEKb = thr_e.make_fragment_B(thr_e.partition_B(sKe))        # (MMA, 1, 8, NSLOT)
    tPb = thr_ep.make_fragment_B(thr_ep.partition_B(sP))        # (MMA, 1, 4, 2)
    accZ = cute.make_rmem_tensor(thr1.partition_shape_C((CHUNK, VB)), Float32)
    accC = cute.make_rmem_tensor(thr1.partition_shape_C((CHUNK, VB)), Float32)
    accE = cute.make_rmem_tensor(thr_e.partition_shape_C((CHUNK, CHUNK)), Float32)
    rE = cute.make_rmem_tensor_like(accE, BFloat16)
    tEa = cute.make_tensor(rE.iterator, _acc_as_a_layout(accE.layout, CHUNK // 16))
    tVc = thr1.partition_C(cute.make_identity_tensor((CHUNK, VB)))
    row_a = tVc[0][0]
    row_b = row_a + 8
    stsm = cute.make_copy_atom(cute.nvgpu.warp.StMatrix8x8x16bOp(False, 4), BFloat16)
    ldsm = cute.make_copy_atom(cute.nvgpu.warp.LdMatrix8x8x16bOp(False, 4), BFloat16)
    st_V = cute.make_tiled_copy_C(stsm, mma1).get_slice(ltid)
    ld_U = cute.make_tiled_copy_C(ldsm, mma1).get_slice(ltid)
    accZ_cv = st_V.retile(accZ)
    rV_bf = cute.make_rmem_tensor_like(accZ_cv, BFloat16)
    rU = cute.make_rmem_tensor(thr1.partition_shape_C((CHUNK, VB)), Float32)
    rU_cv = ld_U.retile(rU)
    rU_bf = cute.make_rmem_tensor_like(rU_cv, BFloat16)

    mma1.set(warpgroup.Field.ACCUMULATE, True)
    mma_e.set(warpgroup.Field.ACCUMULATE, True)
    mma_ep.set(warpgroup.Field.ACCUMULATE, True)

    # row data of chunk 0 (coefficients of Vnew_0's rows)
    glast = Float32(0.0)
    ga = Float32(0.0)
    ra = Float32(0.0)
    gb = Float32(0.0)
    rb = Float32(0.0)
    if nch > 0:
        glast, ga, ra, gb, rb = sw._row_data(gcum, rk, hv, bos, eos, row_a, row_b, ga, ra, gb, rb)
        # ---- step -1: Vnew_0 = U_0 - W_0 S_0 (no decay, no E P), and E_0
        L1 = cutlass.min(eos - bos, CHUNK)
        ca, cb = _coefs(L1, row_a, row_b, glast, ga, ra, gb, rb)
        decay = cute.math.exp(glast)                          # g_0: the decay of the next step
        if nch > 1:
            glast, ga, ra, gb, rb = sw._row_data(gcum, rk, hv, bos + CHUNK, eos, row_a, row_b, ga, ra, gb, rb)
        _chain_step(Int32(-1), nch, L1, ca, cb, Float32(1.0), row_a, ltid, mma1, mma_e, mma_ep,
                    tWa, tSb, tEWa, tEKb, tPb, tEa, accZ, accC, accE, rE, tVc, st_V, ld_U, sU, sP_jv, sVb_jv,
                    accZ_cv, rV_bf, rU, rU_cv, rU_bf, full_bar, empty_bar, True)
        for s in cutlass.range(0, nch - 1, unroll=1):
            t1 = bos + (s + 1) * CHUNK
            L1 = cutlass.min(eos - t1, CHUNK)
            ca, cb = _coefs(L1, row_a, row_b, glast, ga, ra, gb, rb)
            g_s = decay
            decay = cute.math.exp(glast)
            if s + 2 < nch:
                glast, ga, ra, gb, rb = sw._row_data(gcum, rk, hv, t1 + CHUNK, eos, row_a, row_b, ga, ra, gb, rb)
            _chain_step(s, nch, L1, ca, cb, g_s, row_a, ltid, mma1, mma_e, mma_ep,
                        tWa, tSb, tEWa, tEKb, tPb, tEa, accZ, accC, accE, rE, tVc, st_V, ld_U, sU, sP_jv, sVb_jv,
                        accZ_cv, rV_bf, rU, rU_cv, rU_bf, full_bar, empty_bar, False)
        warpgroup.wait_group(0)             # the last E (not used) before the CTA may exit


@cute.jit
def _chain_step(s: Int32, nch: Int32, L1: Int32, ca: Float32, cb: Float32, g_s: Float32, row_a: Int32,
                ltid: Int32, mma1, mma_e, mma_ep, tWa, tSb, tEWa, tEKb, tPb, tEa,
                accZ, accC, accE, rE, tVc, st_V, ld_U, sU, sP_jv, sVb_jv, accZ_cv, rV_bf, rU, rU_cv, rU_bf,
                full_bar, empty_bar, first: cutlass.Constexpr):
    """One step of the chain warpgroup: Vnew_{s+1} and P_{s+1} from S_s (S_0 if first), E_s P_s
    (not if first) and U_{s+1}; E_{s+1} issued for the next step."""
    c1 = s + 1                            # the chunk whose Vnew this step makes = ring index of its slot
    slot = c1 % NSLOT
    sidx = Int32(0) if cutlass.const_expr(first) else s      # S_s (S_0 for step -1)
    if cutlass.const_expr(not first):
        # E_s (issued last step) -> bf16 registers: the A operand of E_s P_s
        warpgroup.wait_group(0)
        rE.store(accE.load().to(BFloat16))
    if cutlass.const_expr(first):
        cute.arch.barrier(barrier_id=BAR_S, number_of_threads=256)             # S_0
    else:
        if s > 0:                                                              # (S_0: waited at step -1)
            cute.arch.barrier(barrier_id=BAR_S + s % 2, number_of_threads=256)
    cute.arch.mbarrier_wait(full_bar + slot, (c1 // NSLOT) % 2)
    warpgroup.fence()
    for kb in cutlass.range_constexpr(cute.size(tWa, mode=[2])):
        mma1.set(warpgroup.Field.ACCUMULATE, kb > 0)
        cute.gemm(mma1, accZ, tWa[None, None, kb, slot], tSb[None, None, kb, sidx % 2], accZ)
    mma1.set(warpgroup.Field.ACCUMULATE, True)
    if cutlass.const_expr(not first):
        for kb in cutlass.range_constexpr(cute.size(tEa, mode=[2])):
            mma_ep.set(warpgroup.Field.ACCUMULATE, kb > 0)
            cute.gemm(mma_ep, accC, tEa[None, None, kb], tPb[None, None, kb, s % 2], accC)
        mma_ep.set(warpgroup.Field.ACCUMULATE, True)
    warpgroup.commit_group()
    cute.copy(ld_U, ld_U.partition_S(sU[None, None, slot]), rU_bf)
    for e in cutlass.range_constexpr(cute.size(rU_cv)):
        rU_cv[e] = Float32(rU_bf[e])
    warpgroup.wait_group(0)               # Z (and E P) done
    # Vnew_{c1} = U - g_s Z - E P; rows >= L selected to 0 (they may be NaN)
    for e in cutlass.range_constexpr(cute.size(accZ)):
        if cutlass.const_expr(first):
            accZ[e] = rU[e] - accZ[e]
        else:
            accZ[e] = rU[e] - (g_s * accZ[e] + accC[e])
    if L1 < CHUNK:
        for e in cutlass.range_constexpr(cute.size(accZ)):
            v = Float32(0.0)
            if tVc[e][0] < L1:
                v = accZ[e]
            accZ[e] = v
    sw._stmatrix_bf16(st_V, accZ_cv, rV_bf, st_V.partition_D(sVb_jv[None, None, c1 % NVB]))
    for e in cutlass.range_constexpr(cute.size(accZ)):
        cf = cb
        if tVc[e][0] == row_a:
            cf = ca
        accZ[e] = accZ[e] * cf
    sw._stmatrix_bf16(st_V, accZ_cv, rV_bf, st_V.partition_D(sP_jv[None, None, c1 % 2]))
    cute.arch.fence_proxy("async.shared", space="cta")
    cute.arch.barrier(barrier_id=BAR_CHAIN, number_of_threads=128)
    cute.arch.barrier_arrive(barrier_id=BAR_P + c1 % 2, number_of_threads=256)   # P_{c1}, Vnew_{c1} ready
    if ltid == 0:
        cute.arch.mbarrier_arrive(empty_bar + slot)        # the chain is done with ring c1
    # then E_{s+1} = W_{s+2} K_{s+1}^T (ring s + 2 <= nch exists; on the last step its W tile is not
    # loaded and the product is not used): off the tensor cores while the chain's and the state's
    # critical MMAs (Z, E P, K^T P) run, it overlaps the wait for S_{s+1}
    warpgroup.fence()
    r2 = c1 + 1
    cute.arch.mbarrier_wait(full_bar + r2 % NSLOT, (r2 // NSLOT) % 2)
    for kb in cutlass.range_constexpr(cute.size(tEWa, mode=[2])):
        mma_e.set(warpgroup.Field.ACCUMULATE, kb > 0)
        cute.gemm(mma_e, accE, tEWa[None, None, kb, r2 % NSLOT], tEKb[None, None, kb, r2 % NSLOT], accE)
    mma_e.set(warpgroup.Field.ACCUMULATE, True)
    warpgroup.commit_group()


@cute.jit
def _state(ltid: Int32, warp_idx: Int32, hv: Int32, slot: Int32, bos: Int32, eos: Int32, nch: Int32,
           col0: Int32, sK, sQ, sPq, sS, sP, sVb, sO, sS_kv, full_bar, empty_bar, tma_o, mO,
           gcum: cute.Tensor, rk: cute.Tensor, rq: cute.Tensor, state: cute.Tensor, out: cute.Tensor,
           scale: Float32, has_state: Int32):
    """Warpgroup 1: S_{s+1} = g_s S_s + K_s^T P_s and O_s, s = 0 .. nch - 1 (module docstring)."""
    mma1, mma2, _, _ = _tiled_mmas()
    producer = warp_idx == 4              # issues the output's TMA stores
    mO_h = mO[None, None, hv]

    thr1 = mma1.get_slice(ltid)
    thr2 = mma2.get_slice(ltid)
    tKa = thr2.make_fragment_A(thr2.partition_A(sK))            # (MMA, 2, 4, NSLOT)
    tPb = thr2.make_fragment_B(thr2.partition_B(sP))            # (MMA, 1, 4, 2)
    tQa = thr1.make_fragment_A(thr1.partition_A(sQ))            # (MMA, 1, 8, NSLOT)
    tSb = thr1.make_fragment_B(thr1.partition_B(sS))            # (MMA, 1, 8, 2)
    tPqa = thr1.make_fragment_A(thr1.partition_A(sPq))          # (MMA, 1, 4, NSLOT)
    tVbb = thr1.make_fragment_B(thr1.partition_B(sVb))          # (MMA, 1, 4, NVB)
    accS = cute.make_rmem_tensor(thr2.partition_shape_C((DK, VB)), Float32)
    accO = cute.make_rmem_tensor(thr1.partition_shape_C((CHUNK, VB)), Float32)
    accO2 = cute.make_rmem_tensor(thr1.partition_shape_C((CHUNK, VB)), Float32)
    tScS = thr2.partition_C(cute.make_identity_tensor((DK, VB)))
    tVcV = thr1.partition_C(cute.make_identity_tensor((CHUNK, VB)))
    row_a = tVcV[0][0]
    row_b = row_a + 8
    stsm = cute.make_copy_atom(cute.nvgpu.warp.StMatrix8x8x16bOp(False, 4), BFloat16)
    st_S = cute.make_tiled_copy_C(stsm, mma2).get_slice(ltid)
    st_O = cute.make_tiled_copy_C(stsm, mma1).get_slice(ltid)
    accS_cv = st_S.retile(accS)
    rS_bf = cute.make_rmem_tensor_like(accS_cv, BFloat16)
    accO_cv = st_O.retile(accO)
    rO_bf = cute.make_rmem_tensor_like(accO_cv, BFloat16)
    tOsO = st_O.partition_D(sO[None, None, 0])
    cp_v = sw._rows_copy()
    thr_v = cp_v.get_slice(ltid)
    tOS = thr_v.partition_S(sO[None, None, 0])
    tOC = thr_v.partition_S(cute.make_identity_tensor((CHUNK, VB)))

    mma1.set(warpgroup.Field.ACCUMULATE, True)
    mma2.set(warpgroup.Field.ACCUMULATE, True)

    gS = cute.domain_offset((0, col0), state[slot, hv, None, None])
    sw._load_state(accS, tScS, gS, has_state)
    # S_0 -> sS[0] for the chain's first Z and this warpgroup's first Q S
    sw._stmatrix_bf16(st_S, accS_cv, rS_bf, st_S.partition_D(sS_kv[None, None, 0]))
    cute.arch.fence_proxy("async.shared", space="cta")
    cute.arch.barrier(barrier_id=BAR_STATE, number_of_threads=128)
    cute.arch.barrier_arrive(barrier_id=BAR_S, number_of_threads=256)          # S_0 ready
    if ltid == 0:
        cute.arch.mbarrier_arrive(empty_bar + 0)         # ring 0 (W_0, U_0) is not read here

    # row data of chunk 0: g_last (decay), gcum and rq of this thread's rows (output row scale)
    glast = Float32(0.0)
    ga = Float32(0.0)
    ra = Float32(0.0)
    gb = Float32(0.0)
    rb = Float32(0.0)
    qa = Float32(0.0)
    qb = Float32(0.0)
    if nch > 0:
        glast, ga, ra, gb, rb = sw._row_data(gcum, rk, hv, bos, eos, row_a, row_b, ga, ra, gb, rb)
        qa, qb = sw._row_rq(rq, hv, bos, eos, row_a, row_b, qa, qb)

    for s in cutlass.range(0, nch, unroll=1):
        t0 = bos + s * CHUNK
        L = cutlass.min(eos - t0, CHUNK)
        r = s + 1
        rs = r % NSLOT
        decay = cute.math.exp(glast)
        os_a = Float32(0.0)
        os_b = Float32(0.0)
        if row_a < L:
            os_a = scale * qa * cute.math.exp(ga)
        if row_b < L:
            os_b = scale * qb * cute.math.exp(gb)
        if s + 1 < nch:
            glast, ga, ra, gb, rb = sw._row_data(gcum, rk, hv, t0 + CHUNK, eos, row_a, row_b, ga, ra, gb, rb)
            qa, qb = sw._row_rq(rq, hv, t0 + CHUNK, eos, row_a, row_b, qa, qb)

        cute.arch.barrier(barrier_id=BAR_P + s % 2, number_of_threads=256)     # P_s, Vnew_s
        cute.arch.mbarrier_wait(full_bar + rs, (r // NSLOT) % 2)      # K_s, q_s, pqk_s
        if L < CHUNK:
            # zero K rows j >= L (NaN * 0 = NaN inside K^T P); thread ltid owns column k = ltid
            for j in cutlass.range(L, CHUNK, unroll=1):
                sK[ltid, j, rs] = BFloat16(0.0)
            cute.arch.fence_proxy("async.shared", space="cta")
            cute.arch.barrier(barrier_id=BAR_STATE, number_of_threads=128)
        for e in cutlass.range_constexpr(cute.size(accS)):
            accS[e] = accS[e] * decay
        warpgroup.fence()
        for kb in cutlass.range_constexpr(cute.size(tKa, mode=[2])):
            cute.gemm(mma2, accS, tKa[None, None, kb, rs], tPb[None, None, kb, s % 2], accS)
        warpgroup.commit_group()
        warpgroup.wait_group(0)                                       # S_{s+1} complete
        if producer:
            cute.arch.cp_async_bulk_wait_group(0, read=True)          # O_{s-1}'s store has read sO
        if s + 1 < nch:
            sw._stmatrix_bf16(st_S, accS_cv, rS_bf, st_S.partition_D(sS_kv[None, None, (s + 1) % 2]))
            cute.arch.fence_proxy("async.shared", space="cta")
        cute.arch.barrier(barrier_id=BAR_STATE, number_of_threads=128)
        if s + 1 < nch:
            cute.arch.barrier_arrive(barrier_id=BAR_S + (s + 1) % 2, number_of_threads=256)   # S_{s+1} ready
        # the output's MMAs only now: K^T P ran alone on the tensor cores
        warpgroup.fence()
        for kb in cutlass.range_constexpr(cute.size(tQa, mode=[2])):
            mma1.set(warpgroup.Field.ACCUMULATE, kb > 0)
            cute.gemm(mma1, accO, tQa[None, None, kb, rs], tSb[None, None, kb, s % 2], accO)
        for kb in cutlass.range_constexpr(cute.size(tPqa, mode=[2])):
            mma1.set(warpgroup.Field.ACCUMULATE, kb > 0)
            cute.gemm(mma1, accO2, tPqa[None, None, kb, rs], tVbb[None, None, kb, s % NVB], accO2)
        mma1.set(warpgroup.Field.ACCUMULATE, True)
        warpgroup.commit_group()
        warpgroup.wait_group(0)                                       # Q S_s, Pqk Vnew_s complete
        sw._combine_o(accO, accO2, tVcV, row_a, os_a, os_b)
        sw._stmatrix_bf16(st_O, accO_cv, rO_bf, tOsO)
        cute.arch.fence_proxy("async.shared", space="cta")
        cute.arch.barrier(barrier_id=BAR_STATE, number_of_threads=128)
        sw._store_rows_vb(L, producer, tma_o, sO, mO_h, out, cp_v, thr_v, tOS, tOC, t0, hv, col0, Int32(0))
        if ltid == 0:
            cute.arch.mbarrier_arrive(empty_bar + rs)    # this warpgroup is done with ring r

    sw._store_state(accS, tScS, gS, has_state)
    if producer:
        cute.arch.cp_async_bulk_wait_group(0)


@cute.jit
def _loads(nch: Int32, bos: Int32, hv: Int32, hk: Int32, col0: Int32, full_bar, empty_bar,
           tma_w, mW, tma_u, mU, tma_k, mK, tma_q, mQ, tma_pq, mPq, sW, sU, sK, sQ, sPq):
    """Warp 8: every TMA load of the sequence, ring r + NSLOT as soon as both warpgroups have
    released ring r (its own warp: the loads never wait inside either warpgroup's chain)."""
    mW_h = mW[None, None, hv]
    mU_h = mU[None, None, hv]
    mK_h = mK[None, None, hk]
    mQ_h = mQ[None, None, hk]
    mPq_h = mPq[None, None, hv]
    for r in cutlass.range(0, nch + 1, unroll=1):
        if r >= NSLOT:
            cute.arch.mbarrier_wait(empty_bar + r % NSLOT, ((r - NSLOT) // NSLOT) % 2)
        _load_ring(r, nch, bos, col0, full_bar, tma_w, mW_h, tma_u, mU_h, tma_k, mK_h,
                   tma_q, mQ_h, tma_pq, mPq_h, sW, sU, sK, sQ, sPq)


# --------------------------------------------------------------------------- launch
@cute.jit
def spine_la(
    q: cute.Tensor, k: cute.Tensor, w: cute.Tensor, u: cute.Tensor, pqk: cute.Tensor,
    gcum: cute.Tensor, rq: cute.Tensor, rk: cute.Tensor,
    cu_seqlens: cute.Tensor, chunk_offsets: cute.Tensor,
    state: cute.Tensor, state_indices: cute.Tensor,
    vnew: cute.Tensor, h: cute.Tensor, out: cute.Tensor, scale: Float32,
    has_state: Int32, use_state_indices: Int32,
    stream: cuda.CUstream,
):
    """The launch (parameter names: gdn_problem_t fields, as every spine build; vnew and h are
    not used: the output is fused)."""
    lay = _smem_layouts()
    load, store = cpasync.CopyBulkTensorTileG2SOp(), cpasync.CopyBulkTensorTileS2GOp()
    w_view, u_view, q_view, pq_view, o_view = (sw._tma_view(t, [0, 2, 1]) for t in (w, u, q, pqk, out))
    k_view = sw._tma_view(k, [2, 0, 1])
    one = lambda name: cute.slice_(lay[name], (None, None, 0))     # noqa: E731
    tma_w, mW = cpasync.make_tiled_tma_atom(load, w_view, one("sW"), (CHUNK, DK))
    tma_u, mU = cpasync.make_tiled_tma_atom(load, u_view, one("sU"), (CHUNK, VB))
    tma_k, mK = cpasync.make_tiled_tma_atom(load, k_view, one("sK"), (DK, CHUNK))
    tma_q, mQ = cpasync.make_tiled_tma_atom(load, q_view, one("sQ"), (CHUNK, DK))
    tma_pq, mPq = cpasync.make_tiled_tma_atom(load, pq_view, one("sPq"), (CHUNK, CHUNK))
    tma_o, mO = cpasync.make_tiled_tma_atom(store, o_view, one("sO"), (CHUNK, VB))
    T = w.shape[0]
    N = cu_seqlens.shape[0] - 1
    Hv = w.shape[1]
    spine_la_kernel(
        tma_w, mW, tma_u, mU, tma_k, mK, tma_o, mO, tma_q, mQ, tma_pq, mPq,
        gcum, rk, rq, cu_seqlens, chunk_offsets, state, state_indices, out, scale,
        has_state, use_state_indices, Hv // k.shape[1],
    ).launch(grid=plan.grid_spine_wgmma(T, N, Hv, 1), block=[THREADS, 1, 1], stream=stream)


def launch_for(layout: str):
    return spine_la


def SMEM_BYTES(layout: str) -> int:  # noqa: N802
    return _smem_bytes()


VARIANTS: dict[str, dict] = {
    "spine_la_o_kv": {"layout": "kv"},
    "spine_la_o_vk": {"layout": "vk"},
}


def fake_args(dims, layout):
    return sw.fake_args(dims, layout, 1, False, True)
