"""The register-state spine, S^T in registers and the output beside it: spine="wgmma" of the fused
and the segmented plans (builds spine_rs_o_*, spine_rs_maps_*, spine_rs_o_seg_*).  docs/DESIGN.md §3
has the design: the chunk step, the three builds and when each runs, longest first, the segmented
plan's passes.

S^T (64 state columns x 128) lives in one warpgroup's fp32 accumulators, so every MMA of a chunk
takes its A operand from registers and the chain from chunk to chunk never goes through shared
memory; the price is 64 state columns per warpgroup, two CTAs per (sequence, head).  Stage 1 stops
at Tu = (I + A)^-1 (recompute_wu's _pqk builds: it writes 8 KB per chunk and head instead of W and
U's 32 and loads no V); the spine forms Vnew = Tu diag(beta) (V - diag(a) K S) itself from the K
tile it loads for G3 anyway and V read from the input, beta scaling the bracket before its one
bf16 rounding (FLA rounds beta v once).  With a_m = exp(gcum_m) rk_m, coef_j = exp(g_last -
gcum_j) rk_j and c_i = scale rq_i exp(gcum_i) (docs/DESIGN.md §1), the state stays fp32 and the
decay is an fp32 multiply:

    rS = bf16(S^T)                                    A of G1 and G2 (64 v x 128 k)
    G1  Z = rS K^T           M=64 v, N=64 m, K=128    B = the K tile, read K-major
        Y^T = (V^T - Z diag(a)) diag(beta)  (V^T by transposing ldmatrix)
    G1b Vnew^T = bf16(Y^T) Tu^T  M=64 v, N=64 j, K=64 m; B = the Tu tile (K-major, as stored;
                             columns j >= L selected to 0)
    G2  Y = rS Q^T           M=64 v, N=64 i, K=128    B = the q tile (K-major, as stored)
    G3  S^T = g S^T + bf16(Vnew^T coef_j) K           M=64 v, N=128 k, K=64 j; B = K (MN-major)
    G4  O^T = c_i Y + bf16(Vnew^T) Pqk^T              M=64 v, N=64 i, K=64 j; B = pqk (K-major)

The chain of a chunk, G3(i-1) -> rS -> G1 -> Y -> G1b -> Vnew -> G3, is three MMAs and register
work: no fence, no barrier.  The consumer warpgroups issue no TMA copy and meet no CTA barrier.  A
loader warp issues every TMA load (Tu, V, K, q, pqk tiles into a ring of NSLOT slots) and writes
each chunk's coefficient table (coef_j, c_i, exp(g_last)) beside the tiles, (a_m, beta_m) as pairs
in a ring of their own (BSLOT).  A store warp issues the output's TMA stores: each consumer warp
stages chunk i - 1's output in chunk i's V region once it has read that V tile and signals it
(ostaged[s]); the loader refills the slot only once the store warp has read it, so no consumer
waits for a store and the output needs no buffers of its own.  Slot s = i % NSLOT: full[s]
completes on the TMA bytes and the 32 table writers, empty[s] on the 128 consumer threads (pair:
the peer's too, SpineRS.empty_arrivals) and the store warp, ostaged[s] on the 4 consumer warps.

Per chunk i:
    wait full[s]; (partial chunk: zero K and V rows >= L, a NaN there would survive 0 * NaN)
    rS = bf16(S^T); issue G1, then G4 of chunk i-1 behind it (its O^T += bf16(Vnew^T) Pqk^T)
    under them: S^T *= exp(g_last_i), V^T by ldmatrix
    wait G1 (G4 in flight); Y^T; issue G1b; wait G4 (G1b in flight): the epilogue of chunk i-1
      (release its slot; its O^T as bf16 registers -> transposing stmatrix into slot s's V region ->
      ostaged; the store warp issues the TMA store and then releases slot s too); issue G2
    wait G1b (G2 in flight); Vnew^T, P^T; issue G3; wait G2 (G3 in flight); Y *= c_i; wait G3
Nothing is in flight across the loop's back edge, no register a wgmma wrote is read without a wait,
and no wgmma of the loop is under a branch: otherwise ptxas serialises every wgmma (C7515:
loop-carried accumulators moved while a group is in flight; a wgmma inside `if i > 0`) or waits
for G1 there (C7517).  So chunk 0 runs a G4 of its own on zeros, which G2 overwrites;
tests/test_sass.py pins the five waits per chunk (LE 1 four times, then LE 0).  G4 trails a chunk
because the pipe runs a warpgroup's MMAs in order: behind G1 it runs while the CUDA cores form Y^T
instead of holding the chunk's last wait.  Y^T has no select: a partial chunk's V rows >= L are
zeroed with its K rows and a_m = 0 there, so its columns m >= L are 0 - 0 * 0 (a select per
element would make each one predicated code).

Builds (VARIANTS; pyx/gdn_prefill/plan.pxi _rs_build picks per call; docs/DESIGN.md §3): solo,
one CTA per 64 state columns; pair, a head's two CTAs as a cluster whose loaders each load half of
Tu, K, q and P and multicast it (the overlap plan's); dual, one CTA per head with two consumer
warpgroups, each with a V tile of its own, and warpgroup 2's load and store warps giving their
registers to the chains (DUAL_CHAIN_REGS).  Where the dual build's longest sequence would be the
call's critical path its 2 Hv blocks run it solo-style (_dual_block, _lead_solo).  Every build
starts the sequences longest first (handoff.longest_first).  In the overlap plan the loader acquires
stage 1's `ready` flag of each (slot, head) before it reads the chunk (handoff.await_ready).

Roles (Role, compile time; docs/DESIGN.md §3, the segmented plan): SEQUENCE, the above, from each
sequence's initial state; MAPS (dual build), each segment's affine map S_end = A S_start + B as
two chains of 128 columns, A from S = I with V taken as 0 (K = V: A is a state like any other), B
from S = 0, no output (no q or P tile, no G2, G4 or store warp), each cut where the gates allow
(_map_cut: B from the segment's last chunks alone, A then 0); segment 0's B chain starts from
the initial state and copies it (fp32) into seg_state, so that no CTA of the last pass reads the
pool slot another overwrites with the final state (maps_all, a rank's shard: every segment forms
both maps); SEGMENT (solo: a CTA per 64 columns; dual: a CTA per segment and head, its two
chains sharing the tiles), each segment from seg_state with outputs, the last writing the final
state, checkpoints counted from the sequence's start.

State pool (state_pool.py, shared by every spine): the initial S^T from `state`, `initial_state`
or zeros (state_in, per sequence with has_initial), the final one into `state` when bound, a
checkpoint into checkpoint_pool straight from the accumulators after G3's wait, by the consumer
warpgroup itself.  Masking: rows >= L of a partial chunk's tiles may be another sequence's or
uninitialised workspace: K and V rows >= L are zeroed in shared memory before G1, Vnew^T columns
j >= L are selected to 0 (not multiplied), and output rows i >= L are never stored.
"""
from __future__ import annotations

import enum
import typing

import cuda.bindings.driver as cuda

import cutlass
import cutlass.cute as cute
import cutlass.utils.hopper_helpers as sm90_utils
from cutlass import BFloat16, Float32, Int32
from cutlass.cute.nvgpu import cpasync, warpgroup
from cutlass.tensor_utils import LayoutEnum

from gdn_prefill import grids

from cute_kernels import chain, handoff, pdl, rings, slots, state_pool, tma

CHUNK = grids.CHUNK                   # 64
DK = grids.HEAD_DIM_K                 # 128
DV = grids.HEAD_DIM_V                 # 128
VB = grids.RS_SPINE_VBLOCK            # 64 state columns per CTA: M of every MMA (grid z = DV / VB)
NSLOT = 3                             # TMA ring slots (a slot is released one chunk after its MMAs issue)
# Consumer warpgroups per CTA: 1 (solo, pair: warpgroup 0 holds the CTA's 64 state columns; warp 4
# loads and tables, warp 5 the output's stores) or DUAL_WG (dual: warpgroups 0 and 1 each hold 64
# of a head's 128 columns, two independent chains on one SM; warpgroup 2: warp 8 loads, warp 9
# stores, warps 10 and 11 only give their registers back).
DUAL_WG = grids.RS_SPINE_DUAL_WG
assert DUAL_WG * VB == DV, "the dual build's warpgroups cover a head's V columns"
ORDER_MAX_SEQS = grids.ORDER_MAX_SEQS  # handoff.longest_first: stage 1 ranked the sequences up to this many


class Role(enum.IntEnum):
    """What one launch of the kernel computes (compile time; module docstring, Roles)."""
    SEQUENCE = 0      # each sequence from its initial state: outputs, final state (the serial plan)
    MAPS = 1          # the segmented plan's first pass: each segment's (A, B); no output
    SEGMENT = 2       # the segmented plan's last pass: each segment from its composed state


class Map(enum.IntEnum):
    """The two chains of a MAPS CTA pair, and their index in the workspace's maps[slot, map]."""
    A = 0             # from S = I with V = 0: the segment's transition
    B = 1             # from S = 0 (segment 0: from the initial state): the segment's offset


