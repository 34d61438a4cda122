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
128 x 128 per head, in fp32 FMA (the states' precision: no operand is rounded).  A_j maps each
state column on its own, so a CTA owns COLS columns of one (sequence, head) and needs no other
CTA: plan.grid_compose, N x Hv x (V / COLS) CTAs, each walking its sequence's segments.

Per step, warp w of the CTA's WARPS owns rows [ROWS w, ROWS (w + 1)) of the product, and lane l
the k in [4 l, 4 l + 4): each of the warp's row loads is one coalesced 512-byte read of A_j (a
16-byte piece per lane, loaded a step ahead), and the lane's S_j slice (4 rows x COLS) stays in
registers for the whole step, read once from shared memory.  A lane forms its partial sums for
every (row, column) of the warp, then the warp reduces them across its lanes by halving
exchanges (reduce-scatter: 5 shuffle rounds), after which lane l holds row ROWS w + l // 2,
columns COLS / 2 (l % 2) ..; it adds B_j and writes them to seg_state and to the other of two
S buffers in shared memory (one CTA barrier a step).  A step is ~1,024 FMA issue cycles of the
SM (128 x 128 x COLS multiply-adds).  (Runs 150-152: A_j read row-wise by each thread, or staged
through shared memory, made a step 4.4-5.2 us; each thread's row was one uncoalesced read.)
"""
from __future__ import annotations

import cuda.bindings.driver as cuda

import cutlass
import cutlass.cute as cute
from cutlass import Float32, Int32

from gdn_prefill import plan

from cute_kernels import pdl, slots

DK = plan.HEAD_DIM_K
DV = plan.HEAD_DIM_V
assert DK == DV, "a segment map is a K x K state"


class Compose:
    """The composition kernel (module docstring).  Configuration: COLS state columns per CTA,
    THREADS threads (two per row of the product)."""

    COLS = plan.COMPOSE_COLS
    THREADS = 2 * DK
    VEC = 4                          # fp32 per 16-byte piece: a lane's k of a row
    WARPS = THREADS // 32
    ROWS = DK // WARPS               # rows of the product per warp
    LANES = 32

    def __init__(self):
        assert DV % self.COLS == 0 and self.COLS == 2 * self.VEC and self.LANES * self.VEC == DK
        assert self.ROWS * self.COLS == self.LANES * self.VEC, "the reduce-scatter leaves 4 sums per lane"

    @staticmethod
    def can_implement(K: int, V: int) -> bool:
        """K = V = 128: the only head size compiled (a map is a K x K state)."""
        return K == DK and V == DV

    def smem_bytes(self) -> int:
        return 4 * 2 * DK * self.COLS                # S_j and S_{j+1}

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
        nch = (cu_seqlens[n + 1] - bos + (plan.CHUNK - 1)) // plan.CHUNK
        nseg = (nch + seg_chunks - 1) // seg_chunks
        if live != 0 and nseg > 1:
            s0 = slots.first_segment_slot(bos, n, seg_chunks)
            self._walk(tidx, hv, c0, s0, nseg, maps, seg_state)

    @cute.jit
    def _walk(self, tidx: Int32, hv: Int32, c0: Int32, s0: Int32, nseg: Int32, maps: cute.Tensor,
              seg_state: cute.Tensor):
        """S_1 = B_0, then S_{j+1} = A_j S_j + B_j, each into seg_state[s0 + j + 1] (columns c0 ..
        c0 + COLS of head hv)."""
        V, R, C = self.VEC, self.ROWS, self.COLS
        smem = cutlass.utils.SmemAllocator()
        # S (k, c) of buffer b at ((k % 4, c // 4, k // 4), c % 4): a lane's 16-byte reads of its
        # rows 4 l .. 4 l + 3 are consecutive across the warp (no bank conflict)
        sS = smem.allocate_tensor(
            Float32, cute.make_layout(((V, self.LANES), (V, 2), 2),
                                      stride=((2 * self.LANES * V, V), (1, self.LANES * V), DK * C)), 16)
        warp = tidx // 32
        lane = tidx % 32
        # the sums this lane ends with (reduce-scatter): row R warp + lane // 2, columns 4 (lane % 2) ..
        r_out = R * warp + lane // 2
        c_out = V * (lane % 2)
        # S_1 = B_0
        x = cute.make_rmem_tensor((V,), Float32)
        cute.autovec_copy(self._piece(maps[2 * s0 + 1, hv, None, None], r_out, c0 + c_out), x)
        self._put(x, sS, seg_state[s0 + 1, hv, None, None], 0, r_out, c0, c_out)
        rA = cute.make_rmem_tensor((R, V), Float32)         # A_j[R warp + q, 4 lane + i]
        if nseg > 2:
            self._load_a(rA, maps[2 * (s0 + 1), hv, None, None], warp, lane)
        cute.arch.sync_threads()
        for j in cutlass.range(1, nseg - 1, unroll=1):
            buf = (j - 1) % 2
            b = cute.make_rmem_tensor((V,), Float32)
            cute.autovec_copy(self._piece(maps[2 * (s0 + j) + 1, hv, None, None], r_out, c0 + c_out), b)
            a = cute.make_rmem_tensor((R, V), Float32)
            a.store(rA.load())
            if j + 1 < nseg - 1:
                self._load_a(rA, maps[2 * (s0 + j + 1), hv, None, None], warp, lane)     # in flight below
            # this lane's S_j rows 4 lane + i, every column
            sl = cute.make_rmem_tensor((V, C), Float32)
            for i in cutlass.range_constexpr(V):
                for m in cutlass.range_constexpr(2):
                    piece = cute.make_rmem_tensor((V,), Float32)
                    cute.autovec_copy(sS[(i, lane), (None, m), buf], piece)
                    for e in cutlass.range_constexpr(V):
                        sl[i, m * V + e] = piece[e]
            # partial sums over this lane's k for the warp's rows q, columns c (entry q C + c), with
            # the reduce-scatter's first round (partner lane ^ 16) as they are formed: a lane keeps
            # rows q + R / 2 (lane bit 4 set) or q, so that only half of them are ever held
            upper = (lane & (self.LANES // 2)) != 0
            acc = cute.make_rmem_tensor((R * C // 2,), Float32)
            for q in cutlass.range_constexpr(R // 2):
                for c in cutlass.range_constexpr(C):
                    lo = self._dot(a, sl, q, c)
                    hi = self._dot(a, sl, q + R // 2, c)
                    give = cutlass.select_(upper, lo, hi)
                    acc[q * C + c] = cutlass.select_(upper, hi, lo) + cute.arch.shuffle_sync_bfly(
                        give, offset=self.LANES // 2)
            x = self._reduce_scatter(acc, lane)
            for e in cutlass.range_constexpr(V):
                x[e] = x[e] + b[e]
            self._put(x, sS, seg_state[s0 + j + 1, hv, None, None], 1 - buf, r_out, c0, c_out)
            cute.arch.sync_threads()            # S_{j+1} complete in the other buffer

    @cute.jit
    def _dot(self, a: cute.Tensor, sl: cute.Tensor, q, c) -> Float32:
        """Row q of the warp's A_j rows times column c of the lane's S_j slice (its 4 k)."""
        t = a[q, 0] * sl[0, c]
        for i in cutlass.range_constexpr(1, self.VEC):
            t = t + a[q, i] * sl[i, c]
        return t

    @cute.jit
    def _reduce_scatter(self, acc: cute.Tensor, lane: Int32) -> cute.Tensor:
        """The rest of the reduce-scatter of the warp's ROWS x COLS sums, after its first round
        (acc: ROWS x COLS / 2 values a lane): at each round (partner lane ^ 8, 4, 2, 1) a lane keeps
        the half of its values its lane bit selects, adds the partner's copy of that half, and
        passes on the other; lane l ends with entries [4 l, 4 l + 4) of the ROWS x COLS (row
        l // 2, columns 4 (l % 2) ..)."""
        vals = acc
        rounds = (self.ROWS * self.COLS // self.VEC).bit_length() - 2          # 4 more: partners 8 .. 1
        for level in cutlass.range_constexpr(1, rounds + 1):
            n = self.ROWS * self.COLS >> (level + 1)
            off = (self.LANES // 2) >> level
            upper = (lane & off) != 0
            nxt = cute.make_rmem_tensor((n,), Float32)
            for e in cutlass.range_constexpr(n):
                keep = cutlass.select_(upper, vals[n + e], vals[e])
                give = cutlass.select_(upper, vals[e], vals[n + e])
                nxt[e] = keep + cute.arch.shuffle_sync_bfly(give, offset=off)
            vals = nxt
        return vals

    @cute.jit
    def _put(self, x: cute.Tensor, sS: cute.Tensor, gOut: cute.Tensor, buf, r: Int32, c0: Int32, c: Int32):
        """Row r, columns c .. c + 4 of a composed state: into seg_state (columns c0 + c ..) and
        into shared-memory buffer buf."""
        cute.autovec_copy(x, self._piece(gOut, r, c0 + c))
        cute.autovec_copy(x, sS[(r % self.VEC, r // self.VEC), (None, c // self.VEC), buf])

    @cute.jit
    def _piece(self, g: cute.Tensor, r: Int32, c: Int32) -> cute.Tensor:
        """The 16 bytes at row r, columns c .. c + 4 of a K x V fp32 state (c a multiple of 4)."""
        flat = cute.make_tensor(g.iterator, cute.make_layout((self.VEC, DK * DV // self.VEC), stride=(1, self.VEC)))
        return flat[None, (r * DV + c) // self.VEC]

    @cute.jit
    def _load_a(self, rA: cute.Tensor, gA: cute.Tensor, warp: Int32, lane: Int32):
        """The warp's rows of A_j (K x K fp32), 16 bytes of each per lane: a coalesced 512-byte read
        of each row."""
        for q in cutlass.range_constexpr(self.ROWS):
            piece = cute.make_rmem_tensor((self.VEC,), Float32)
            cute.autovec_copy(self._piece(gA, self.ROWS * warp + q, self.VEC * lane), piece)
            for i in cutlass.range_constexpr(self.VEC):
                rA[q, i] = piece[i]


@cute.jit
def compose(cu_seqlens: cute.Tensor, state_indices: cute.Tensor, use_state_indices: Int32,
            maps: cute.Tensor, seg_state: cute.Tensor, seg_chunks: Int32, stream: cuda.CUstream):
    """The launch (parameter names: gdn_problem_t fields)."""
    op = Compose()
    N = cu_seqlens.shape[0] - 1
    Hv = maps.shape[1]
    op.kernel(cu_seqlens, state_indices, use_state_indices, maps, seg_state, seg_chunks, Hv).launch(
        grid=plan.grid_compose(N, Hv), block=[Compose.THREADS, 1, 1], stream=stream, use_pdl=pdl.USE_PDL)


LAUNCH = compose
THREADS = Compose.THREADS
SMEM_BYTES = Compose().smem_bytes()
VARIANTS: dict[str, dict] = {"compose_f32": {}}


def fake_args(dims):
    """Fake tensors/scalars for every parameter of the launch except stream, in order."""
    from cute_kernels import fake
    return [fake.cu_seqlens(dims), fake.state_indices(dims), fake.i32(0), fake.ws_states(dims, dims.M2),
            fake.ws_states(dims, dims.M), fake.i32(1)]
