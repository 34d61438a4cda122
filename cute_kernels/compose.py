"""The segmented plan's composition (builds compose_f32): each segment's initial state from the
segment maps, one segment after another.

The segmented plan (docs/DESIGN.md §3) cuts a long sequence into segments j = 0 .. nseg - 1 and
runs their chains side by side.  Its first pass (spine_rs, Role.MAPS) leaves, in the workspace,
each segment's affine map S_end = A_j S_start + B_j (A_j, B_j in maps[2 slot], maps[2 slot + 1];
segment 0's B already starts from the sequence's initial state, so it is the state at segment
1's entry).  This kernel forms the states at the segments' entries,

    S_1 = B_0,    S_{j+1} = A_j S_j + B_j    (j = 1 .. nseg - 2)

into seg_state[slot of segment j + 1], where the last pass (spine_rs, Role.SEGMENT) starts each
segment's chain.  The chain over j is the plan's serial part: nseg - 2 products of 128 x 128 by
128 x 128 per head.  A_j maps each state column on its own, so a CTA owns COLS columns of one
(sequence, head) and needs no other CTA: grids.grid_compose, N x Hv x (V / COLS) CTAs, each
walking its sequence's segments.

The products run on the tensor cores at fp32 accuracy: mma.sync m16n8k8 in three TF32 passes
(cute_kernels/mma_tf32.py: each operand split hi + lo, the lo * lo term dropped, ~2^-20 relative
a product, against the bf16 rounding of S that each chunk of the chains applies).  Warp w of
the CTA's WARPS owns the 16 rows [16 w, 16 w + 16) of the product, one m16 x n8 tile (n8 = COLS),
and walks K in 16 k-steps.  The sum over k is order-free, so k is renumbered for the loads: in
k-step 2 p + h, the fragment's k-index t (t = lane % 4) stands for k = 16 p + 4 t + 2 h and
t + 4 for k + 1, in A_j and in S_j alike.  A lane's A_j values of one row are then one 16-byte
piece per p (16 LDG.128 a step, for the rows g and g + 8, g = lane / 4, loaded a step ahead) and
its S_j values one 16-byte LDS per p from S_j kept column-major in shared memory (a padded column
stride: no bank conflict).  The k-steps feed ACCS accumulators in turn (independent mma chains),
summed at the end of the step; then B_j is added, the tile written to seg_state and, as S_{j+1},
to the other of two shared-memory buffers (one CTA barrier a step).  (Tensor cores rather than
fp32 FMA on CUDA cores, whose cross-lane reductions leave the step latency-bound:
docs/PERFORMANCE.md, the segmented plan.)
"""
from __future__ import annotations

import cuda.bindings.driver as cuda

import cutlass
import cutlass.cute as cute
from cutlass import Float32, Int32

from gdn_prefill import grids

from cute_kernels import pdl, slots
from cute_kernels.mma_tf32 import mma_3xtf32, split_tf32

DK = grids.HEAD_DIM_K
DV = grids.HEAD_DIM_V
assert DK == DV, "a segment map is a K x K state"


