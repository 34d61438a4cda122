"""Stage 2, the `scalar` spine: the chunk recurrence in fp32 FMA on CUDA cores.

The baseline every tensor-core spine is measured against (docs/DESIGN.md §1). One CTA
of SCALAR_SPINE_THREADS (128) threads owns one (sequence n, value head hv, V block
vb) and walks the sequence's chunks in order, holding the state block
S[k, v], k in [0, 128), v in [vb*32, vb*32 + 32), in fp32 for the whole sequence.
Per chunk c (tokens t0 .. t0 + L - 1, L <= 64):

    h[c, hv, :, cols] = bf16(S)                                  state at chunk entry
    vnew_j = u_j - w_j . S                                       fp32, stored bf16
    S <- exp(gcum_{L-1}) S + sum_j k_j (rk_j exp(gcum_{L-1} - gcum_j) vnew_j)^T

(the per-row factor rk_j exp(..) is applied to the fp32 vnew row rather than to
k_j; the product is the same k̂_j exp(..) ⊗ vnew_j of the contract).

Data placement (smem, per CTA):
  sS  fp32 [128 k][32 v]  the state; 16-byte column chunks XOR-swizzled by k % 8 so
                          that row reads, column reads and the "vk" transpose are
                          all bank-conflict free
  sW  bf16 [64 j][128 k]  the chunk's w rows (row pitch padded to 136 elements)
  sK  bf16 [64 j][128 k]  the chunk's raw k rows (key head hv // (Hv // Hk))
  sV  fp32 [64 j][32 v]   rk_j exp(gcum_last - gcum_j) * vnew_j (0 for j >= L)
  sF  fp32 [64]           rk_j exp(gcum_last - gcum_j) (0 for j >= L)
Rows j >= L of sW / sK / u are copies of row L - 1 (a token of this sequence), so
every global read stays inside the chunk and the inner loops always run over 64
rows: those rows only reach vnew rows j >= L, which are never stored and enter sV
as exact zeros.

Threads: warp wi, lane = 8 * sub + vg.  Let q = 4 * wi + sub (0..15).
  vnew  : rows j = q + 16 r (r < 4), columns 4 vg .. 4 vg + 3     (4 x 4 accumulators)
  update: rows k = 8 q .. 8 q + 7,   columns 4 vg .. 4 vg + 3     (the thread's 32 S
          values live in registers for the whole sequence)
State I/O goes through sS with a layout-specific coalesced
mapping: "kv" (v contiguous) reads 32 consecutive v of one k row per warp
instruction, "vk" (k contiguous) reads 8 consecutive k x 4 v (four full sectors): the initial
state (from `state` or `initial_state`, state_pool.py), the final one, and each checkpoint (the
chunk's end state from sS, in a loop rather than unrolled inside the chunk loop).
"""
from __future__ import annotations

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
from cutlass import BFloat16, Float32, Int32
from cutlass.memory import SmemAllocator

from cute_kernels import fake, pdl, slots, state_pool
from gdn_prefill import grids

CHUNK = grids.CHUNK
DK = grids.HEAD_DIM_K
DV = grids.HEAD_DIM_V
VB = grids.SCALAR_SPINE_VBLOCK
THREADS = grids.SCALAR_SPINE_THREADS

# The thread mappings below are written for exactly this geometry.
assert CHUNK == 64 and DK == 128 and DV == 128, "spine_scalar: tile geometry changed"
assert VB == 32 and THREADS == 128, "spine_scalar: thread mapping assumes Vb=32, 128 threads"

STAGE_ITERS = CHUNK * DK // 8 // THREADS  # 16-byte row pieces of w (and of k) per thread per chunk
W_PITCH = DK + 8  # sW row pitch in elements: 272 B rows spread 4 consecutive rows over 4 bank groups

# dynamic smem bytes (the DSL sizes the launch from the allocator; this is for explain())
SMEM_BYTES = (
    DK * VB * 4            # sS
    + CHUNK * W_PITCH * 2  # sW
    + CHUNK * DK * 2       # sK
    + CHUNK * VB * 4       # sV
    + CHUNK * 4            # sF
)