class Warp(enum.IntEnum):
    """The I/O warps, after the consumer warpgroups' 4 nwg warps (SpineRS.warp)."""
    LOAD = 0          # every TMA load and each chunk's coefficient table
    STORE = 1         # the output's stores (MAPS: idle)


class Barrier(enum.IntEnum):
    """Named barriers (0: the CTA's)."""
    CONSUMERS = 1     # the working consumer warpgroups: a partial chunk's zeroed rows (chain.zero_tail)


# The dual build's registers after setmaxnreg: each chain warpgroup what the solo build's one needs
# without spills (224), the I/O warpgroup the rest.  The increase can only take what the decrease
# gave back to the CTA's own pool, which the launch sized at 168 per thread (64 K / 384, rounded
# down to 8): 2 x (224 - 168) = 168 - 56.  Asking for more makes the chains' increase spin forever
# (the GPU hangs); a smaller I/O share spills the load warp.
_DUAL_LAUNCH_REGS = 64 * 1024 // (128 * (DUAL_WG + 1)) // 8 * 8
DUAL_CHAIN_REGS = 224
DUAL_IO_REGS = 56
assert DUAL_WG * (DUAL_CHAIN_REGS - _DUAL_LAUNCH_REGS) <= _DUAL_LAUNCH_REGS - DUAL_IO_REGS
# The dual SEGMENT build's split: its chains hold the segment's bounds besides the solo chain's
# values (the solo SEGMENT build takes 245 registers) and spill at 224 (32 bytes, two refills a
# chunk); its I/O warps fit in 40, so the chains take 232: 2 x (232 - 168) = 168 - 40.
SEG_DUAL_CHAIN_REGS = 232
SEG_DUAL_IO_REGS = 40
assert DUAL_WG * (SEG_DUAL_CHAIN_REGS - _DUAL_LAUNCH_REGS) <= _DUAL_LAUNCH_REGS - SEG_DUAL_IO_REGS

TAB, TAB_C, TAB_GL = chain.TAB, chain.TAB_C, chain.TAB_GL     # the chunk's coefficient table (chain.py)
BSLOT = 2                             # the (a_m, beta_m) ring of Y' = (V - diag(a) Z) beta: pairs, so that
                                      # a column's two coefficients are one 8-byte load; two deep, so
                                      # that the dual build's shared memory holds it (table columns of
                                      # NSLOT slots would not); the loader writes chunk i's once chunk
                                      # i - 2 has released its slot, i.e. once chunk i - 2's Y' is formed
assert CHUNK == 64 and DK == 128 and VB == 64 and DV % VB == 0

_T_BYTES = CHUNK * CHUNK * 2
_V_BYTES = CHUNK * VB * 2
_K_BYTES = CHUNK * DK * 2
_Q_BYTES = CHUNK * DK * 2
_PQ_BYTES = CHUNK * CHUNK * 2
_TMA_BYTES = _T_BYTES + _V_BYTES + _K_BYTES + _Q_BYTES + _PQ_BYTES     # 56 KB per slot


MAX_SMEM = grids.MAX_SMEM

MAP_CUT = float(grids.MAP_CUT_LOG_DECAY)  # MAPS: where the log-decay of a segment's last chunks sums
                                          # below this, the history before them is dropped (_map_cut)


class _Segment(typing.NamedTuple):
    """A segmented-plan CTA's segment (SEQUENCE: the whole sequence, j = 0 of nseg = 1): its slot,
    its index j in the sequence and the sequence's segment count, and the map a MAPS CTA computes
    (Map)."""
    slot: Int32
    j: Int32
    nseg: Int32
    map_: Int32