class Compose:
    """The composition kernel (module docstring).  Configuration: COLS state columns per CTA (one
    n8 tile), WARPS warps (one m16 tile of rows each), ACCS accumulators per warp."""

    COLS = grids.COMPOSE_COLS
    WARPS = DK // 16
    THREADS = 32 * WARPS
    VEC = 4                          # fp32 per 16-byte piece
    PIECES = DK // 16                # 16-byte pieces of a lane's row of A_j (k = 16 p + 4 t ..)
    KSTEPS = DK // 8
    ACCS = 4
    SPAD = DK + 16                   # S column stride in shared memory (floats): 16 mod 32 banks

    def __init__(self):
        assert self.COLS == 8, "one n8 tile of columns"
        assert DV % self.COLS == 0 and self.KSTEPS == 2 * self.PIECES and self.KSTEPS % self.ACCS == 0

    @staticmethod
    def can_implement(K: int, V: int) -> bool:
        """K = V = 128: the only head size compiled (a map is a K x K state)."""
        return K == DK and V == DV

    def smem_bytes(self) -> int:
        return 4 * 2 * self.COLS * self.SPAD          # S_j and S_{j+1}

    @cute.kernel
    def kernel(self, cu_seqlens: cute.Tensor, state_indices: cute.Tensor, use_state_indices: Int32,
               maps: cute.Tensor, seg_state: cute.Tensor, seg_chunks: Int32, Hv: Int32):
        pdl.enter()
        tidx, _, _ = cute.arch.thread_idx()
        bx, _, _ = cute.arch.block_idx()
        nblk = DV // self.COLS
        c0 = (bx % nblk) * self.COLS
        hv = (bx // nblk) % Hv
        n = bx // (nblk * Hv)
        live = Int32(1)
        if use_state_indices != 0:
            if state_indices[n] < 0:
                live = Int32(0)
        bos = cu_seqlens[n]
        nch = (cu_seqlens[n + 1] - bos + (grids.CHUNK - 1)) // grids.CHUNK
        nseg = (nch + seg_chunks - 1) // seg_chunks
        if live != 0 and nseg > 1:
            s0 = slots.first_segment_slot(bos, n, seg_chunks)
            self._walk(tidx, hv, c0, s0, nseg, maps, seg_state)

    @cute.jit
    def _walk(self, tidx: Int32, hv: Int32, c0: Int32, s0: Int32, nseg: Int32, maps: cute.Tensor,
              seg_state: cute.Tensor):
        """S_1 = B_0, then S_{j+1} = A_j S_j + B_j, each into seg_state[s0 + j + 1] (columns c0 ..
        c0 + COLS of head hv)."""
        smem = cutlass.utils.SmemAllocator()
        # S (k, c) of buffer b at ((k % 4, k // 4), c, b): column-major, columns SPAD apart
        sS = smem.allocate_tensor(
            Float32, cute.make_layout(((self.VEC, DK // self.VEC), self.COLS, 2),
                                      stride=((1, self.VEC), self.SPAD, self.COLS * self.SPAD)), 16)
        warp = tidx // 32
        lane = tidx % 32
        g = lane // 4
        t = lane % 4
        r0 = 16 * warp + g                      # this lane's rows of the tile: r0, r0 + 8
        # S_1 = B_0
        x = cute.make_rmem_tensor((2, 2), Float32)
        self._load_c(x, maps[2 * s0 + 1, hv, None, None], r0, c0 + 2 * t)
        self._put(x, sS, seg_state[s0 + 1, hv, None, None], 0, r0, c0, t)
        rA = cute.make_rmem_tensor((2, self.PIECES, self.VEC), Float32)   # A_j[r0 + 8 i, 16 p + 4 t + e]
        if nseg > 2:
            self._load_a(rA, maps[2 * (s0 + 1), hv, None, None], r0, t)
        cute.arch.sync_threads()
        for j in cutlass.range(1, nseg - 1, unroll=1):
            buf = (j - 1) % 2
            b = cute.make_rmem_tensor((2, 2), Float32)
            self._load_c(b, maps[2 * (s0 + j) + 1, hv, None, None], r0, c0 + 2 * t)
            a = cute.make_rmem_tensor((2, self.PIECES, self.VEC), Float32)
            a.store(rA.load())
            if j + 1 < nseg - 1:
                self._load_a(rA, maps[2 * (s0 + j + 1), hv, None, None], r0, t)     # in flight below
            # this lane's S_j values: column g, k = 16 p + 4 t + e
            sb = cute.make_rmem_tensor((self.PIECES, self.VEC), Float32)
            for p in cutlass.range_constexpr(self.PIECES):
                piece = cute.make_rmem_tensor((self.VEC,), Float32)
                cute.autovec_copy(sS[(None, 4 * p + t), g, buf], piece)
                for e in cutlass.range_constexpr(self.VEC):
                    sb[p, e] = piece[e]
            acc = cute.make_rmem_tensor((self.ACCS, 4), Float32)
            acc.fill(0.0)
            for kk in cutlass.range_constexpr(self.KSTEPS):
                self._kstep(acc, a, sb, kk)
            for u in cutlass.range_constexpr(1, self.ACCS):
                for i in cutlass.range_constexpr(4):
                    acc[0, i] = acc[0, i] + acc[u, i]
            for i in cutlass.range_constexpr(2):
                for e in cutlass.range_constexpr(2):
                    x[i, e] = acc[0, 2 * i + e] + b[i, e]
            self._put(x, sS, seg_state[s0 + j + 1, hv, None, None], 1 - buf, r0, c0, t)
            cute.arch.sync_threads()            # S_{j+1} complete in the other buffer

    @cute.jit
    def _kstep(self, acc: cute.Tensor, a: cute.Tensor, sb: cute.Tensor, kk: cutlass.Constexpr):
        """k-step kk = 2 p + h into accumulator kk % ACCS: fragment k-index t is k = 16 p + 4 t + 2 h,
        t + 4 is k + 1 (A: a0 = A[g, t], a1 = A[g + 8, t], a2 = A[g, t + 4], a3 = A[g + 8, t + 4];
        B: b0 = S[t, g], b1 = S[t + 4, g])."""
        p = kk // 2
        e = 2 * (kk % 2)
        a0h, a0l = split_tf32(a[0, p, e])
        a1h, a1l = split_tf32(a[1, p, e])
        a2h, a2l = split_tf32(a[0, p, e + 1])
        a3h, a3l = split_tf32(a[1, p, e + 1])
        b0h, b0l = split_tf32(sb[p, e])
        b1h, b1l = split_tf32(sb[p, e + 1])
        u = kk % self.ACCS
        d = mma_3xtf32((a0h, a1h, a2h, a3h), (a0l, a1l, a2l, a3l), (b0h, b1h), (b0l, b1l),
                       (acc[u, 0], acc[u, 1], acc[u, 2], acc[u, 3]))
        for i in cutlass.range_constexpr(4):
            acc[u, i] = d[i]

    @cute.jit
    def _put(self, x: cute.Tensor, sS: cute.Tensor, gOut: cute.Tensor, buf, r0: Int32, c0: Int32, t: Int32):
        """This lane's C values of a composed state (rows r0, r0 + 8, columns 2 t, 2 t + 1 of the
        tile): into seg_state (columns c0 + 2 t ..) and into shared-memory buffer buf."""
        for i in cutlass.range_constexpr(2):
            r = r0 + 8 * i
            piece = cute.make_rmem_tensor((2,), Float32)
            for e in cutlass.range_constexpr(2):
                piece[e] = x[i, e]
                sS[(r % self.VEC, r // self.VEC), 2 * t + e, buf] = x[i, e]
            cute.autovec_copy(piece, self._vec(gOut, r, c0 + 2 * t, 2))

    @cute.jit
    def _load_c(self, x: cute.Tensor, g: cute.Tensor, r0: Int32, c: Int32):
        """x[i, e] = g[r0 + 8 i, c + e]: a lane's C-fragment positions of a K x V fp32 state."""
        for i in cutlass.range_constexpr(2):
            piece = cute.make_rmem_tensor((2,), Float32)
            cute.autovec_copy(self._vec(g, r0 + 8 * i, c, 2), piece)
            for e in cutlass.range_constexpr(2):
                x[i, e] = piece[e]

    @cute.jit
    def _vec(self, g: cute.Tensor, r: Int32, c: Int32, n: cutlass.Constexpr) -> cute.Tensor:
        """The n fp32 at row r, columns c .. c + n of a K x V fp32 state (c a multiple of n)."""
        flat = cute.make_tensor(g.iterator, cute.make_layout((n, DK * DV // n), stride=(1, n)))
        return flat[None, (r * DV + c) // n]

    @cute.jit
    def _load_a(self, rA: cute.Tensor, gA: cute.Tensor, r0: Int32, t: Int32):
        """This lane's values of A_j (K x K fp32): rows r0 and r0 + 8, k = 16 p + 4 t .. + 4, one
        16-byte piece each (the warp's 8 rows x 64 bytes a load)."""
        for i in cutlass.range_constexpr(2):
            for p in cutlass.range_constexpr(self.PIECES):
                piece = cute.make_rmem_tensor((self.VEC,), Float32)
                cute.autovec_copy(self._vec(gA, r0 + 8 * i, 16 * p + self.VEC * t, self.VEC), piece)
                for e in cutlass.range_constexpr(self.VEC):
                    rA[i, p, e] = piece[e]


@cute.jit
def compose(cu_seqlens: cute.Tensor, state_indices: cute.Tensor, use_state_indices: Int32,
            maps: cute.Tensor, seg_state: cute.Tensor, seg_chunks: Int32, stream: cuda.CUstream):
    """The launch (parameter names: gdn_problem_t fields)."""
    op = Compose()
    N = cu_seqlens.shape[0] - 1
    Hv = maps.shape[1]
    op.kernel(cu_seqlens, state_indices, use_state_indices, maps, seg_state, seg_chunks, Hv).launch(
        grid=grids.grid_compose(N, Hv), block=[Compose.THREADS, 1, 1], stream=stream, use_pdl=pdl.USE_PDL)


LAUNCH = compose
THREADS = Compose.THREADS
SMEM_BYTES = Compose().smem_bytes()
VARIANTS: dict[str, dict] = {"compose_f32": {}}


def fake_args(dims):
    """Fake tensors/scalars for every parameter of the launch except stream, in order."""
    from cute_kernels import fake
    return [fake.cu_seqlens(dims), fake.state_indices(dims), fake.i32(0), fake.ws_states(dims, dims.M2),
            fake.ws_states(dims, dims.M), fake.i32(1)]
