"""Stage 3 "fwd_o": the chunk output of the Gated DeltaNet prefill.

One CTA per (chunk slot c, value head hv), FWD_O_THREADS threads.  With
n = chunk_seq[c], t0 = chunk_token[c], L = min(CHUNK, cu_seqlens[n+1] - t0) and
rows i, j in [0, L) of the chunk (DESIGN.md §1, stage 3):

    out[t0+i, hv, :] = scale * ( exp(gcum_i) * (q̂_i . S)
                                 + sum_{j<=i} (q̂_i . k̂_j) exp(gcum_i - gcum_j) vnew_j )

with S = h[c, hv] (bf16, S[k, v]), q̂ = q[., hv // (Hv // Hk), :] * rq[., hv],
k̂ = k[., same key head, :] * rk[., hv].  Rows i >= L are never read or written; a
slot with chunk_seq[c] < 0, or whose sequence is a padding entry
(use_state_indices and state_indices[n] < 0), returns at once.

This first version is SIMT fp32 (CUDA-core FMA from shared memory), written as
three separate products so each can move to warpgroup MMA independently:

    1. P  = tril(Q̂ K̂ᵀ ⊙ exp(gcum_i - gcum_j)) * scale        (64 x 64, K = 128)
    2. O  = diag(scale * exp(gcum)) Q̂ S                      (64 x 64 per V half, K = 128)
    3. O += P Vnew                                           (64 x 64 per V half, K = 64)

Products 2-3 run once per half of the 128 V columns (bounds shared memory: the
K̂ tile is dead after product 1, and the S / Vnew halves reuse its space).
Shared memory (fp32 tiles, rows padded against bank conflicts):

    sQ  64 x 132       33,792 B   Q̂ (rq folded in), rows >= L zero
    sP  64 x  80       20,480 B   P, zero above the diagonal and in rows >= L
    union of                     49,152 B
        sK  64 x 132   33,792 B   K̂ (rk folded in), rows >= L zero   (product 1)
        sS 128 x  64   32,768 B + sV 64 x 64  16,384 B               (products 2-3)
    sG, sRq, sRk 3 x 64 fp32        768 B
                       -------
                       104,192 B  -> two CTAs per SM on H100/H200

Global accesses: q, k and out are read / written element by element (2 bytes)
because their token and head strides are free (fake.qk / fake.tv, divisibility 1);
h and vnew are compact workspace tensors, read 16 bytes at a time.
"""

import cuda.bindings.driver as cuda

import cutlass
import cutlass.cute as cute
from cutlass import BFloat16, Float32, Int32
from cutlass.memory import SmemAllocator

from cute_kernels import fake
from gdn_prefill import plan

# ---- tile geometry (static) ----------------------------------------------------
_C = plan.CHUNK                  # 64 rows per chunk
_K = plan.HEAD_DIM_K             # 128
_V = plan.HEAD_DIM_V             # 128
_NT = plan.FWD_O_THREADS         # 256 (THREADS below)
_VH = _V // 2                    # V columns per pass (two passes)
_KP = _K + 4                     # padded fp32 row stride of sQ / sK (bank offset 4 per row)
_PP = _C + 16                    # padded fp32 row stride of sP (bank offset 16 per row)
_VEC = 4                         # fp32 elements per shared-memory vector read (16 B)
_GVEC = 8                        # bf16 elements per global vector read of h / vnew (16 B)

_SQ_BYTES = _C * _KP * 4
_SP_BYTES = _C * _PP * 4
_SK_BYTES = _C * _KP * 4
_SS_BYTES = _K * _VH * 4
_SV_BYTES = _C * _VH * 4
_UNION_BYTES = max(_SK_BYTES, _SS_BYTES + _SV_BYTES)
_SROW_BYTES = 3 * _C * 4
SMEM_BYTES = _SQ_BYTES + _SP_BYTES + _UNION_BYTES + _SROW_BYTES