class SpineRS:
    """One build of the register-state spine (module docstring): the chains of 64 state columns each, their
    output, and the warps that feed them.  Config: pair (cz = 2: the two CTAs of a head as a cluster
    that multicasts Tu, K, q and P), dual (nwg = DUAL_WG consumer warpgroups per CTA, one per 64
    columns of a head), role (Role: what the launch computes; MAPS runs dual, SEGMENT solo or dual).
    Warps: the consumer warpgroups (chain, or map_chain for MAPS), then the load warp (loads) and
    the store warp (stores) (Warp)."""

    def __init__(self, pair: bool = False, dual: bool = False, role: Role = Role.SEQUENCE):
        assert not (pair and dual) and (role == Role.SEQUENCE or not pair)
        assert role != Role.MAPS or dual, "MAPS runs two chains per CTA"
        self.dual = dual
        self.role = role
        self.cz = grids.RS_SPINE_PAIR if pair else 1    # CTAs per cluster
        self.nwg = DUAL_WG if dual else 1               # consumer warpgroups per CTA
        # CTAs per (segment slot, head) of the segmented roles: MAPS one per map, SEGMENT one per 64
        # columns (solo) or one for both (dual) (grids.grid_spine_rs_segments)
        self.subs = 1 if (role == Role.SEGMENT and dual) else 2
        # the dual builds' registers after setmaxnreg: the chain warpgroups', the I/O warpgroup's
        self.chain_regs, self.io_regs = ((SEG_DUAL_CHAIN_REGS, SEG_DUAL_IO_REGS) if self.subs == 1
                                         else (DUAL_CHAIN_REGS, DUAL_IO_REGS))

    @staticmethod
    def can_implement(K: int, V: int, Hk: int, Hv: int, qkv_aligned16: bool) -> tuple[bool, str]:
        """What the kernel accepts (the launcher's guards check the same before any launch)."""
        return chain.can_implement(K, V, Hk, Hv, qkv_aligned16)

    def threads(self) -> int:
        """Threads per CTA: the consumer warpgroups, then the load and store warps (the dual build
        rounds them up to a warpgroup: setmaxnreg resizes whole warpgroups)."""
        return 192 if self.nwg == 1 else 128 * (self.nwg + 1)

    def warp(self, w: Warp) -> int:
        """The index of an I/O warp."""
        return 4 * self.nwg + w

    # ------------------------------------------------------------------ shared memory
    def _tiles(self) -> dict[str, int]:
        """bf16 elements of each shared-memory tile, in allocation order (each 1024-aligned); the V
        tile is per consumer warpgroup (stage s * nwg + wg; the output is staged there too)."""
        return {"sT": NSLOT * CHUNK * CHUNK, "sK": NSLOT * DK * CHUNK, "sV": NSLOT * self.nwg * CHUNK * VB,
                "sQ": NSLOT * CHUNK * DK, "sPq": NSLOT * CHUNK * CHUNK}

    def _nbars(self) -> int:
        return 2 * NSLOT + NSLOT * self.nwg    # full[NSLOT], empty[NSLOT], ostaged[NSLOT nwg]

    def empty_arrivals(self, active, outputs: bool = True):
        """Arrivals that free a slot: every thread of the 128 active working consumers of this CTA
        (each has read the slot's coefficient table, and an mbarrier arrive releases only its own
        thread's accesses), and in the pair build lane 0 of each of the peer CTA's four consumer
        warps (its wgmma reads of the tiles this CTA's loader multicasts into it are complete).
        With lane 0 of each warp arriving alone, after a warp barrier that ptxas drops in converged
        code, compute-sanitizer's racecheck found the loader's next table writes unordered after the
        other lanes' reads.  Where the build has outputs, the store warp too: chunk i's V slot holds
        the output of chunk i - 1 until its store has read it (epilogue, stores)."""
        return active * 4 * 32 + 4 * (self.cz - 1) + (1 if outputs else 0)

    def smem_bytes(self) -> int:
        """Dynamic shared memory of _storage(): barriers and tables, then the tiles (solo,
        pair); the dual build puts the tiles first, so that no 1024-byte alignment gap follows the
        table."""
        def up(x, a):
            return (x + a - 1) // a * a
        small = 8 * self._nbars() + 4 * NSLOT * TAB + 4 * BSLOT * CHUNK * 2
        off = 0 if self.nwg > 1 else small
        for n in self._tiles().values():
            off = up(off, 1024) + 2 * n
        if self.nwg > 1:
            off = up(off + small, 1024)    # the struct's size is a multiple of its 1024-byte alignment
        return off

    def _storage(self):
        small = {"full": cute.struct.MemRange[cutlass.Int64, NSLOT],
                 "empty": cute.struct.MemRange[cutlass.Int64, NSLOT],
                 "ostaged": cute.struct.MemRange[cutlass.Int64, NSLOT * self.nwg],
                 "tab": cute.struct.MemRange[Float32, NSLOT * TAB],
                 "btab": cute.struct.Align[cute.struct.MemRange[Float32, BSLOT * CHUNK * 2], 8]}
        tiles = {name: cute.struct.Align[cute.struct.MemRange[BFloat16, n], 1024]
                 for name, n in self._tiles().items()}
        fields = {**tiles, **small} if self.nwg > 1 else {**small, **tiles}
        return cute.struct(type("SharedStorage", (), {"__annotations__": fields}))

    def _layouts(self):
        """sQ (64 rows, 128 k, slot): K-major B of G2 (the tile as stored); sK (128 k, 64 rows, slot):
        MN-major B of G3 (the K tile as stored, k contiguous), and the same bytes as sKk (64 rows,
        128 k, slot), the K-major B of G1; sT, sPq (64 rows, 64 cols, slot): K-major B of G1b / G4;
        sV (64 j, 64 v, slot): v contiguous, read transposed by ldmatrix, and then the output's
        (64 i, 64 v) staging, written transposed by stmatrix."""
        t1 = (VB, CHUNK, DK)        # G1, G2 (M, N, K)
        t3 = (VB, DK, CHUNK)        # G3
        t4 = (VB, CHUNK, CHUNK)     # G1b, G4
        sQ = sm90_utils.make_smem_layout_b(LayoutEnum.ROW_MAJOR, t1, BFloat16, NSLOT)
        sK = sm90_utils.make_smem_layout_b(LayoutEnum.COL_MAJOR, t3, BFloat16, NSLOT)
        sKk = sm90_utils.make_smem_layout_b(LayoutEnum.ROW_MAJOR, t1, BFloat16, NSLOT)
        # G1 reads the K tile K-major: the transposed view of G3's MN-major tile must be those bytes
        assert str(sKk) == str(cute.select(sK, mode=[1, 0, 2])), (sKk, sK)
        sT = sm90_utils.make_smem_layout_b(LayoutEnum.ROW_MAJOR, t4, BFloat16, NSLOT)
        sPq = sm90_utils.make_smem_layout_b(LayoutEnum.ROW_MAJOR, t4, BFloat16, NSLOT)
        atom = warpgroup.make_smem_layout_atom(warpgroup.SmemLayoutAtomKind.K_SW128, BFloat16)   # 64-wide rows
        sV = cute.tile_to_shape(atom, (CHUNK, VB, NSLOT * self.nwg), order=(0, 1, 2))
        return dict(sT=sT, sK=sK, sKk=sKk, sV=sV, sQ=sQ, sPq=sPq)

    # ------------------------------------------------------------------ launch
    @cute.jit
    def __call__(
        self, q: cute.Tensor, k: cute.Tensor, v: cute.Tensor, tu: cute.Tensor, pqk: cute.Tensor,
        gcum: cute.Tensor, rq: cute.Tensor, rk: cute.Tensor, beta32: cute.Tensor,
        cu_seqlens: cute.Tensor,
        state: cute.Tensor, state_indices: cute.Tensor, out: cute.Tensor, scale: Float32,
        has_state: Int32, use_state_indices: Int32, ready: cute.Tensor, overlap: Int32, order: cute.Tensor,
        checkpoints: cute.Tensor, checkpoint_chunks: Int32, initial_state: cute.Tensor, state_in: Int32,
        maps: cute.Tensor, seg_state: cute.Tensor, seg_chunks: Int32, maps_all: Int32,
        has_initial: cute.Tensor, checkpoint_pool: cute.Tensor,
        stream: cuda.CUstream,
    ):
        """The launch (parameter names: gdn_problem_t fields; the inputs q, k, v read by TMA (the
        fused plan's 16-byte alignment), stage 1's tu and pqk, then the overlap plan's ready flags
        and its flag (1: await each slot's), stage 1's sequence order, and the segmented plan's maps,
        seg_state, segment length and maps_all)."""
        lay = self._layouts()
        load, store = cpasync.CopyBulkTensorTileG2SOp(), cpasync.CopyBulkTensorTileS2GOp()
        shared = cpasync.CopyBulkTensorTileG2SMulticastOp() if self.cz > 1 else load
        t_view, v_view, q_view, pq_view, o_view = (tma.view(t, [0, 2, 1]) for t in (tu, v, q, pqk, out))
        k_view = tma.view(k, [2, 0, 1])
        one = lambda name: cute.slice_(lay[name], (None, None, 0))     # noqa: E731
        mcast = (self.cz,) if self.cz > 1 else ()
        tma_t, mT = cpasync.make_tiled_tma_atom(shared, t_view, one("sT"), (CHUNK, CHUNK), *mcast)
        tma_v, mV = cpasync.make_tiled_tma_atom(load, v_view, one("sV"), (CHUNK, VB))
        tma_k, mK = cpasync.make_tiled_tma_atom(shared, k_view, one("sK"), (DK, CHUNK), *mcast)
        tma_q, mQ = cpasync.make_tiled_tma_atom(shared, q_view, one("sQ"), (CHUNK, DK), *mcast)
        tma_pq, mPq = cpasync.make_tiled_tma_atom(shared, pq_view, one("sPq"), (CHUNK, CHUNK), *mcast)
        tma_o, mO = cpasync.make_tiled_tma_atom(store, o_view, one("sV"), (CHUNK, VB))
        T = v.shape[0]
        N = cu_seqlens.shape[0] - 1
        Hv = v.shape[1]
        kernel = spine_rs_kernel(
            tma_t, mT, tma_v, mV, tma_k, mK, tma_o, mO, tma_q, mQ, tma_pq, mPq,
            gcum, rk, rq, beta32, cu_seqlens, state, state_indices, out, ready, order, scale,
            has_state, use_state_indices, overlap, Hv // k.shape[1], Hv, checkpoints, checkpoint_chunks,
            initial_state, state_in, maps, seg_state, seg_chunks, maps_all, has_initial, checkpoint_pool, self,
        )
        if cutlass.const_expr(self.role == Role.SEQUENCE):
            grid = grids.grid_spine_rs(T, N, Hv, self.dual)
        else:
            grid = grids.grid_spine_rs_segments(T, N, Hv, seg_chunks, self.subs)
        if cutlass.const_expr(self.cz > 1):
            kernel.launch(grid=grid, block=[self.threads(), 1, 1], cluster=[self.cz, 1, 1],
                          stream=stream, use_pdl=pdl.USE_PDL)
        else:
            kernel.launch(grid=grid, block=[self.threads(), 1, 1], stream=stream, use_pdl=pdl.USE_PDL)

    @cute.jit
    def kernel(
        self,
        tma_t: cute.CopyAtom, mT: cute.Tensor, tma_v: cute.CopyAtom, mV: cute.Tensor,
        tma_k: cute.CopyAtom, mK: cute.Tensor, tma_o: cute.CopyAtom, mO: cute.Tensor,
        tma_q: cute.CopyAtom, mQ: cute.Tensor, tma_pq: cute.CopyAtom, mPq: cute.Tensor,
        gcum: cute.Tensor, rk: cute.Tensor, rq: cute.Tensor, beta32: cute.Tensor, cu_seqlens: cute.Tensor,
        state: cute.Tensor, state_indices: cute.Tensor, out: cute.Tensor, ready: cute.Tensor, order: cute.Tensor,
        scale: Float32, has_state: Int32, use_state_indices: Int32, overlap: Int32, hv_per_hk: Int32, Hv: Int32,
        checkpoints: cute.Tensor, checkpoint_chunks: Int32, initial_state: cute.Tensor, state_in: Int32,
        maps: cute.Tensor, seg_state: cute.Tensor, seg_chunks: Int32, maps_all: Int32,
        has_initial: cute.Tensor, checkpoint_pool: cute.Tensor,
    ):
        """The kernel's body (spine_rs_kernel, the entry, calls it): the block's work, the shared
        memory and its barriers, then each warp's role."""
        handoff.enter(ready, overlap)
        tidx, _, _ = cute.arch.thread_idx()
        bx, _, _ = cute.arch.block_idx()
        # grids.grid_spine_rs: solo / pair: vb fastest, then hv, then the sequence (pair: a cluster),
        # longest first; dual: _dual_block; the segmented roles: _segment_block
        col0 = Int32(0)                       # the CTA's first state column
        active = 1                            # consumer warpgroups with work (dual: 1 or 2, at run time)
        work = Int32(1)
        seg = _Segment(Int32(0), Int32(0), Int32(1), Int32(Map.B))
        if cutlass.const_expr(self.role != Role.SEQUENCE):
            n, hv, sub, work, seg = _segment_block(bx, Hv, cu_seqlens, seg_chunks, self.subs)
            if cutlass.const_expr(self.role == Role.MAPS):
                active = DUAL_WG
                # segment 0 has no A chain, and compose reads no map of the last segment (nor of a
                # sequence of one segment), unless every map is asked for (maps_all: a rank's shard,
                # gdn_prefill.distributed)
                if maps_all == 0:
                    if seg.j + 1 >= seg.nseg or (seg.j == 0 and sub == Map.A):
                        work = Int32(0)
                seg = seg._replace(map_=sub)
            elif cutlass.const_expr(self.nwg > 1):
                active = DUAL_WG                  # SEGMENT, dual: both halves, col0 = 0
            else:
                col0 = sub * VB
        elif cutlass.const_expr(self.nwg == 1):
            nvb = DV // VB
            col0 = (bx % nvb) * VB
            hv = (bx // nvb) % Hv
            n = handoff.longest_first(bx // (nvb * Hv), cu_seqlens, order)
        else:
            n, hv, col0, active, work = _dual_block(bx, Hv, cu_seqlens, order)
        warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        load_warp = self.warp(Warp.LOAD)
        store_warp = self.warp(Warp.STORE)

        lay = self._layouts()
        SharedStorage = self._storage()
        tiles = self._tiles()
        for name in tiles:
            assert cute.cosize(lay[name]) == tiles[name], name
        assert SharedStorage.size_in_bytes() == self.smem_bytes(), SharedStorage.size_in_bytes()
        storage = cutlass.utils.SmemAllocator().allocate(SharedStorage)
        full_bar = storage.full.data_ptr()
        ostaged_bar = storage.ostaged.data_ptr()
        sTab = storage.tab.get_tensor(cute.make_layout((TAB, NSLOT)))
        # (a_m, beta_m) of chunk i at [0 / 1, m, i % BSLOT], a pair per column: one 8-byte load each
        sBt = storage.btab.get_tensor(cute.make_layout((2, CHUNK, BSLOT), stride=(1, 2, 2 * CHUNK)))

        def view(field, layout):
            return getattr(storage, field).get_tensor(layout.outer, swizzle=layout.inner)
        sT, sK, sV, sQ, sPq = (view(f, lay[f]) for f in ("sT", "sK", "sV", "sQ", "sPq"))
        sKk = view("sK", lay["sKk"])                                   # (64 m, 128 k, slot): B of G1
        # the (v, j) / (v, i) views of the V and output tiles: ldmatrix / stmatrix move them transposed
        sV_vj = view("sV", cute.select(lay["sV"], mode=[1, 0, 2]))     # (64 v, 64 j, slot)

        if warp_idx == load_warp:
            for t in (tma_t, tma_v, tma_k, tma_o, tma_q, tma_pq):
                cpasync.prefetch_descriptor(t)
        # full: the TMA bytes' arrive + the 32 table writers; empty: empty_arrivals
        ring = rings.thread_ring(NSLOT, full_bar, 1 + 32, self.empty_arrivals(active, self.role != Role.MAPS))
        if tidx == 0:
            chain.staged_init(ostaged_bar, NSLOT * self.nwg)         # V stage s nwg + wg of slot s
        # every CTA (of the cluster) has initialised its barriers before a peer multicasts or arrives
        rings.publish(self.cz)

        run, slot = state_pool.pool_slot(n, state_indices, use_state_indices)      # padding entries skip
        if work == 0:
            run = Int32(0)
        # The dual build resizes each warpgroup's registers at one instruction that dominates all of its
        # role's code (ptxas ignores a setmaxnreg whose region merges with another role's, C7507); the
        # chains' increase waits until warpgroup 2 has given its registers back.  A dual block running
        # its sequence solo-style (active = 1) leaves warpgroup 1 without work.
        if warp_idx >= load_warp:
            if cutlass.const_expr(self.nwg > 1):
                cute.arch.setmaxregister_decrease(self.io_regs)
            if run != 0:
                bos, eos, nch = _chunks(cu_seqlens, n, seg, seg_chunks)
                skip = Int32(0)
                if cutlass.const_expr(self.role == Role.MAPS):
                    skip, nch, _ = _map_range(gcum, hv, bos, eos, nch, seg.map_, maps_all)
                    bos = bos + skip * CHUNK
                if warp_idx == load_warp:
                    self.loads(nch, bos, eos, hv, hv // hv_per_hk, col0, sTab, sBt, gcum, rk, rq,
                               beta32, scale,
                               tma_t, mT, tma_v, mV, tma_k, mK, tma_q, mQ, tma_pq, mPq, sT, sV, sK, sQ, sPq,
                               ready, overlap, grids.first_slot(cu_seqlens[n], n) + seg.j * seg_chunks + skip, active,
                               seg.map_, ring)
                elif warp_idx == store_warp:
                    if cutlass.const_expr(self.role != Role.MAPS):
                        self.stores(nch, bos, eos, hv, col0, ostaged_bar, sV, tma_o, mO, out, active, ring)
        else:
            if cutlass.const_expr(self.nwg > 1):
                cute.arch.setmaxregister_increase(self.chain_regs)
            if run != 0:
                wg = tidx // 128                  # the consumer warpgroup (0 unless dual)
                if wg < active:
                    bos, eos, nch = _chunks(cu_seqlens, n, seg, seg_chunks)
                    if cutlass.const_expr(self.role == Role.MAPS):
                        skip, nch, cut = _map_range(gcum, hv, bos, eos, nch, seg.map_, maps_all)
                        bos = bos + skip * CHUNK
                        self.map_chain(tidx % 128, wg, hv, slot, bos, eos, nch, wg * VB, sT, sK, sKk, sV_vj, sTab, sBt,
                                       state, initial_state, state_pool.source(state_in, has_initial, n), maps,
                                       seg_state, seg, cut, ring)
                    else:
                        self.chain(tidx % 128, wg, n, hv, slot, bos, eos, nch, col0 + wg * VB, sT, sK, sKk, sV_vj, sQ,
                                   sPq, sTab, sBt, ostaged_bar, state, has_state,
                                   checkpoints, checkpoint_chunks, initial_state,
                                   state_pool.source(state_in, has_initial, n), active,
                                   seg_state, seg, seg_chunks, ring, checkpoint_pool)
        if cutlass.const_expr(self.cz > 1):
            # no CTA leaves while its peer may still multicast into it or arrive on its barriers
            cute.arch.cluster_arrive()
            cute.arch.cluster_wait()

    # ------------------------------------------------------------------ the load warp
    @cute.jit
    def loads(self, nch: Int32, bos: Int32, eos: Int32, hv: Int32, hk: Int32, col0: Int32,
              sTab, sBt, gcum: cute.Tensor, rk: cute.Tensor, rq: cute.Tensor, beta32: cute.Tensor, scale: Float32,
              tma_t, mT, tma_v, mV, tma_k, mK, tma_q, mQ, tma_pq, mPq, sT, sV, sK, sQ, sPq,
              ready: cute.Tensor, overlap: Int32, slot0: Int32, active, map_: Int32, ring):
        """The load warp: the TMA tiles of every chunk and its coefficient table, slot i % NSLOT as soon
        as the consumer warps have released it (the dual build: a V tile per consumer warpgroup).
        MAPS: no q or P tile (no output), and no V tile for an A chain (V is taken as 0).
        Lane l computes rows l and l + 32 of the table from row data loaded one chunk ahead (the
        global loads' latency stays off the ring).
        Overlap plan: chunk i (chunk slot slot0 + i) is awaited before its row data, the first thing
        of it that is read (its tiles are loaded one iteration later)."""
        lane = cute.arch.lane_idx()
        rank = Int32(0)
        if cutlass.const_expr(self.cz > 1):
            rank = cute.arch.make_warp_uniform(cute.arch.block_idx_in_cluster())     # = vb
        mT_h = mT[None, None, hv]
        mV_h = mV[None, None, hv]
        mK_h = mK[None, None, hk]
        mQ_h = mQ[None, None, hk]
        mPq_h = mPq[None, None, hv]
        ga = Float32(0.0)
        gb = Float32(0.0)
        ka = Float32(0.0)
        kb = Float32(0.0)
        qa = Float32(0.0)
        qb = Float32(0.0)
        ba = Float32(0.0)
        bb = Float32(0.0)
        gl = Float32(0.0)
        if nch > 0:
            handoff.await_ready(ready, slot0, hv, overlap)
            gl, ga, ka, qa, ba, gb, kb, qb, bb = _row_data(gcum, rk, rq, beta32, hv, bos, eos, lane,
                                                           ga, ka, qa, ba, gb, kb, qb, bb)
        st = rings.state(NSLOT, True)
        for i in cutlass.range(nch, unroll=1):
            s = st.index
            t0 = bos + i * CHUNK
            L = cutlass.min(eos - t0, CHUNK)
            if cutlass.const_expr(self.role == Role.MAPS):      # no q or P tile; V for a B chain only
                bar = rings.tma_acquire(ring, st, lambda: _T_BYTES + _K_BYTES + cutlass.select_(
                    map_ == Map.B, active * _V_BYTES, 0))
            else:
                bar = rings.tma_acquire(ring, st, lambda: _TMA_BYTES + (active - 1) * _V_BYTES)
            # Tu, K, q, P are the same for both CTAs of a head (pair build: each loads 1/cz, multicast)
            tma.load(tma_t, tma.gmem_tile(mT_h, (t0, 0), (CHUNK, CHUNK)), sT[None, None, s], bar, rank, self.cz)
            if cutlass.const_expr(self.role == Role.MAPS):
                if map_ == Map.B:
                    self._load_v(tma_v, mV_h, sV, bar, t0, col0, s, active)
            else:
                self._load_v(tma_v, mV_h, sV, bar, t0, col0, s, active)
            tma.load(tma_k, tma.gmem_tile(mK_h, (0, t0), (DK, CHUNK)), sK[None, None, s], bar, rank, self.cz)
            if cutlass.const_expr(self.role != Role.MAPS):
                tma.load(tma_q, tma.gmem_tile(mQ_h, (t0, 0), (CHUNK, DK)), sQ[None, None, s], bar, rank, self.cz)
                tma.load(tma_pq, tma.gmem_tile(mPq_h, (t0, 0), (CHUNK, CHUNK)), sPq[None, None, s], bar, rank, self.cz)
            # the table's rows l, l + 32 (chain.table_row; 0 past L)
            ca, oa, aa = chain.table_row(gl, ga, ka, lambda: qa, scale, lane < L)
            cb, ob, ab = chain.table_row(gl, gb, kb, lambda: qb, scale, lane + 32 < L)
            sTab[lane, s] = ca
            sTab[lane + 32, s] = cb
            sTab[TAB_C + lane, s] = oa
            sTab[TAB_C + lane + 32, s] = ob
            if lane == 0:
                sTab[TAB_GL, s] = cute.math.exp(gl)
            # the (a, beta) ring (BSLOT deep): chunk i - BSLOT's consumers are done with the entry once they
            # have released that chunk's slot (they form its Y' before): its empty barrier, observed
            if i >= BSLOT:
                j = i - BSLOT
                ring.sync_object_empty.wait(j % NSLOT, (j // NSLOT) % 2)
            sBt[0, lane, i % BSLOT] = aa
            sBt[1, lane, i % BSLOT] = cutlass.select_(lane < L, ba, Float32(0.0))
            sBt[0, lane + 32, i % BSLOT] = ab
            sBt[1, lane + 32, i % BSLOT] = cutlass.select_(lane + 32 < L, bb, Float32(0.0))
            ring.producer_commit(st)
            st.advance()
            if i + 1 < nch:
                handoff.await_ready(ready, slot0 + i + 1, hv, overlap)
                gl, ga, ka, qa, ba, gb, kb, qb, bb = _row_data(gcum, rk, rq, beta32, hv, t0 + CHUNK, eos, lane,
                                                               ga, ka, qa, ba, gb, kb, qb, bb)

    @cute.jit
    def _load_v(self, tma_v, mV_h, sV, bar, t0: Int32, col0: Int32, s: Int32, active):
        """The V tile of each working consumer warpgroup (its 64 state columns) of the chunk at t0."""
        for wg in cutlass.range_constexpr(self.nwg):
            if wg < active:
                tma.load(tma_v, tma.gmem_tile(mV_h, (t0, col0 + wg * VB), (CHUNK, VB)),
                         sV[None, None, s * self.nwg + wg], bar, Int32(0), 1)

    # ------------------------------------------------------------------ the store warp
    @cute.jit
    def stores(self, nch: Int32, bos: Int32, eos: Int32, hv: Int32, col0: Int32, ostaged_bar, sV,
               tma_o, mO, out: cute.Tensor, active, ring):
        """The store warp: chunk c's output of consumer warpgroup wg, staged in the V region of chunk
        c + 1's slot (stage s nwg + wg, s = (c + 1) % NSLOT; once its four warps have arrived on
        ostaged[s nwg + wg]) -> rows t0 .. t0 + L, columns col0 + 64 wg .. + 64 of out: one TMA store
        for a full chunk, this warp's 16-byte thread stores of rows < L for a partial one; then, once
        the stores have read the tiles, its arrival on empty[s] lets the loader refill the slot.  Chunk
        0's slot holds no output (there is no chunk -1): its first arrival comes before the loop."""
        lane = cute.arch.lane_idx()
        mO_h = mO[None, None, hv]
        cp_v = tma.rows_copy(VB, 32)
        thr_v = cp_v.get_slice(lane)
        tOC = thr_v.partition_S(cute.make_identity_tensor((CHUNK, VB)))
        ss = rings.state(NSLOT, False)
        if lane == 0:
            ring.consumer_release(ss)
        ss.advance()
        for c in cutlass.range(nch, unroll=1):
            t0 = bos + c * CHUNK
            L = cutlass.min(eos - t0, CHUNK)
            s = ss.index
            for wg in cutlass.range_constexpr(self.nwg):
                if wg < active:
                    vs = s * self.nwg + wg
                    # chunks c = 0, 1, 2 stage into slots 1, 2, 0: each slot's u-th output is chunk
                    # c with u = c // NSLOT (not (c + 1) // NSLOT: slot 0's first is chunk NSLOT - 1)
                    chain.staged_wait(ostaged_bar, vs, (c // NSLOT) % 2)
                    tma.store_rows(L, True, tma_o, sV, mO_h, out, cp_v, thr_v, thr_v.partition_S(sV[None, None, vs]),
                                   tOC, t0, hv, col0 + wg * VB, vs, VB)
            tma.release_after_stores(ring, ss, lane)
            ss.advance()
        cute.arch.cp_async_bulk_wait_group(0)

    # ------------------------------------------------------------------ the consumers
    @cute.jit
    def chain(self, ltid: Int32, wg, n: Int32, hv: Int32, slot: Int32, bos: Int32, eos: Int32, nch: Int32,
              col0: Int32, sT, sK, sKk, sV_vj, sQ, sPq, sTab, sBt, ostaged_bar,
              state: cute.Tensor, has_state: Int32, checkpoints: cute.Tensor, checkpoint_chunks: Int32,
              initial_state: cute.Tensor, state_in: Int32, active,
              seg_state: cute.Tensor, seg: _Segment, seg_chunks: Int32, ring, checkpoint_pool: cute.Tensor):
        """Consumer warpgroup wg (of the `active` ones that share the tiles): S^T[col0 .. col0 + 64)
        through the sequence (SEGMENT: through its segment seg) and the output of those columns for
        every chunk (module docstring)."""
        f = chain.Fragments(ltid, sKk, sT, sK, sQ, sPq)
        mma_n64, mma_s, tKkb, tQb, tTb, tPqb, tKb = f.mma_n64, f.mma_s, f.tKkb, f.tQb, f.tTb, f.tPqb, f.tKb
        accSt, accX, accY, rS, rP, rV = f.accSt, f.accX, f.accY, f.rS, f.rP, f.rV
        tSa, tPa, tVa, tScS, tXc = f.tSa, f.tPa, f.tVa, f.tScS, f.tXc
        ld_v, st_o, rVt, rVt_cv, accY_cv, rO = f.ld_v, f.st_o, f.rVt, f.rVt_cv, f.accY_cv, f.rO

        # S^T[v, k] = S[k, col0 + v]: the state pool's (v, k) view of the warpgroup's columns, formed
        # here and held across the chunks; the dual SEGMENT build forms it at each use (held, it
        # spilled with bf16 and fp16 pools at that build's 232 registers)
        gSt = chain.transposed_block(state, slot, hv, col0) if self.subs != 1 else None  # (v, k) -> S[k, col0 + v]
        # chunks before this CTA's first (SEGMENT: the segment's first chunk in the sequence); a
        # segment of a sequence of several starts from its composed state (seg_state, fp32)
        c0 = Int32(0)
        last = Int32(1)
        if cutlass.const_expr(self.role == Role.SEGMENT):
            c0 = seg.j * seg_chunks
            if seg.j + 1 < seg.nseg:
                last = Int32(0)
            if seg.nseg > 1:
                gI = chain.transposed_block(seg_state, seg.slot, hv, col0)
                for e in cutlass.range_constexpr(cute.size(accSt)):
                    accSt[e] = gI[tScS[e]]
            else:
                state_pool.load(accSt, tScS, self._pool_block(gSt, state, slot, hv, col0),
                                chain.transposed_block(initial_state, slot, hv, col0), state_in)
        else:
            state_pool.load(accSt, tScS, gSt, chain.transposed_block(initial_state, slot, hv, col0), state_in)

        mma_s.set(warpgroup.Field.ACCUMULATE, True)
        accY.fill(0.0)                        # chunk 0's G4 (a chunk -1 that does not exist) reads these
        rV.fill(0.0)
        # The chunks in segments of checkpoint_chunks (one segment of all of them without checkpoints):
        # the chunk loop itself holds no checkpoint code, the state goes out between segments (inside
        # the loop, a checkpoint store's code slows the chain even where none is taken:
        # docs/PERFORMANCE.md, serving features)
        seg = state_pool.segment_chunks(nch, checkpoint_chunks)
        cs = rings.state(NSLOT, False)
        prev = cs.clone()
        for sg in cutlass.range((nch + seg - 1) // seg, unroll=1):
            i_end = cutlass.min((sg + 1) * seg, nch)
            for i in cutlass.range(sg * seg, i_end, unroll=1):
                s = cs.index
                t0 = bos + i * CHUNK
                L = cutlass.min(eos - t0, CHUNK)
                ring.consumer_wait(cs)
                if L < CHUNK:
                    chain.zero_tail(sK, sV_vj, L, ltid, wg, active, s, self.nwg, Barrier.CONSUMERS)
                # G1: Z = bf16(S^T) K^T (the K tile read K-major)
                rS.store(accSt.load().to(BFloat16))
                chain.issue(mma_n64, accX, tSa, tKkb, s, True)
                # under G1: the decay of S^T, V^T, and the output of chunk i - 1
                decay = sTab[TAB_GL, s]
                for e in cutlass.range_constexpr(cute.size(accSt)):
                    accSt[e] = accSt[e] * decay
                # G4 of chunk i - 1: O^T += bf16(Vnew^T) Pqk^T, in the tensor pipe while the CUDA cores form Y^T.
                # In chunk 0 it runs on the zeros set before the loop and this chunk's landed P tile, and G2
                # overwrites the result: a wgmma under a branch makes ptxas serialise every wgmma of the loop
                ps = cutlass.select_(i > 0, prev.index, s)
                mma_n64.set(warpgroup.Field.ACCUMULATE, True)
                for kb in cutlass.range_constexpr(cute.size(tVa, mode=[2])):
                    cute.gemm(mma_n64, accY, tVa[None, None, kb], tPqb[None, None, kb, ps], accY)
                warpgroup.commit_group()
                cute.copy(ld_v, ld_v.partition_S(sV_vj[None, None, s * self.nwg + wg]), rVt_cv)
                warpgroup.wait_group(1)           # G1 (G4 of chunk i - 1 may still run)
                # Y^T = V^T - Z diag(a); G1b: Vnew^T = bf16(Y^T) Tu^T, then G2: Q S behind it
                chain.y_t(rP, rVt, accX, sTab, sBt, tXc, s, i % BSLOT)
                chain.issue(mma_n64, accX, tPa, tTb, s, True)
                # chunk i - 1's output, its G4 complete (in the pipe before G1b): O^T -> bf16 -> the store
                # warp under G1b, then G2 may overwrite accY
                warpgroup.wait_group(1)           # G4 of chunk i - 1 (G1b may still run)
                if i > 0:
                    rO.store(accY_cv.load().to(BFloat16))
                    self.epilogue(i - 1, ltid, wg, ring, prev, ostaged_bar, rO, st_o, sV_vj, s * self.nwg + wg)
                chain.issue(mma_n64, accY, tSa, tQb, s, True)      # G2 (its fence: accY was read above)
                warpgroup.wait_group(1)           # G1b (G2 may still run)
                chain.vnew(rV, rP, accX, sTab, tXc, L, s)
                # G3: S^T = g S^T + bf16(P^T) K (the chain)
                chain.issue(mma_s, accSt, tPa, tKb, s, False)
                warpgroup.wait_group(1)           # G2 (G3 may still run)
                for e in cutlass.range_constexpr(cute.size(accY)):
                    accY[e] = accY[e] * sTab[TAB_C + tXc[e][1], s]
                warpgroup.wait_group(0)           # G3: nothing is in flight across the loop's back edge
                prev = cs.clone()
                cs.advance()
            # a checkpoint (state_pool.py) after the segment's last chunk: its end state S^T, complete
            # after G3's wait
            ck = state_pool.checkpoint_slot_after(c0 + i_end - 1, c0 + (eos - bos) // CHUNK, n, checkpoints,
                                                  checkpoint_chunks)
            if ck >= 0:
                state_pool.store(accSt, tScS, chain.transposed_block(checkpoint_pool, ck, hv, col0))

        # the last chunk's G4 and output
        if nch > 0:
            mma_n64.set(warpgroup.Field.ACCUMULATE, True)
            chain.issue(mma_n64, accY, tVa, tPqb, prev.index, False)
            warpgroup.wait_group(0)
            rO.store(accY_cv.load().to(BFloat16))
            # staged in slot nch % NSLOT's V region, free once chunk nch - NSLOT's slot is released (its
            # output read by the store warp): the wait the loader would make for a chunk nch
            ring.producer_acquire(rings.as_producer(cs))
            self.epilogue(nch - 1, ltid, wg, ring, prev, ostaged_bar, rO, st_o, sV_vj, cs.index * self.nwg + wg)
        if has_state != 0 and last != 0:
            state_pool.store(accSt, tScS, self._pool_block(gSt, state, slot, hv, col0))

    def _pool_block(self, gSt, state: cute.Tensor, slot: Int32, hv: Int32, col0: Int32):
        """The state pool's block of chain(): gSt as formed before the chunks, or, in the dual SEGMENT
        build, which does not hold it, formed here."""
        return gSt if self.subs != 1 else chain.transposed_block(state, slot, hv, col0)

    @cute.jit
    def map_chain(self, ltid: Int32, wg, hv: Int32, slot: Int32, bos: Int32, eos: Int32, nch: Int32, col0: Int32,
                  sT, sK, sKk, sV_vj, sTab, sBt, state: cute.Tensor, initial_state: cute.Tensor,
                  state_in: Int32, maps: cute.Tensor, seg_state: cute.Tensor, seg: _Segment, cut: Int32, ring):
        """A MAPS consumer warpgroup: columns col0 .. col0 + 64 of its segment's map (seg.map_), the
        chain without the output (no G2, G4, epilogue): A from S = I with V = 0, B from
        S = 0, or, for segment 0's B, from the sequence's initial state (which it also copies into
        seg_state for the SEGMENT pass).  cut (_map_range): the history before the CTA's chunks is
        dropped, so A is 0 (no chunk runs) and B starts from S = 0.  Ends in maps[2 seg.slot + seg.map_]."""
        f = chain.Fragments(ltid, sKk, sT, sK)
        mma_n64, mma_s, tKkb, tTb, tKb = f.mma_n64, f.mma_s, f.tKkb, f.tTb, f.tKb
        accSt, accX, rS, rP, tSa, tPa, tScS, tXc = f.accSt, f.accX, f.rS, f.rP, f.tSa, f.tPa, f.tScS, f.tXc
        ld_v, rVt, rVt_cv = f.ld_v, f.rVt, f.rVt_cv      # V^T; A: stays 0
        rVt.fill(0.0)
        with_v = seg.map_ == Map.B
        if seg.map_ == Map.A:
            one = cutlass.select_(cut != 0, Float32(0.0), Float32(1.0))
            for e in cutlass.range_constexpr(cute.size(accSt)):          # S^T[v, k] = I[k, col0 + v]
                accSt[e] = cutlass.select_(tScS[e][1] == col0 + tScS[e][0], one, Float32(0.0))
        elif seg.j == 0:
            state_pool.load(accSt, tScS, chain.transposed_block(state, slot, hv, col0),
                            chain.transposed_block(initial_state, slot, hv, col0), state_in)
            gI = chain.transposed_block(seg_state, seg.slot, hv, col0)
            for e in cutlass.range_constexpr(cute.size(accSt)):
                gI[tScS[e]] = accSt[e]
            if cut != 0:
                accSt.fill(0.0)
        else:
            accSt.fill(0.0)
        mma_s.set(warpgroup.Field.ACCUMULATE, True)
        cs = rings.state(NSLOT, False)
        for i in cutlass.range(nch, unroll=1):
            s = cs.index
            L = cutlass.min(eos - (bos + i * CHUNK), CHUNK)
            ring.consumer_wait(cs)
            if L < CHUNK:
                chain.zero_tail(sK, sV_vj, L, ltid, wg, DUAL_WG, s, DUAL_WG, Barrier.CONSUMERS)
            # G1: Z = bf16(S^T) K^T
            rS.store(accSt.load().to(BFloat16))
            chain.issue(mma_n64, accX, tSa, tKkb, s, True)
            decay = sTab[TAB_GL, s]
            for e in cutlass.range_constexpr(cute.size(accSt)):
                accSt[e] = accSt[e] * decay
            if with_v:
                cute.copy(ld_v, ld_v.partition_S(sV_vj[None, None, s * DUAL_WG + wg]), rVt_cv)
            warpgroup.wait_group(0)
            # Y^T = V^T - Z diag(a) (A: V = 0); G1b: Vnew^T = bf16(Y^T) Tu^T
            chain.y_t(rP, rVt, accX, sTab, sBt, tXc, s, i % BSLOT)
            chain.issue(mma_n64, accX, tPa, tTb, s, True)
            warpgroup.wait_group(0)
            # P^T = Vnew^T coef_j (columns j >= L: 0); G3: S^T = g S^T + bf16(P^T) K
            chain.vnew(None, rP, accX, sTab, tXc, L, s)
            chain.issue(mma_s, accSt, tPa, tKb, s, False)
            warpgroup.wait_group(0)
            ring.consumer_release(cs)       # this thread is done with the slot
            cs.advance()
        gM = chain.transposed_block(maps, seg.slot * 2 + seg.map_, hv, col0)      # maps[2 slot + map]
        for e in cutlass.range_constexpr(cute.size(accSt)):
            gM[tScS[e]] = accSt[e]

    @cute.jit
    def epilogue(self, c: Int32, ltid: Int32, wg, ring, rel, ostaged_bar, rO, st_o, sV_vj, vstage: Int32):
        """Chunk c's output (its G4 complete) handed to the store warp: release chunk c's slot, O^T ->
        bf16 -> the V region vstage (transposing stmatrix) of chunk c + 1's slot, whose V tile this
        warp has already read into registers (ldmatrix: each warp reads and writes only its own 16
        v rows of the tile), then each warp fences its writes for the async proxy and arrives on
        ostaged[vstage].  The slot is refilled only once the store warp has read the output too
        (empty_arrivals), so no buffer of its own and no wait here: nothing waits for another warp
        of the chain or for a store."""
        lane = ltid % 32
        # this thread is done with the slot (empty_arrivals); pair build: lane 0 also frees it in the
        # peer CTA, whose loader multicasts into it
        ring.consumer_release(rel)
        if cutlass.const_expr(self.cz > 1):
            if lane == 0:
                rank = cute.arch.block_idx_in_cluster()
                for r in cutlass.range_constexpr(1, self.cz):
                    ring.sync_object_empty.arrive(rel.index, (rank + r) % self.cz)
        cute.copy(st_o, rO, st_o.partition_D(sV_vj[None, None, vstage]))
        chain.staged_signal(ostaged_bar, vstage, lane)


assert SpineRS().smem_bytes() <= MAX_SMEM and SpineRS(dual=True).smem_bytes() <= MAX_SMEM, \
    (SpineRS().smem_bytes(), SpineRS(dual=True).smem_bytes())


# --------------------------------------------------------------------------- kernel
@cute.kernel
def spine_rs_kernel(
    tma_t: cute.CopyAtom, mT: cute.Tensor, tma_v: cute.CopyAtom, mV: cute.Tensor,
    tma_k: cute.CopyAtom, mK: cute.Tensor, tma_o: cute.CopyAtom, mO: cute.Tensor,
    tma_q: cute.CopyAtom, mQ: cute.Tensor, tma_pq: cute.CopyAtom, mPq: cute.Tensor,
    gcum: cute.Tensor, rk: cute.Tensor, rq: cute.Tensor, beta32: cute.Tensor, cu_seqlens: cute.Tensor,
    state: cute.Tensor, state_indices: cute.Tensor, out: cute.Tensor, ready: cute.Tensor, order: cute.Tensor,
    scale: Float32, has_state: Int32, use_state_indices: Int32, overlap: Int32, hv_per_hk: Int32, Hv: Int32,
    checkpoints: cute.Tensor, checkpoint_chunks: Int32, initial_state: cute.Tensor, state_in: Int32,
    maps: cute.Tensor, seg_state: cute.Tensor, seg_chunks: Int32, maps_all: Int32,
    has_initial: cute.Tensor, checkpoint_pool: cute.Tensor,
    spine: cutlass.Constexpr,
):
    """The entry of every build: spine (a SpineRS, compile time) is the build, SpineRS.kernel the body.
    A module function, not a method as single.py's kernel is: the kernel's symbol is made of its
    function's name and first arguments (a method's would name the class and change every
    object)."""
    spine.kernel(
        tma_t, mT, tma_v, mV, tma_k, mK, tma_o, mO, tma_q, mQ, tma_pq, mPq,
        gcum, rk, rq, beta32, cu_seqlens, state, state_indices, out, ready, order,
        scale, has_state, use_state_indices, overlap, hv_per_hk, Hv,
        checkpoints, checkpoint_chunks, initial_state, state_in,
        maps, seg_state, seg_chunks, maps_all, has_initial, checkpoint_pool)


# --------------------------------------------------------------------------- the block's work
@cute.jit
def _segment_block(bx: Int32, Hv: Int32, cu_seqlens: cute.Tensor, seg_chunks: Int32, subs: cutlass.Constexpr):
    """The segmented roles' work for block bx: (n, hv, sub, live, segment).  The grid is (segment
    slot, head, sub) with sub fastest, subs of them (grids.grid_spine_rs_segments): MAPS, sub = Map
    (the A and B CTAs of a head read the same tiles side by side); SEGMENT solo, sub = the 64-column
    half of the state; SEGMENT dual, sub = 0 (one CTA, both halves).  live = 0 where no segment maps
    to the slot."""
    sub = bx % subs
    hv = (bx // subs) % Hv
    sslot = bx // (subs * Hv)
    live, n, j, nseg, bos, eos = slots.segment_of_slot(sslot, cu_seqlens, seg_chunks)
    n = cute.arch.make_warp_uniform(n)
    return n, hv, sub, live, _Segment(sslot, j, nseg, Int32(Map.B))


@cute.jit
def _batch(cu_seqlens: cute.Tensor):
    """(longest, its chunks, all chunks, sequences with a chunk) of the batch: the first sequence
    of the most chunks and the counts, by the calling warp alone (lane l reads sequences l, l + 32,
    ...; every lane ends with the same values, and ptxas is told they are warp-uniform)."""
    N = cu_seqlens.shape[0] - 1
    lane = cute.arch.lane_idx()
    best = Int32(-1)                    # chunks of this lane's longest, then the warp's
    arg = Int32(0)
    total = Int32(0)
    busy = Int32(0)
    for i in cutlass.range(lane, N, 32, unroll=4):      # 4 loads in flight (N <= ORDER_MAX_SEQS)
        c = (cu_seqlens[i + 1] - cu_seqlens[i] + (CHUNK - 1)) // CHUNK
        total = total + c
        if c > 0:
            busy = busy + 1
        if c > best:                    # i rises: the first of equal counts stays
            best = c
            arg = i
    for sh in cutlass.range_constexpr(5):
        ob = cute.arch.shuffle_sync_bfly(best, offset=1 << sh)
        oa = cute.arch.shuffle_sync_bfly(arg, offset=1 << sh)
        if ob > best:
            best = ob
            arg = oa
        elif ob == best:
            if oa < arg:
                arg = oa
    total = cute.arch.warp_reduction_sum(total)
    busy = cute.arch.warp_reduction_sum(busy)
    return (cute.arch.make_warp_uniform(arg), cute.arch.make_warp_uniform(best),
            cute.arch.make_warp_uniform(total), cute.arch.make_warp_uniform(busy))


@cute.jit
def _dual_block(bx: Int32, Hv: Int32, cu_seqlens: cute.Tensor, order: cute.Tensor):
    """The dual build's work for block bx: (n, hv, col0, active, work).  The grid has Hv blocks more
    than heads (grids.grid_spine_rs): blocks [0, 2 Hv) belong to the longest sequence, the rest to
    the others, Hv per sequence, longest first.  When the longest sequence's chain is the call's
    critical path (_lead_solo), its blocks run it solo-style, one chain of 64 state columns each
    (active = 1, col0 = 64 (bx % 2)), at the solo chain's speed; else blocks [0, Hv) run it as
    every other sequence runs (both warpgroups, col0 = 0) and blocks [Hv, 2 Hv) have no work."""
    hv = Int32(0)
    col0 = Int32(0)
    active = Int32(DUAL_WG)
    work = Int32(1)
    n = Int32(0)
    if bx < 2 * Hv:
        n = handoff.longest_first(Int32(0), cu_seqlens, order)
        lead_solo = Int32(0)
        if cu_seqlens.shape[0] - 1 <= ORDER_MAX_SEQS:    # beyond, all dual: no scan of cu_seqlens
            lead_solo = _lead_solo(_batch(cu_seqlens), Hv)
        if lead_solo != 0:
            hv = bx // 2
            col0 = (bx % 2) * VB
            active = Int32(1)
        elif bx < Hv:
            hv = bx
        else:
            work = Int32(0)
    else:
        hv = (bx - 2 * Hv) % Hv
        n = handoff.longest_first(1 + (bx - 2 * Hv) // Hv, cu_seqlens, order)
    return n, hv, col0, active, work


@cute.jit
def _lead_solo(batch, Hv: Int32) -> Int32:
    """1 if the dual build runs the longest sequence solo-style: the wave model of gdn_abi.h on the
    lengths every CTA reads alike (the host cannot see them).  A CTA costs its chunks x the wave
    time + CTA_NS.  All dual: max(the longest's CTA, all CTAs' cost x Hv / sms).  The longest
    solo-style on 2 Hv SMs, the rest dual on the others: max(its CTA at the solo wave time, the
    rest's cost x Hv / (sms - 2 Hv)).  sms is the H100 / H200 count (GDN_SM_COUNT), not queried.
    CTA_NS keeps it from splitting where short CTAs' fixed cost makes the split lose
    (docs/PERFORMANCE.md, the lead rule).
    batch: _batch(cu_seqlens)."""
    _, lead, total, busy = batch
    sms = Float32(grids.SM_COUNT)
    dual_ns = Float32(grids.RS_DUAL_WAVE_NS)
    solo_ns = Float32(grids.RS_SOLO_WAVE_NS)
    cta_ns = Float32(grids.RS_CTA_NS)
    hv = Float32(Hv)
    all_dual = cutlass.max(Float32(lead) * dual_ns + cta_ns,
                           (Float32(total) * dual_ns + Float32(busy) * cta_ns) * hv / sms)
    solo = Int32(0)
    if 2 * Hv < grids.SM_COUNT:
        split = cutlass.max(Float32(lead) * solo_ns + cta_ns,
                            (Float32(total - lead) * dual_ns + Float32(busy - 1) * cta_ns) * hv
                            / (sms - 2.0 * hv))
        if split < all_dual:
            solo = Int32(1)
    return solo


@cute.jit
def _chunks(cu_seqlens: cute.Tensor, n: Int32, seg: _Segment, seg_chunks: Int32):
    """The first token, end and number of chunks of the CTA's work: sequence n, or its segment
    seg.j of seg_chunks chunks (the end stays the sequence's: the last chunk may be partial)."""
    bos = cu_seqlens[n] + seg.j * seg_chunks * CHUNK
    eos = cu_seqlens[n + 1]
    nch = (eos - bos + (CHUNK - 1)) // CHUNK
    if seg.nseg > 1:
        nch = cutlass.min(nch, seg_chunks)
    return bos, eos, nch


@cute.jit
def _map_cut(gcum: cute.Tensor, hv: Int32, bos: Int32, eos: Int32, nch: Int32):
    """MAPS: how many of the segment's last chunks its maps need.  Walking back from the segment's end,
    the first w whose log-decays (gcum of each chunk's last row) sum below MAP_CUT: the state before
    them reaches the segment's end scaled by less than e^MAP_CUT (the delta rule's steps do not expand
    where beta |k|^2 <= 2: unit keys, 0 <= beta <= 2), near the state's own fp32 rounding.  nch where
    the sum never gets there.  The calling warp reads 32 chunks a round, lane l the (32 r + l)-th from
    the end, and scans them; every warp of the CTA computes the same w (the same loads and order)."""
    lane = cute.arch.lane_idx()
    w = nch
    total = Float32(0.0)
    for base in cutlass.range(0, nch, 32, unroll=1):
        if w == nch:
            c = nch - 1 - base - lane                 # the lane's chunk, from the segment's start
            x = Float32(0.0)
            if c >= 0:
                x = gcum[cutlass.min(bos + (c + 1) * CHUNK, eos) - 1, hv]
            for sh in cutlass.range_constexpr(5):
                up = cute.arch.shuffle_sync_up(x, offset=1 << sh)
                if lane >= (1 << sh):
                    x = x + up
            below = Int32(0)
            if c >= 0:
                if total + x < MAP_CUT:
                    below = Int32(1)
            hit = cute.arch.vote_ballot_sync(below != 0)
            if hit != 0:
                w = base + Int32(cute.arch.clz(cute.arch.brev(hit))) + 1       # the first such lane
            total = total + cute.arch.shuffle_sync(x, 31)
    return w


@cute.jit
def _map_range(gcum: cute.Tensor, hv: Int32, bos: Int32, eos: Int32, nch: Int32, map_: Int32, maps_all: Int32):
    """MAPS: (chunks skipped, chunks run, cut) of a map CTA's segment.  Where _map_cut cuts (cut = 1),
    B runs the segment's last w chunks from S = 0 and A, below e^MAP_CUT, runs none and is 0 (compose
    then takes S_end = B).  A rank's shard (maps_all: gdn_prefill.distributed) keeps the exact maps."""
    skip = Int32(0)
    cut = Int32(0)
    if maps_all == 0:
        w = _map_cut(gcum, hv, bos, eos, nch)
        if w < nch:
            cut = Int32(1)
            skip = nch - w
            if map_ == Map.A:
                skip = nch
    return skip, nch - skip, cut


@cute.jit
def _row_data(gcum: cute.Tensor, rk: cute.Tensor, rq: cute.Tensor, beta32: cute.Tensor, hv: Int32, t0: Int32,
              eos: Int32, lane: Int32, ga: Float32, ka: Float32, qa: Float32, ba: Float32, gb: Float32,
              kb: Float32, qb: Float32, bb: Float32):
    """gcum of the chunk's last row, and gcum, rk, rq, beta of rows lane and lane + 32 of the chunk
    at t0 (rows at or past eos are never read: their values stay as given and are unused)."""
    L = cutlass.min(eos - t0, CHUNK)
    gl = gcum[t0 + L - 1, hv]
    if lane < L:
        ga = gcum[t0 + lane, hv]
        ka = rk[t0 + lane, hv]
        qa = rq[t0 + lane, hv]
        ba = beta32[t0 + lane, hv]
    if lane + 32 < L:
        gb = gcum[t0 + lane + 32, hv]
        kb = rk[t0 + lane + 32, hv]
        qb = rq[t0 + lane + 32, hv]
        bb = beta32[t0 + lane + 32, hv]
    return gl, ga, ka, qa, ba, gb, kb, qb, bb


# --------------------------------------------------------------------------- the build's interface
# (cute_kernels.aot: parameter names are gdn_problem_t fields)
def _build(pair: bool = False, dual: bool = False, role: str = "sequence"):
    """(pair, dual, Role) of a variant's kwargs (role: the Role's name, lower case)."""
    r = Role[role.upper()]
    return pair, dual or r == Role.MAPS, r


def launch_for(layout: str, pair: bool = False, dual: bool = False, state_dtype: str = "fp32",
               role: str = "sequence"):
    spine = SpineRS(*_build(pair, dual, role))

    @cute.jit
    def spine_rs(
        q: cute.Tensor, k: cute.Tensor, v: cute.Tensor, tu: cute.Tensor, pqk: cute.Tensor,
        gcum: cute.Tensor, rq: cute.Tensor, rk: cute.Tensor, beta32: cute.Tensor,
        cu_seqlens: cute.Tensor,
        state: cute.Tensor, state_indices: cute.Tensor, out: cute.Tensor, scale: Float32,
        has_state: Int32, use_state_indices: Int32, ready: cute.Tensor, overlap: Int32, order: cute.Tensor,
        checkpoints: cute.Tensor, checkpoint_chunks: Int32, initial_state: cute.Tensor, state_in: Int32,
        maps: cute.Tensor, seg_state: cute.Tensor, seg_chunks: Int32, maps_all: Int32,
        has_initial: cute.Tensor, checkpoint_pool: cute.Tensor,
        stream: cuda.CUstream,
    ):
        spine(q, k, v, tu, pqk, gcum, rq, rk, beta32, cu_seqlens, state, state_indices, out, scale, has_state,
              use_state_indices, ready, overlap, order, checkpoints, checkpoint_chunks, initial_state, state_in,
              maps, seg_state, seg_chunks, maps_all, has_initial, checkpoint_pool, stream)

    return spine_rs


def THREADS(layout: str, pair: bool = False, dual: bool = False, state_dtype: str = "fp32",  # noqa: N802
            role: str = "sequence") -> int:
    return SpineRS(*_build(pair, dual, role)).threads()


def SMEM_BYTES(layout: str, pair: bool = False, dual: bool = False, state_dtype: str = "fp32",  # noqa: N802
               role: str = "sequence") -> int:
    return SpineRS(*_build(pair, dual, role)).smem_bytes()


def CLUSTER(layout: str, pair: bool = False, dual: bool = False, state_dtype: str = "fp32",  # noqa: N802
            role: str = "sequence") -> int:
    return SpineRS(*_build(pair, dual, role)).cz


# Three builds of the serial plan, picked per call by the launcher (plan.pxi _rs_build, gdn_abi.h
# has the measurements): pair in the overlap plan (the multicast halves the L2 reads it shares with
# stage 1), solo or dual in the serial plan by a wave model (two chains per SM once the heads fill
# the SMs); and the segmented plan's two passes (maps: dual; seg: solo, or dual, a CTA per segment
# and head, built for measurement: the planner runs it only when forced, docs/PERFORMANCE.md).
VARIANTS: dict[str, dict] = state_pool.variants({
    "spine_rs_o_kv": {"layout": "kv", "pair": False},
    "spine_rs_o_vk": {"layout": "vk", "pair": False},
    "spine_rs_o_pair_kv": {"layout": "kv", "pair": True},
    "spine_rs_o_pair_vk": {"layout": "vk", "pair": True},
    "spine_rs_o_dual_kv": {"layout": "kv", "dual": True},
    "spine_rs_o_dual_vk": {"layout": "vk", "dual": True},
    "spine_rs_maps_kv": {"layout": "kv", "role": "maps"},
    "spine_rs_maps_vk": {"layout": "vk", "role": "maps"},
    "spine_rs_o_seg_kv": {"layout": "kv", "role": "segment"},
    "spine_rs_o_seg_vk": {"layout": "vk", "role": "segment"},
    "spine_rs_o_seg_dual_kv": {"layout": "kv", "role": "segment", "dual": True},
    "spine_rs_o_seg_dual_vk": {"layout": "vk", "role": "segment", "dual": True},
})


def fake_args(dims, layout, pair=False, dual=False, state_dtype="fp32", role="sequence"):
    """Fake tensors/scalars for every parameter of the launch except stream, in order: fake.spine_args
    (every spine build's list: q, k, out TMA-aligned, the row data, the state) with the input v for
    w and stage 1's tu for u, without vnew and h, then ready and overlap (the overlap plan),
    order (stage 1's ranking of the sequences, longest first), and the segmented plan's maps,
    seg_state, seg_chunks and maps_all."""
    from cute_kernels import fake
    (q, k, _w, _u, pqk, gcum, rq, rk, cu_seqlens, state, state_indices, _vnew, _h, out, scale, has_state,
     use_state_indices, checkpoints, checkpoint_chunks, initial_state, state_in, has_initial,
     checkpoint_pool) = fake.spine_args(dims, layout, state_pool.state_dtype(state_dtype))
    v = fake.tv(dims, stride_div=8, align=16)        # a TMA source, as q and k
    return [q, k, v, fake.ws_tvd(dims, CHUNK), pqk, gcum, rq, rk, fake.ws_th(dims), cu_seqlens, state, state_indices,
            out, scale,
            has_state, use_state_indices, fake.ws_ready(dims), fake.i32(0), fake.ws_order(dims),
            checkpoints, checkpoint_chunks, initial_state, state_in,
            fake.ws_states(dims, dims.M2), fake.ws_states(dims, dims.M), fake.i32(1), fake.i32(0),
            has_initial, checkpoint_pool]
