"""Stage 1 "recompute W/U": per (chunk slot, value head), everything the spine needs.

For the L <= 64 tokens of one chunk slot c and one value head hv (DESIGN.md §1):

    gcum_i = sum_{j<=i} g_j                                  (in-chunk, fp32)
    rq_i, rk_i = rsqrt(sum x^2 + 1e-6) of the q / k rows of key head hv // (Hv // Hk)
                 (1.0 when use_qk_l2norm == 0);  k̂ = rk * k
    A_ij = beta_i (k̂_i . k̂_j) exp(gcum_i - gcum_j)  for i > j, else 0
    Tm   = (I + A)^-1                                        (fp32, unit lower triangular)
    w    = Tm diag(beta exp(gcum)) K̂,   u = Tm diag(beta) V   (stored bf16)

This first version is SIMT fp32 (CUDA-core FMAs on shared-memory tiles).  The
phases are kept apart so that the two 64x64x128 products (phase 2: K̂ K̂^T,
phase 4: Tw K̂ and Tu V) can later move to warpgroup MMA without touching the
loads (phase 1) or the triangular solve (phase 3):

  phase 1  all 8 warps: rows of q, k, v -> norms, K̂ and V (fp32) in smem;
           warp 0 also loads g, beta and scans g into gcum.
  phase 2  256 threads: A (strictly lower, 64x64) into smem, 4x4 entries each.
  phase 3  threads 0..63: thread j owns column j of Tm and solves (I + A) Tm = I by
           forward substitution in registers (no barrier inside); it then writes
           the column scaled by beta_j exp(gcum_j) (-> Tw) and by beta_j (-> Tu,
           reusing A's buffer once every thread is past the solve).
  phase 4  256 threads: w = Tw K̂, u = Tu V; each thread 4 rows x 8 columns per
           product; rows >= L are never written.

Rows >= L (past the sequence end inside a partial chunk) are never read from
global memory: their K̂, V, g and beta are zero in smem, which makes their rows
and columns of A zero and keeps every value finite.

Shared memory (SMEM_BYTES = 102,096 B, two CTAs per SM): K̂ 64 rows of stride 132
fp32, V 64x128 fp32, A/Tu and Tw 64 rows of stride 68 fp32, gcum / beta /
beta*exp(gcum) vectors.  SmemAllocator sizes the launch's dynamic smem itself and
the generated runtime raises the kernel's dynamic-smem limit above 48 KB.

Assumptions the entry point's guards must enforce (nothing here checks them):
  Hv % Hk == 0; q, k, v last dim contiguous (stride 1) with K = V = 128; w, u
  compact [T, Hv, 128] with 8-byte aligned base (16 B is what fake.ws_tvd
  declares); gcum/rq/rk [T, Hv] with unit head stride; chunk_seq/chunk_token
  produced by chunk_index (every active slot has 1 <= L <= 64 and
  t0 + L <= cu_seqlens[n+1] <= T).
"""
from __future__ import annotations

import cuda.bindings.driver as cuda

import cutlass
import cutlass.cute as cute
from cutlass import BFloat16, Float32, Int32

from cute_kernels import fake
from gdn_prefill import plan

C = plan.CHUNK                    # 64 tokens per chunk
DK = plan.HEAD_DIM_K              # 128
DV = plan.HEAD_DIM_V              # 128
NTHREADS = plan.RECOMPUTE_WU_THREADS   # 256
assert C == 64 and DK == 128 and DV == 128 and NTHREADS == 256, \
    "recompute_wu's thread mapping is written for C=64, K=V=128, 256 threads"

NWARPS = NTHREADS // 32           # 8
ROWS_PER_WARP = C // NWARPS       # 8 rows of q/k/v loaded by each warp
KS = DK + 4                       # K̂ smem row stride (floats): 16B rows, conflict-free float4 columns
VS = DV                           # V smem row stride
TS = C + 4                        # A / Tw / Tu smem row stride
L2_EPS = 1e-6

# bytes SmemAllocator reserves (cosize of each padded tile; every piece is a multiple of 16 B)
SMEM_BYTES = 4 * (((C - 1) * KS + DK) + C * VS + 2 * ((C - 1) * TS + C) + 3 * C)
assert SMEM_BYTES == 102096