assert _NT == 256 and _C == 64 and _K == 128 and _V == 128, "thread maps below assume these"
assert SMEM_BYTES <= 227 * 1024


# ---- device helpers -------------------------------------------------------------
@cute.jit
def _vec4(s: cute.Tensor, row, col4):
    """The 4 fp32 elements s[row, 4*col4 : 4*col4+4] of a row-major smem tile (one LDS.128)."""
    return cute.local_tile(s, (1, _VEC), (row, col4))[0, None]


@cute.jit
def _load_rows_scaled(src: cute.Tensor, head, t0, L, sRow: cute.Tensor, dst: cute.Tensor, tid):
    """dst[i, :] = src[t0+i, head, :] * sRow[i] (fp32) for i < L, 0 for L <= i < C.

    src is a [T, H, 128] bf16 tensor with free token/head strides: element loads,
    128 consecutive threads on one row (coalesced).
    """
    col = tid % _K
    r0 = tid // _K
    for r in cutlass.range(_C // (_NT // _K), unroll=8):
        i = r * (_NT // _K) + r0
        x = Float32(0.0)
        if i < L:
            x = src[t0 + i, head, col].to(Float32) * sRow[i]
        dst[i, col] = x


@cute.jit
def _fma_abt(acc: cute.Tensor, rA: cute.Tensor, rB: cute.Tensor, sA: cute.Tensor, sB: cute.Tensor,
             ti, tj, kdim: cutlass.Constexpr):
    """acc[a, b] += sum_k sA[ti + 16a, k] * sB[tj + 16b, k]   (A Bᵀ, both K-contiguous).

    Per 4-wide k step: 4 + 4 LDS.128, 64 FFMA.  Warp lanes span 2 rows of A
    (broadcast) and 16 rows of B (row stride = 4 banks mod 32: conflict-free).
    """
    for kq in cutlass.range(kdim // _VEC, unroll=4):
        for a in cutlass.range_constexpr(4):
            cute.autovec_copy(_vec4(sA, ti + 16 * a, kq), rA[a, None])
        for b in cutlass.range_constexpr(4):
            cute.autovec_copy(_vec4(sB, tj + 16 * b, kq), rB[b, None])
        for kk in cutlass.range_constexpr(_VEC):
            for a in cutlass.range_constexpr(4):
                for b in cutlass.range_constexpr(4):
                    acc[a, b] = acc[a, b] + rA[a, kk] * rB[b, kk]


@cute.jit
def _fma_ab(acc: cute.Tensor, rA: cute.Tensor, rB: cute.Tensor, sA: cute.Tensor, sB: cute.Tensor,
            ti, tv, kdim: cutlass.Constexpr):
    """acc[a, b] += sum_k sA[ti + 16a, k] * sB[k, 4 tv + b]   (A B, B N-contiguous).

    Per 4-wide k step: 4 LDS.128 of A (broadcast over the 16 lanes sharing ti)
    and 4 LDS.128 of B (16 lanes read one contiguous 256 B row), 64 FFMA.
    """
    for kq in cutlass.range(kdim // _VEC, unroll=2):
        for a in cutlass.range_constexpr(4):
            cute.autovec_copy(_vec4(sA, ti + 16 * a, kq), rA[a, None])
        for kk in cutlass.range_constexpr(_VEC):
            cute.autovec_copy(_vec4(sB, kq * _VEC + kk, tv), rB[kk, None])
        for kk in cutlass.range_constexpr(_VEC):
            for a in cutlass.range_constexpr(4):
                for b in cutlass.range_constexpr(4):
                    acc[a, b] = acc[a, b] + rA[a, kk] * rB[kk, b]


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
    chunk_seq: cute.Tensor,
    chunk_token: cute.Tensor,
    out: cute.Tensor,
    scale: Float32,
    use_state_indices: Int32,
):
    tid, _, _ = cute.arch.thread_idx()
    c, hv, _ = cute.arch.block_idx()

    # ---- shared memory (static; allocated before any branch) --------------------
    smem = SmemAllocator()
    sQ = smem.allocate_tensor(Float32, cute.make_layout((_C, _K), stride=(_KP, 1)), 16)
    sP = smem.allocate_tensor(Float32, cute.make_layout((_C, _C), stride=(_PP, 1)), 16)
    union = smem.allocate_array(Float32, _UNION_BYTES // 4, byte_alignment=16)
    sK = cute.make_tensor(union, cute.make_layout((_C, _K), stride=(_KP, 1)))
    sS = cute.make_tensor(union, cute.make_layout((_K, _VH), stride=(_VH, 1)))
    sV = cute.make_tensor(union + _K * _VH, cute.make_layout((_C, _VH), stride=(_VH, 1)))
    sG = smem.allocate_tensor(Float32, cute.make_layout(_C), 16)
    sRq = smem.allocate_tensor(Float32, cute.make_layout(_C), 16)
    sRk = smem.allocate_tensor(Float32, cute.make_layout(_C), 16)

    # ---- which chunk, and is it live? -------------------------------------------
    live = Int32(0)
    n = Int32(-1)
    if c < chunk_seq.shape[0]:
        n = chunk_seq[c]
    if n >= 0:
        live = Int32(1)
        if use_state_indices != 0:
            if state_indices[n] < 0:
                live = Int32(0)

    if live != 0:
        t0 = chunk_token[c]
        L = cu_seqlens[n + 1] - t0
        if L > _C:
            L = Int32(_C)
        Hv = gcum.shape[1]
        Hk = q.shape[1]
        hk = hv // (Hv // Hk)

        # -- per-row scalars: gcum, rq, rk (rows >= L: 0, which zeroes Q̂ / K̂ rows) --
        if tid < _C:
            gi = Float32(0.0)
            rqi = Float32(0.0)
            rki = Float32(0.0)
            if tid < L:
                gi = gcum[t0 + tid, hv]
                rqi = rq[t0 + tid, hv]
                rki = rk[t0 + tid, hv]
            sG[tid] = gi
            sRq[tid] = rqi
            sRk[tid] = rki
        cute.arch.sync_threads()

        # -- Q̂ and K̂ tiles -----------------------------------------------------------
        _load_rows_scaled(q, hk, t0, L, sRq, sQ, tid)
        _load_rows_scaled(k, hk, t0, L, sRk, sK, tid)
        cute.arch.sync_threads()

        # -- product 1: P = tril(Q̂ K̂ᵀ ⊙ decay) * scale -------------------------------
        # thread (ti, tj) owns rows i = ti + 16a and columns j = tj + 16b (a, b < 4)
        ti = tid // 16
        tj = tid % 16
        acc = cute.make_rmem_tensor(cute.make_layout((4, 4), stride=(4, 1)), Float32)
        rA = cute.make_rmem_tensor(cute.make_layout((4, _VEC), stride=(_VEC, 1)), Float32)
        rB = cute.make_rmem_tensor(cute.make_layout((4, _VEC), stride=(_VEC, 1)), Float32)
        acc.fill(0.0)
        _fma_abt(acc, rA, rB, sQ, sK, ti, tj, _K)
        for a in cutlass.range_constexpr(4):
            i = ti + 16 * a
            gi = sG[i]
            for b in cutlass.range_constexpr(4):
                j = tj + 16 * b
                p = Float32(0.0)
                if j <= i and i < L:
                    p = acc[a, b] * cute.math.exp(gi - sG[j]) * scale
                sP[i, j] = p
        cute.arch.sync_threads()   # sK is dead from here on; sP complete

        # -- products 2 and 3, per half of V ------------------------------------------
        # thread (ti, tv) owns rows i = ti + 16a and columns v = 4 tv + b (a, b < 4)
        tv = tid % 16
        rowfac = cute.make_rmem_tensor(cute.make_layout(4), Float32)
        for a in cutlass.range_constexpr(4):
            rowfac[a] = scale * cute.math.exp(sG[ti + 16 * a])
        for half in cutlass.range_constexpr(2):
            if half > 0:
                cute.arch.sync_threads()   # everyone is done reading the previous sS / sV
            v0 = half * _VH
            # S[:, v0:v0+64] -> sS (bf16 -> fp32), 16 B per global read
            hsl = h[c, hv, None, None]
            for r in cutlass.range_constexpr(_K * _VH // _GVEC // _NT):
                e = tid + _NT * r
                row = e // (_VH // _GVEC)
                c8 = e % (_VH // _GVEC)
                src = cute.local_tile(hsl, (1, _GVEC), (row, v0 // _GVEC + c8))[0, None]
                x = src.load().to(Float32)
                cute.local_tile(sS, (1, _GVEC), (row, c8))[0, None].store(x)
            # Vnew[t0+j, hv, v0:v0+64] -> sV, rows >= L zero
            for r in cutlass.range_constexpr(_C * _VH // _GVEC // _NT):
                e = tid + _NT * r
                row = e // (_VH // _GVEC)
                c8 = e % (_VH // _GVEC)
                dst = cute.local_tile(sV, (1, _GVEC), (row, c8))[0, None]
                if row < L:
                    vrow = vnew[t0 + row, hv, None]
                    src = cute.local_tile(vrow, (_GVEC,), (v0 // _GVEC + c8,))
                    dst.store(src.load().to(Float32))
                else:
                    dst.fill(0.0)
            cute.arch.sync_threads()

            # product 2: acc = Q̂ S (64 x 64), then rows scaled by scale * exp(gcum_i)
            acc.fill(0.0)
            _fma_ab(acc, rA, rB, sQ, sS, ti, tv, _K)
            for a in cutlass.range_constexpr(4):
                for b in cutlass.range_constexpr(4):
                    acc[a, b] = acc[a, b] * rowfac[a]
            # product 3: acc += P Vnew (K = 64)
            _fma_ab(acc, rA, rB, sP, sV, ti, tv, _C)
            # store rows < L (element stores: out strides are free)
            for a in cutlass.range_constexpr(4):
                i = ti + 16 * a
                if i < L:
                    for b in cutlass.range_constexpr(4):
                        out[t0 + i, hv, v0 + _VEC * tv + b] = acc[a, b].to(BFloat16)


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
    chunk_seq: cute.Tensor,
    chunk_token: cute.Tensor,
    out: cute.Tensor,
    scale: Float32,
    use_state_indices: Int32,
    stream: cuda.CUstream,
):
    T = q.shape[0]
    N = cu_seqlens.shape[0] - 1
    Hv = out.shape[1]
    gx, gy, gz = plan.grid_fwd_o(T, N, Hv)
    _fwd_o_kernel(
        q, k, gcum, rq, rk, h, vnew, cu_seqlens, state_indices, chunk_seq, chunk_token, out,
        scale, use_state_indices,
    ).launch(grid=[gx, gy, gz], block=[THREADS, 1, 1], smem=SMEM_BYTES, stream=stream)


LAUNCH = fwd_o
THREADS = plan.FWD_O_THREADS
VARIANTS: dict[str, dict] = {"fwd_o_bf16": {}}


def fake_args(dims, **variant) -> list:
    """Fake arguments of fwd_o, in parameter order, stream excluded."""
    return [
        fake.qk(dims),                 # q
        fake.qk(dims),                 # k
        fake.ws_th(dims),              # gcum
        fake.ws_th(dims),              # rq
        fake.ws_th(dims),              # rk
        fake.ws_h(dims),               # h
        fake.ws_tvd(dims, _V),         # vnew
        fake.cu_seqlens(dims),         # cu_seqlens
        fake.state_indices(dims),      # state_indices
        fake.chunk_slots(dims),        # chunk_seq
        fake.chunk_slots(dims),        # chunk_token
        fake.tv(dims),                 # out
        fake.f32(1.0),                 # scale
        fake.i32(0),                   # use_state_indices
    ]