def _swz(v_chunk, k):
    """Physical 16-byte column chunk of logical chunk v_chunk (= v // 4) in row k of sS."""
    return v_chunk ^ (k % 8)


@cute.kernel
def spine_scalar_kernel(
    k: cute.Tensor,
    w: cute.Tensor,
    u: cute.Tensor,
    gcum: cute.Tensor,
    rk: cute.Tensor,
    cu_seqlens: cute.Tensor,
    state: cute.Tensor,
    state_indices: cute.Tensor,
    vnew: cute.Tensor,
    h: cute.Tensor,
    has_state: Int32,
    use_state_indices: Int32,
    checkpoints: cute.Tensor,
    checkpoint_chunks: Int32,
    initial_state: cute.Tensor,
    state_in: Int32,
    has_initial: cute.Tensor,
    checkpoint_pool: cute.Tensor,
    group: Int32,
    num_tokens: Int32,
    state_kv: cutlass.Constexpr,
):
    pdl.enter()
    tid, _, _ = cute.arch.thread_idx()
    n, hv, vb = cute.arch.block_idx()
    wi = tid // 32
    lane = tid % 32
    vg = lane % 8              # 4-column group of the CTA's 32 columns
    sub = lane // 8
    q = wi * 4 + sub           # 0..15: vnew row group / update k group
    kb = q * 8                 # first state row owned in the update
    hk = hv // group           # GQA: key head of value head hv
    vc0 = vb * (VB // 4)       # first 4-column chunk of the CTA in the 128 V columns

    smem = SmemAllocator()
    sS = smem.allocate_tensor(Float32, cute.make_layout((4, VB // 4, DK), stride=(1, 4, VB)), 16)
    sW = smem.allocate_tensor(BFloat16, cute.make_layout((8, DK // 8, CHUNK), stride=(1, 8, W_PITCH)), 16)
    sK = smem.allocate_tensor(BFloat16, cute.make_layout((8, DK // 8, CHUNK), stride=(1, 8, DK)), 16)
    sV = smem.allocate_tensor(Float32, cute.make_layout((4, VB // 4, CHUNK), stride=(1, 4, VB)), 16)
    sF = smem.allocate_tensor(Float32, cute.make_layout((CHUNK,), stride=(1,)), 16)

    # ---- which state slot; padding sequences do nothing at all --------------------
    slot = n
    if use_state_indices != 0:
        slot = state_indices[n]
    if slot >= 0:
        bos = cu_seqlens[n]
        eos = cutlass.min(cu_seqlens[n + 1], num_tokens)   # never past T
        nchunks = Int32(0)
        if eos > bos:
            nchunks = (eos - bos + (CHUNK - 1)) // CHUNK
        coff = slots.first_slot(bos, n)                  # slot of chunk 0 (h)

        # ---- S0: registers (32 values per thread) and sS ------------------------------
        Sr = cute.make_rmem_tensor((4, 8), Float32)        # Sr[c, e] = S[kb + e, 4 vg + c]
        Sr.fill(0.0)
        src = state_pool.source(state_in, has_initial, n)
        if src != 0:              # state_pool.py: the initial state from state or initial_state
            if src == 1:
                _state_io(state, slot, hv, vc0, sS, wi, lane, state_kv, True)
            else:
                _state_io(initial_state, slot, hv, vc0, sS, wi, lane, state_kv, True)
            cute.arch.sync_threads()
            for e in cutlass.range_constexpr(8):
                Sr[None, e].store(sS[None, _swz(vg, e), kb + e].load())
        for e in cutlass.range_constexpr(8):
            sS[None, _swz(vg, e), kb + e].store(Sr[None, e].load())

        acc = cute.make_rmem_tensor((4, 4), Float32)       # acc[c, r]: row q + 16 r
        wr = cute.make_rmem_tensor((8, 4), Float32)        # w[q + 16 r, 8 kk + e]
        sr = cute.make_rmem_tensor((4, 8), Float32)        # S[8 kk + e, 4 vg + c]
        ur = cute.make_rmem_tensor((4, 4), Float32)        # u[q + 16 r, 4 vg + c]
        kr = cute.make_rmem_tensor((8,), Float32)
        vr = cute.make_rmem_tensor((4,), Float32)
        wst = [cute.make_rmem_tensor((8,), BFloat16) for _ in range(STAGE_ITERS)]
        kst = [cute.make_rmem_tensor((8,), BFloat16) for _ in range(STAGE_ITERS)]

        # the chunks in segments of checkpoint_chunks (state_pool.segment_chunks): the chunk loop
        # holds no checkpoint code, the store goes between segments (as in spine_rs)
        seg = state_pool.segment_chunks(nchunks, checkpoint_chunks)
        for sg in cutlass.range((nchunks + seg - 1) // seg, unroll=1):
            i_end = cutlass.min((sg + 1) * seg, nchunks)
            for i in cutlass.range(sg * seg, i_end, unroll=1):
                t0 = bos + i * CHUNK
                c = coff + i
                L = cutlass.min(eos - t0, CHUNK)

                # -- h[c] = bf16(S at chunk entry), from the registers ----------------------
                for e in cutlass.range_constexpr(8):
                    hrow = h[c, hv, kb + e, None]
                    h4 = cute.make_tensor(hrow.iterator, cute.make_layout((4, DV // 4), stride=(1, 4)))
                    h4[None, vc0 + vg].store(Sr[None, e].load().to(BFloat16))

                # -- all of the chunk's global loads first, branch-free, so that they overlap --
                # Rows past the chunk end are clamped to row L - 1 (always a token of this
                # sequence, < T): their w / u / k values only reach rows j >= L of the vnew
                # accumulator, which are replaced by 0 before anything reads them, so the
                # inner loops need no bounds and never read past the sequence.
                g_last = gcum[t0 + L - 1, hv]
                jf = cutlass.min(tid % CHUNK, L - 1)
                g_j = gcum[t0 + jf, hv]
                r_j = rk[t0 + jf, hv]
                for r in cutlass.range_constexpr(4):
                    urow = u[t0 + cutlass.min(q + 16 * r, L - 1), hv, None]
                    u4 = cute.make_tensor(urow.iterator, cute.make_layout((4, DV // 4), stride=(1, 4)))
                    ur[None, r].store(u4[None, vc0 + vg].load().to(Float32))
                for it in cutlass.range_constexpr(STAGE_ITERS):
                    jr = cutlass.min(it * (THREADS // 16) + tid // 16, L - 1)
                    cc = tid % 16
                    wrow = w[t0 + jr, hv, None]
                    w8 = cute.make_tensor(wrow.iterator, cute.make_layout((8, DK // 8), stride=(1, 8)))
                    wst[it].store(w8[None, cc].load())
                    krow = k[t0 + jr, hk, None]
                    k8 = cute.make_tensor(krow.iterator, cute.make_layout((8, DK // 8), stride=(1, 8)))
                    kst[it].store(k8[None, cc].load())

                # -- chunk gate: sF[j] = rk_j exp(g_last - g_j) for j < L, else 0 ---------------
                decay = cute.math.exp(g_last)
                f = r_j * cute.math.exp(g_last - g_j)
                if tid >= L:
                    f = Float32(0.0)
                if tid < CHUNK:
                    sF[tid] = f
                for it in cutlass.range_constexpr(STAGE_ITERS):
                    j = it * (THREADS // 16) + tid // 16
                    cc = tid % 16
                    sW[None, cc, j].store(wst[it].load())
                    sK[None, cc, j].store(kst[it].load())
                cute.arch.sync_threads()

                # -- vnew = u - w . S  (fp32) -------------------------------------------------
                acc.fill(0.0)
                for kk in cutlass.range(DK // 8, unroll=2):
                    for r in cutlass.range_constexpr(4):
                        wr[None, r].store(sW[None, kk, q + 16 * r].load().to(Float32))
                    for e in cutlass.range_constexpr(8):
                        sr[None, e].store(sS[None, _swz(vg, e), kk * 8 + e].load())
                    for e in cutlass.range_constexpr(8):
                        for r in cutlass.range_constexpr(4):
                            for cc in cutlass.range_constexpr(4):
                                acc[cc, r] = cute.math.fma(wr[e, r], sr[cc, e], acc[cc, r])
                for r in cutlass.range_constexpr(4):
                    j = q + 16 * r
                    for cc in cutlass.range_constexpr(4):
                        acc[cc, r] = ur[cc, r] - acc[cc, r]
                    if j < L:
                        vrow = vnew[t0 + j, hv, None]
                        v4 = cute.make_tensor(vrow.iterator, cute.make_layout((4, DV // 4), stride=(1, 4)))
                        v4[None, vc0 + vg].store(acc[None, r].load().to(BFloat16))
                        fj = sF[j]
                        for cc in cutlass.range_constexpr(4):
                            acc[cc, r] = acc[cc, r] * fj
                    else:
                        acc[None, r].fill(0.0)
                    sV[None, vg, j].store(acc[None, r].load())
                cute.arch.sync_threads()

                # -- S <- exp(g_last) S + K^T (f * vnew) ---------------------------------------
                for e in cutlass.range_constexpr(8):
                    for cc in cutlass.range_constexpr(4):
                        Sr[cc, e] = Sr[cc, e] * decay
                for j in cutlass.range(CHUNK, unroll=4):
                    kr.store(sK[None, q, j].load().to(Float32))
                    vr.store(sV[None, vg, j].load())
                    for e in cutlass.range_constexpr(8):
                        for cc in cutlass.range_constexpr(4):
                            Sr[cc, e] = cute.math.fma(kr[e], vr[cc], Sr[cc, e])
                for e in cutlass.range_constexpr(8):
                    sS[None, _swz(vg, e), kb + e].store(Sr[None, e].load())
                cute.arch.sync_threads()
            # a checkpoint (state_pool.py) after the segment's last chunk: its end state from sS,
            # which the next chunk rewrites only after two more CTA barriers
            ck = state_pool.checkpoint_slot_after(i_end - 1, (eos - bos) // CHUNK, n, checkpoints, checkpoint_chunks)
            if ck >= 0:
                _state_io(checkpoint_pool, ck, hv, vc0, sS, wi, lane, state_kv, False, False)

        # ---- final state ------------------------------------------------------------------
        if has_state != 0:
            cute.arch.sync_threads()
            _state_io(state, slot, hv, vc0, sS, wi, lane, state_kv, False)


@cute.jit
def _state_io(state, slot, hv, vc0, sS, wi, lane, state_kv: cutlass.Constexpr, load: cutlass.Constexpr,
              unrolled: cutlass.Constexpr = True):
    """Coalesced copy between state[slot, hv, :, 32 vc0 ...] and the swizzled sS.  unrolled=False:
    a loop (the checkpoints inside the chunk loop: unrolled there, their addresses took up to ~100
    registers more)."""
    gS = state[slot, hv, None, None]          # [K, V] fp32 logical S[k, v]
    if cutlass.const_expr(unrolled):
        for it in cutlass.range_constexpr(DK // 4):
            _state_io_step(it, gS, vc0, sS, wi, lane, state_kv, load)
    else:
        for it in cutlass.range(DK // 4, unroll=1):
            _state_io_step(it, gS, vc0, sS, wi, lane, state_kv, load)


@cute.jit
def _state_io_step(it, gS, vc0, sS, wi, lane, state_kv: cutlass.Constexpr, load: cutlass.Constexpr):
    """Step `it` of _state_io: one warp instruction's worth of elements."""
    if cutlass.const_expr(state_kv):
        # v contiguous: a warp moves 32 consecutive v of one row k
        kk = it * 4 + wi
        col = vc0 * 4 + lane
        if cutlass.const_expr(load):
            sS[lane % 4, _swz(lane // 4, kk), kk] = state_pool.to_f32(gS[kk, col])
        else:
            gS[kk, col] = state_pool.from_f32(sS[lane % 4, _swz(lane // 4, kk), kk], gS.element_type)
    else:
        # k contiguous: a warp moves 8 consecutive k x 4 columns (four full 32 B sectors)
        vt = it // 4                          # 4-column chunk 0..7
        kk = ((it % 4) * 4 + wi) * 8 + lane % 8
        vl = lane // 8
        col = vc0 * 4 + vt * 4 + vl
        if cutlass.const_expr(load):
            sS[vl, _swz(vt, kk), kk] = state_pool.to_f32(gS[kk, col])
        else:
            gS[kk, col] = state_pool.from_f32(sS[vl, _swz(vt, kk), kk], gS.element_type)


@cute.jit
def spine_scalar(
    k: cute.Tensor,
    w: cute.Tensor,
    u: cute.Tensor,
    gcum: cute.Tensor,
    rk: cute.Tensor,
    cu_seqlens: cute.Tensor,
    state: cute.Tensor,
    state_indices: cute.Tensor,
    vnew: cute.Tensor,
    h: cute.Tensor,
    has_state: Int32,
    use_state_indices: Int32,
    checkpoints: cute.Tensor,
    checkpoint_chunks: Int32,
    initial_state: cute.Tensor,
    state_in: Int32,
    has_initial: cute.Tensor,
    checkpoint_pool: cute.Tensor,
    stream: cuda.CUstream,
):
    T = gcum.shape[0]
    N = cu_seqlens.shape[0] - 1
    Hv = gcum.shape[1]
    Hk = k.shape[1]
    # the logical S[k, v] view's V stride tells the two pool layouts apart at compile time
    state_kv = cutlass.const_expr(state.stride[3] == 1)
    spine_scalar_kernel(
        k, w, u, gcum, rk, cu_seqlens, state, state_indices, vnew, h,
        has_state, use_state_indices, checkpoints, checkpoint_chunks, initial_state, state_in, has_initial,
        checkpoint_pool, Hv // Hk, T, state_kv,
    ).launch(grid=grids.grid_spine_scalar(T, N, Hv), block=[THREADS, 1, 1], stream=stream,
             use_pdl=pdl.USE_PDL)


LAUNCH = spine_scalar

VARIANTS: dict[str, dict] = state_pool.variants({
    "spine_scalar_kv": {"layout": "kv"},
    "spine_scalar_vk": {"layout": "vk"},
})


def fake_args(dims, layout, state_dtype="fp32"):
    """Fake arguments of spine_scalar (all but stream), in parameter order."""
    sdt = state_pool.state_dtype(state_dtype)
    return [
        fake.qk(dims),                 # k        [T, Hk, K] bf16, strides free
        fake.ws_tvd(dims, DK),         # w        [T, Hv, K] bf16 compact
        fake.ws_tvd(dims, DV),         # u        [T, Hv, V] bf16 compact
        fake.ws_th(dims),              # gcum     [T, Hv] fp32 head-major
        fake.ws_th(dims),              # rk       [T, Hv] fp32 head-major
        fake.cu_seqlens(dims),         # cu_seqlens    [N+1]
        fake.state(dims, layout, sdt),  # state   [P, Hv, K, V] logical view
        fake.state_indices(dims),      # state_indices [N]
        fake.ws_tvd(dims, DV),         # vnew     [T, Hv, V] bf16 compact
        fake.ws_h(dims),               # h        [CB, Hv, K, V] bf16 compact
        fake.i32(0),                   # has_state
        fake.i32(0),                   # use_state_indices
        fake.checkpoints(dims),        # checkpoints   [N, J]
        fake.i32(0),                   # checkpoint_chunks
        fake.state(dims, layout, sdt),  # initial_state (state_in 2)
        fake.i32(1),                   # state_in
        fake.has_initial(dims),        # has_initial [N] (state_in 3, 4)
        fake.checkpoint_pool(dims, layout, sdt),
    ]