@cute.kernel
def recompute_wu_kernel(
    q: cute.Tensor, k: cute.Tensor, v: cute.Tensor, g: cute.Tensor, beta: cute.Tensor,
    cu_seqlens: cute.Tensor, state_indices: cute.Tensor,
    chunk_seq: cute.Tensor, chunk_token: cute.Tensor,
    gcum: cute.Tensor, rq: cute.Tensor, rk: cute.Tensor, w: cute.Tensor, u: cute.Tensor,
    use_qk_l2norm: Int32, use_state_indices: Int32,
):
    tidx, _, _ = cute.arch.thread_idx()
    c, hv, _ = cute.arch.block_idx()
    lane = tidx % 32
    warp = tidx // 32

    # ---- shared memory ---------------------------------------------------------
    smem = cutlass.utils.SmemAllocator()
    sK = smem.allocate_tensor(Float32, cute.make_layout((C, DK), stride=(KS, 1)), byte_alignment=16)
    sV = smem.allocate_tensor(Float32, cute.make_layout((C, DV), stride=(VS, 1)), byte_alignment=16)
    sA = smem.allocate_tensor(Float32, cute.make_layout((C, C), stride=(TS, 1)), byte_alignment=16)
    sTw = smem.allocate_tensor(Float32, cute.make_layout((C, C), stride=(TS, 1)), byte_alignment=16)
    sG = smem.allocate_tensor(Float32, cute.make_layout(C), byte_alignment=16)    # gcum
    sB = smem.allocate_tensor(Float32, cute.make_layout(C), byte_alignment=16)    # beta
    sE = smem.allocate_tensor(Float32, cute.make_layout(C), byte_alignment=16)    # beta*exp(gcum)
    # float4 views: [row, col // 4, col % 4]
    sK4 = cute.make_tensor(sK.iterator, cute.make_layout((C, DK // 4, 4), stride=(KS, 4, 1)))
    sV4 = cute.make_tensor(sV.iterator, cute.make_layout((C, DV // 4, 4), stride=(VS, 4, 1)))
    sA4 = cute.make_tensor(sA.iterator, cute.make_layout((C, C // 4, 4), stride=(TS, 4, 1)))
    sTw4 = cute.make_tensor(sTw.iterator, cute.make_layout((C, C // 4, 4), stride=(TS, 4, 1)))

    # ---- which chunk, which sequence -------------------------------------------
    n = chunk_seq[c]
    active = Int32(0)
    if n >= 0:
        active = Int32(1)
        if use_state_indices != 0:
            if state_indices[n] < 0:
                active = Int32(0)

    if active != 0:
        t0 = chunk_token[c]
        L = cutlass.min(cu_seqlens[n + 1] - t0, C)
        hk = hv // (v.shape[1] // k.shape[1])

        # ---- phase 1a: g, beta -> gcum (warp 0, lane owns rows 2*lane, 2*lane+1) ----
        if warp == 0:
            r0 = 2 * lane
            g0 = Float32(0.0)
            g1 = Float32(0.0)
            b0 = Float32(0.0)
            b1 = Float32(0.0)
            if r0 < L:
                g0 = g[t0 + r0, hv]
                b0 = beta[t0 + r0, hv].to(Float32)
            if r0 + 1 < L:
                g1 = g[t0 + r0 + 1, hv]
                b1 = beta[t0 + r0 + 1, hv].to(Float32)
            # inclusive scan of the pair sums over the warp
            x = g0 + g1
            for sh in cutlass.range_constexpr(5):
                y = cute.arch.shuffle_sync_up(x, offset=1 << sh)
                if lane >= (1 << sh):
                    x = x + y
            c1 = x                 # gcum of row 2*lane+1
            c0 = x - g1            # gcum of row 2*lane
            sG[r0] = c0
            sG[r0 + 1] = c1
            sB[r0] = b0
            sB[r0 + 1] = b1
            sE[r0] = b0 * cute.math.exp(c0)
            sE[r0 + 1] = b1 * cute.math.exp(c1)
            if r0 < L:
                gcum[t0 + r0, hv] = c0
            if r0 + 1 < L:
                gcum[t0 + r0 + 1, hv] = c1

        # ---- phase 1b: q, k, v rows (warp w: rows 8w..8w+7, lane: cols lane+32*e) ----
        for half in cutlass.range_constexpr(2):
            fk = cute.make_rmem_tensor((4, 4), Float32)
            fq = cute.make_rmem_tensor((4, 4), Float32)
            fv = cute.make_rmem_tensor((4, 4), Float32)
            fk.fill(0.0)
            fq.fill(0.0)
            fv.fill(0.0)
            for s in cutlass.range_constexpr(4):
                r = warp * ROWS_PER_WARP + half * 4 + s
                if r < L:
                    t = t0 + r
                    for e in cutlass.range_constexpr(4):
                        fk[s, e] = k[t, hk, lane + 32 * e].to(Float32)
                        fv[s, e] = v[t, hv, lane + 32 * e].to(Float32)
                    if use_qk_l2norm != 0:
                        for e in cutlass.range_constexpr(4):
                            fq[s, e] = q[t, hk, lane + 32 * e].to(Float32)
            for s in cutlass.range_constexpr(4):
                r = warp * ROWS_PER_WARP + half * 4 + s
                rkv = Float32(1.0)
                rqv = Float32(1.0)
                if use_qk_l2norm != 0:
                    ssk = Float32(0.0)
                    ssq = Float32(0.0)
                    for e in cutlass.range_constexpr(4):
                        ssk = ssk + fk[s, e] * fk[s, e]
                        ssq = ssq + fq[s, e] * fq[s, e]
                    ssk = cute.arch.warp_reduction_sum(ssk)
                    ssq = cute.arch.warp_reduction_sum(ssq)
                    rkv = cute.math.rsqrt(ssk + L2_EPS)
                    rqv = cute.math.rsqrt(ssq + L2_EPS)
                for e in cutlass.range_constexpr(4):
                    sK[r, lane + 32 * e] = fk[s, e] * rkv
                    sV[r, lane + 32 * e] = fv[s, e]
                if r < L:
                    if lane == 0:
                        rk[t0 + r, hv] = rkv
                        rq[t0 + r, hv] = rqv

        cute.arch.sync_threads()

        # ---- phase 2: A = strictly-lower( beta_i (k̂_i . k̂_j) exp(gcum_i - gcum_j) ) ----
        # thread (ti, tj) = (tidx // 16, tidx % 16) owns rows ti + 16a, columns tj + 16b
        ti = tidx // 16
        tj = tidx % 16
        acc = cute.make_rmem_tensor((4, 4), Float32)
        acc.fill(0.0)
        for kc in cutlass.range(DK // 4, unroll=2):
            xi = cute.make_rmem_tensor((4, 4), Float32)
            xj = cute.make_rmem_tensor((4, 4), Float32)
            for a in cutlass.range_constexpr(4):
                xi[a, None].store(sK4[ti + 16 * a, kc, None].load())
                xj[a, None].store(sK4[tj + 16 * a, kc, None].load())
            for e in cutlass.range_constexpr(4):
                for a in cutlass.range_constexpr(4):
                    for b in cutlass.range_constexpr(4):
                        acc[a, b] = acc[a, b] + xi[a, e] * xj[b, e]
        for a in cutlass.range_constexpr(4):
            i = ti + 16 * a
            gi = sG[i]
            bi = sB[i]
            for b in cutlass.range_constexpr(4):
                j = tj + 16 * b
                val = Float32(0.0)
                if i > j:
                    val = bi * acc[a, b] * cute.math.exp(gi - sG[j])
                sA[i, j] = val

        cute.arch.sync_threads()

        # ---- phase 3: Tm = (I + A)^-1, thread j < 64 owns column j (registers) ----
        col = cute.make_rmem_tensor(C, Float32)
        if tidx < C:
            jcol = tidx
            for i in cutlass.range_constexpr(C):
                part = cute.make_rmem_tensor(4, Float32)
                part.fill(0.0)
                for mc in cutlass.range_constexpr((i + 3) // 4):
                    arow = cute.make_rmem_tensor(4, Float32)
                    arow.store(sA4[i, mc, None].load())
                    for e in cutlass.range_constexpr(4):
                        if cutlass.const_expr(mc * 4 + e < i):
                            part[e] = part[e] + arow[e] * col[mc * 4 + e]
                diag = Float32(0.0)
                if jcol == i:
                    diag = Float32(1.0)
                col[i] = diag - ((part[0] + part[1]) + (part[2] + part[3]))
        cute.arch.sync_threads()            # every thread is done reading A
        if tidx < C:
            jcol = tidx
            bj = sB[jcol]
            ej = sE[jcol]
            for i in cutlass.range_constexpr(C):
                sTw[i, jcol] = col[i] * ej
                sA[i, jcol] = col[i] * bj       # sA now holds Tu = Tm diag(beta)
        cute.arch.sync_threads()

        # ---- phase 4: w = Tw K̂, u = Tu V; thread owns rows ti+16a, cols 4tj+64b+e ----
        _tri_product(sTw4, sK4, w, t0, L, hv, ti, tj)
        _tri_product(sA4, sV4, u, t0, L, hv, ti, tj)


@cute.jit
def _tri_product(sT4: cute.Tensor, sX4: cute.Tensor, out: cute.Tensor,
                 t0: Int32, L: Int32, hv: Int32, ti: Int32, tj: Int32):
    """out[t0+i, hv, :] = sum_m T[i, m] X[m, :] for the rows i < L this thread owns."""
    acc = cute.make_rmem_tensor((4, 2, 4), Float32)
    acc.fill(0.0)
    for mc in cutlass.range(C // 4, unroll=1):
        tr = cute.make_rmem_tensor((4, 4), Float32)      # T[ti+16a, 4mc+e]
        xr = cute.make_rmem_tensor((4, 2, 4), Float32)   # X[4mc+e, 4tj+64b+f]
        for a in cutlass.range_constexpr(4):
            tr[a, None].store(sT4[ti + 16 * a, mc, None].load())
        for e in cutlass.range_constexpr(4):
            for b in cutlass.range_constexpr(2):
                xr[e, b, None].store(sX4[4 * mc + e, tj + 16 * b, None].load())
        for e in cutlass.range_constexpr(4):
            for a in cutlass.range_constexpr(4):
                for b in cutlass.range_constexpr(2):
                    for f in cutlass.range_constexpr(4):
                        acc[a, b, f] = acc[a, b, f] + tr[a, e] * xr[e, b, f]
    for a in cutlass.range_constexpr(4):
        i = ti + 16 * a
        if i < L:
            for b in cutlass.range_constexpr(2):
                ob = cute.make_rmem_tensor(4, BFloat16)
                ob.store(acc[a, b, None].load().to(BFloat16))
                dst = cute.local_tile(out[t0 + i, hv, None], (4,), (tj + 16 * b,))
                cute.autovec_copy(ob, dst)


@cute.jit
def recompute_wu(
    q: cute.Tensor, k: cute.Tensor, v: cute.Tensor, g: cute.Tensor, beta: cute.Tensor,
    cu_seqlens: cute.Tensor, state_indices: cute.Tensor,
    chunk_seq: cute.Tensor, chunk_token: cute.Tensor,
    gcum: cute.Tensor, rq: cute.Tensor, rk: cute.Tensor, w: cute.Tensor, u: cute.Tensor,
    use_qk_l2norm: Int32, use_state_indices: Int32,
    stream: cuda.CUstream,
):
    T = q.shape[0]
    N = cu_seqlens.shape[0] - 1
    Hv = v.shape[1]
    recompute_wu_kernel(
        q, k, v, g, beta, cu_seqlens, state_indices, chunk_seq, chunk_token,
        gcum, rq, rk, w, u, use_qk_l2norm, use_state_indices,
    ).launch(grid=plan.grid_recompute_wu(T, N, Hv), block=[NTHREADS, 1, 1], stream=stream)


LAUNCH = recompute_wu
THREADS = NTHREADS

VARIANTS: dict[str, dict] = {
    "recompute_wu_bf16_betaf32": {"beta_dtype": Float32},
    "recompute_wu_bf16_betabf16": {"beta_dtype": BFloat16},
}


def fake_args(dims: fake.Dims, beta_dtype=Float32) -> list:
    return [
        fake.qk(dims),                    # q
        fake.qk(dims),                    # k
        fake.tv(dims),                    # v
        fake.th(dims, Float32),           # g
        fake.th(dims, beta_dtype),        # beta
        fake.cu_seqlens(dims),            # cu_seqlens
        fake.state_indices(dims),         # state_indices
        fake.chunk_slots(dims),           # chunk_seq
        fake.chunk_slots(dims),           # chunk_token
        fake.ws_th(dims),                 # gcum
        fake.ws_th(dims),                 # rq
        fake.ws_th(dims),                 # rk
        fake.ws_tvd(dims, DK),            # w
        fake.ws_tvd(dims, DV),            # u
        fake.i32(1),                      # use_qk_l2norm
        fake.i32(0),                      # use_state_indices
    ]

