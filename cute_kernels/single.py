"""The batched plan in one kernel: stage 1 and the spine of one (sequence, value head) per CTA.

The two-kernel plan (recompute_wu, then spine_rs) writes Tu, P and the row data of every chunk to
a workspace and reads them back; here the intra-chunk role produces them in shared memory and the
chains consume them a chunk later, so that nothing but q, k, v, g, beta goes in and nothing but
the output and the states comes out (docs/DESIGN.md, section 1, for the math).  Per chunk i:

    role (intra_chunk's): gcum, rk, rq -> A, P = the masked, decayed K K^T and Q K^T;
                          Tu = bf16((I + A)^-1), in fp16 (inverse_f16) where the chunk is in
                          its range (the gates checked by a norm warp, the keys by the role on
                          K K^T's diagonal) and batch_invariant is 0, else in fp32 with stage
                          1's orders of summation (recompute_wu: the same bits as the serial plan)
    chains (spine_rs's):  Y'^T = (V^T - Z diag(a)) diag(beta), Z = bf16(S^T) K^T;
                          Vnew^T = bf16(Y'^T) Tu^T;  S^T = g S^T + bf16(Vnew^T coef) K;
                          O^T = c_i (bf16(S^T) Q^T) + bf16(Vnew^T) P^T

Grid (Hv, N): block row r runs the sequence of rank r, longest first (rank_longest_first, up to
grids.SINGLE_RANK_MAX_SEQS sequences; index order beyond), so that a batch's long sequences start
in the first wave whatever their place in it.

Warp roles (Role), 512 threads, one CTA per SM; setmaxnreg moves registers from a launch bound
of 128 per thread to the chains (192 / 104 / 24):
- CHAIN (warpgroups 0, 1, CHAIN_REGS): state columns 0-63 and 64-127.  Every MMA takes its A
  operand from registers (rS = bf16(S^T) for G1 and G2), and each group of a chunk's MMAs is
  waited before the next group is formed, so that S^T, rS and two 64 x 64 accumulators are all
  that is live: ptxas then keeps each MMA's k-steps in flight.  The two chains take turns to
  issue (ORDER barriers): one forms its next operands while the other's MMAs run.  Each chunk's
  output is staged in the chunk's own V region, read into registers at the chunk's start (no
  buffers of its own: the shared memory is full).  A sequence's partial last chunk they store
  themselves.
- INTRA (warpgroup 2, INTRA_REGS): intra_chunk's phases, in order over the chunks, one ahead of
  the chains.
- LOAD (warp 12): the TMA loads of K and q (KQ ring) and of V (VT ring).
- NORMS (warps 13, 14): with l2norm, rk, rq of each chunk's rows from its landed tiles (a row
  per lane, summed in stage 1's order; pre-normed, no sums), the scan of g, beta, and the gate
  part of inverse_f16's range check (failed under batch_invariant); they hand gcum, beta, rk, rq and the check to the role through the
  gate ring and write the chains' table.
- STORE (warp 15): the output's TMA stores of full chunks.

Two rings (cute_kernels/rings.py: KQ a PipelineTmaAsync, TMA its only producer; VT a PipelineAsync,
as the gate ring), because K and q live longer than the rest:
- KQ (KQ_SLOTS): K, q (TMA) and P (the role) of chunk i.  The role reads K, q in chunk i, the
  chains K, q, P in theirs.  full: the TMA bytes; empty: the role, the norm warps, the chains
  (at the end of their chunk i).
- VT (VT_SLOTS): V (TMA), Tu (the role) and the table (the norm warps) of chunk i; the chains
  then stage chunk i's output in its V region.  full: the V bytes, the role's threads, the norm
  threads; empty: the chains' threads at the end of their chunk i and the store warp once it has
  read the output staged there.
Every arrival is a thread's own (an mbarrier arrive orders only the arriving thread's accesses)
except the store warp's, which follows its bulk wait.

Rows >= L of a partial chunk: the TMA brings the next sequence's rows (zeros past T), their g and
beta are taken as 0 (so A's rows and P's columns there are 0), the chains zero the K and V rows
before G1 as spine_rs does, and no output row >= L is stored.
"""
from __future__ import annotations

import enum

import cuda.bindings.driver as cuda

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
import cutlass.utils.hopper_helpers as sm90_utils
from cutlass import BFloat16, Boolean, Float32, Int32
from cutlass.cute.nvgpu import cpasync, warpgroup
from cutlass.tensor_utils import LayoutEnum

from cute_kernels import bf16_sumsq, chain, intra_chunk, inverse_f16, pdl, rings, state_pool, tma
from cute_kernels.gates import gate_cumsum, gate_rows
from gdn_prefill import grids

C = grids.CHUNK                 # 64
DK = grids.HEAD_DIM_K           # 128
DV = grids.HEAD_DIM_V           # 128
VB = chain.VB                   # 64 state columns per chain warpgroup
CHAINS = DV // VB               # 2
KQ_SLOTS = 3
VT_SLOTS = 2
MAX_SMEM = grids.MAX_SMEM


class Role(enum.IntEnum):
    """Warp roles: the first warp of each."""
    CHAIN = 0                   # warps 0-7: chain warpgroup wg = warp // 4
    INTRA = 8                   # warps 8-11
    LOAD = 12
    NORMS = 13                  # warps 13, 14
    STORE = 15


assert Role.INTRA % 4 == 0, "the role's thread index is tidx & 127 (SinglePrefill.kernel)"


class Barrier(enum.IntEnum):
    """Named barriers (0: the CTA's)."""
    INTRA = intra_chunk.Barrier.INTRA     # the role's warpgroup (intra_chunk's phases use it)
    CHAINS = 2                  # both chain warpgroups: a partial chunk's zeroed rows
    NORMS = 3                   # the two norm warps: the chunk's gate rows complete
    CHAIN_WG = 4                # + wg: chain warpgroup wg (a partial chunk's staged output)
    ORDER = 6                   # + wg: chain warpgroup wg's turn to issue its MMAs


class MBar(enum.IntEnum):
    """The mbarriers, in storage order (index of the first of each array)."""
    KQ_FULL = 0
    KQ_EMPTY = KQ_FULL + KQ_SLOTS
    VT_FULL = KQ_EMPTY + KQ_SLOTS
    VT_EMPTY = VT_FULL + VT_SLOTS
    OSTAGED = VT_EMPTY + VT_SLOTS         # [(c % VT_SLOTS) CHAINS + wg]: chunk c's output of chain wg
    GATES = OSTAGED + VT_SLOTS * CHAINS   # the gate ring's full / empty (cutlass.pipeline)
    COUNT = GATES + 2 * VT_SLOTS


class SinglePrefill:
    """One CTA per (sequence, value head); see the module docstring."""

    THREADS = 512
    CHAIN_REGS = 192            # S^T, rS and two 64 x 64 accumulators: at 184 and below ptxas waits
                                # for every wgmma k-step (no pipeline)
    INTRA_REGS = 104            # the role's phases spill-free
    IO_REGS = 24                # loads, row norms one row per lane, the scan and the table, stores
    LAUNCH_REGS = 64 * 1024 // THREADS
    NORM_THREADS = 64
    RANK_MAX_SEQS = grids.SINGLE_RANK_MAX_SEQS  # rank_longest_first: one warp, two keys per lane
    # arrivals on each barrier (module docstring)
    KQ_EMPTY_ARRIVALS = 128 + NORM_THREADS + CHAINS * 128
    VT_FULL_ARRIVALS = 1 + 128 + NORM_THREADS
    VT_EMPTY_ARRIVALS = CHAINS * 128 + 1

    def __init__(self, state_dtype: str = "fp32"):
        assert CHAINS * (self.CHAIN_REGS - self.LAUNCH_REGS) <= (self.LAUNCH_REGS - self.INTRA_REGS) + \
            (self.LAUNCH_REGS - self.IO_REGS), "setmaxnreg: the chains' increase must be given back first"
        self.state_dtype = state_dtype
        self.intra = intra_chunk.IntraChunk()
        self.kq_bytes = 2 * C * DK * 2
        self.v_bytes = CHAINS * C * VB * 2

    @staticmethod
    def can_implement(K: int, V: int, Hk: int, Hv: int, qkv_aligned16: bool) -> tuple[bool, str]:
        """What the kernel accepts (the launcher's guards check the same before any launch)."""
        return chain.can_implement(K, V, Hk, Hv, qkv_aligned16)

    # ------------------------------------------------------------------ shared memory
    def _tiles(self) -> dict[str, int]:
        """bf16 elements of each tile, in storage order (each 1024-aligned)."""
        return {"sk": KQ_SLOTS * C * DK, "sq": KQ_SLOTS * C * DK, "sp": KQ_SLOTS * C * C,
                "sv": VT_SLOTS * CHAINS * C * VB, "st": VT_SLOTS * C * C}

    def _small(self) -> dict[str, tuple[int, int]]:
        """(bytes, alignment) of the fields after the tiles, in storage order."""
        f = VT_SLOTS * C * 4
        return {"a": (C * intra_chunk.AS * 4, 16), "x": (intra_chunk.HALF * intra_chunk.XS * 4, 16),
                "tab": (VT_SLOTS * chain.TAB * 4, 16), "btab": (VT_SLOTS * C * 2 * 4, 16),
                "gc": (f, 16), "be": (f, 16), "rk": (f, 16), "rq": (f, 16), "f16": (4 * VT_SLOTS, 16),
                "eye": (4 * 2 * intra_chunk.BLK, 16),
                "order": (16, 16), "bars": (8 * MBar.COUNT, 8)}

    def smem_bytes(self) -> int:
        """_storage's size, field by field (the kernel asserts the two agree)."""
        def up(x, a):
            return (x + a - 1) // a * a
        off = 0
        for n in self._tiles().values():
            off = up(off, 1024) + 2 * n
        for size, align in self._small().values():
            off = up(off, align) + size
        return up(off, 1024)

    def _storage(self):
        fields = {name: cute.struct.Align[cute.struct.MemRange[BFloat16, n], 1024] for name, n in self._tiles().items()}
        for name, (size, align) in self._small().items():
            t = {"bars": cutlass.Int64, "order": Int32, "f16": Int32}.get(name, Float32)
            fields[name] = cute.struct.Align[cute.struct.MemRange[t, size // (t.width // 8)], align]
        return cute.struct(type("SingleStorage", (), {"__annotations__": fields}))

    def _layouts(self):
        """The tiles' layouts: K as the role's and G1's K-major operand (rows, k) and as G3's
        MN-major B (k, rows), the same bytes; q (rows, k); P and Tu (rows, cols) K-major, the B of
        G4 / G1b; V (j, v) per chain, read and written transposed; bf16(S^T) (v, k) per chain."""
        t1 = (VB, C, DK)
        kk = sm90_utils.make_smem_layout_b(LayoutEnum.ROW_MAJOR, t1, BFloat16, KQ_SLOTS)
        k_mn = sm90_utils.make_smem_layout_b(LayoutEnum.COL_MAJOR, (VB, DK, C), BFloat16, KQ_SLOTS)
        assert str(kk) == str(cute.select(k_mn, mode=[1, 0, 2])), (kk, k_mn)
        # the role's A / B of K K^T and Q K^T is the chains' K-major B: one layout for both
        role = sm90_utils.make_smem_layout_a(LayoutEnum.ROW_MAJOR, (C, C, DK), BFloat16, KQ_SLOTS)
        assert str(role) == str(kk), (role, kk)
        t4 = sm90_utils.make_smem_layout_b(LayoutEnum.ROW_MAJOR, (VB, C, C), BFloat16, KQ_SLOTS)
        tu = sm90_utils.make_smem_layout_b(LayoutEnum.ROW_MAJOR, (VB, C, C), BFloat16, VT_SLOTS)
        atom = warpgroup.make_smem_layout_atom(warpgroup.SmemLayoutAtomKind.K_SW128, BFloat16)
        v = cute.tile_to_shape(atom, (C, VB, VT_SLOTS * CHAINS), order=(0, 1, 2))
        lay = dict(sk=k_mn, skk=kk, sq=kk, sp=t4, sv=v, st=tu)
        for name, n in self._tiles().items():
            assert cute.cosize(lay[name]) == n, name
        return lay

    # ------------------------------------------------------------------ launch
    @cute.jit
    def __call__(self, q: cute.Tensor, k: cute.Tensor, v: cute.Tensor, g: cute.Tensor, beta: cute.Tensor,
                 cu_seqlens: cute.Tensor, state: cute.Tensor, state_indices: cute.Tensor, out: cute.Tensor,
                 scale: Float32, use_qk_l2norm: Int32, has_state: Int32, use_state_indices: Int32,
                 checkpoints: cute.Tensor, checkpoint_chunks: Int32, initial_state: cute.Tensor, state_in: Int32,
                 has_initial: cute.Tensor, checkpoint_pool: cute.Tensor, batch_invariant: Int32, stream: cuda.CUstream):
        Hv = v.shape[1]
        N = cu_seqlens.shape[0] - 1
        lay = self._layouts()
        load, store = cpasync.CopyBulkTensorTileG2SOp(), cpasync.CopyBulkTensorTileS2GOp()
        one = lambda name: cute.slice_(lay[name], (None, None, 0))     # noqa: E731
        tma_k, mK = cpasync.make_tiled_tma_atom(load, tma.view(k, [0, 2, 1]), one("skk"), (C, DK))
        tma_q, mQ = cpasync.make_tiled_tma_atom(load, tma.view(q, [0, 2, 1]), one("sq"), (C, DK))
        tma_v, mV = cpasync.make_tiled_tma_atom(load, tma.view(v, [0, 2, 1]), one("sv"), (C, VB))
        tma_o, mO = cpasync.make_tiled_tma_atom(store, tma.view(out, [0, 2, 1]), one("sv"), (C, VB))
        self.kernel(tma_k, mK, tma_q, mQ, tma_v, mV, tma_o, mO, g, beta, cu_seqlens, state, state_indices, out,
                    scale, use_qk_l2norm, has_state, use_state_indices, checkpoints, checkpoint_chunks,
                    initial_state, state_in, has_initial, checkpoint_pool, batch_invariant, Hv // k.shape[1]).launch(
            grid=list(grids.grid_single(q.shape[0], N, Hv)), block=[self.THREADS, 1, 1], stream=stream, smem=self.smem_bytes(),
            use_pdl=pdl.USE_PDL)

    @cute.kernel
    def kernel(self, tma_k: cute.CopyAtom, mK: cute.Tensor, tma_q: cute.CopyAtom, mQ: cute.Tensor,
               tma_v: cute.CopyAtom, mV: cute.Tensor, tma_o: cute.CopyAtom, mO: cute.Tensor, g: cute.Tensor,
               beta: cute.Tensor, cu_seqlens: cute.Tensor, state: cute.Tensor, state_indices: cute.Tensor,
               out: cute.Tensor, scale: Float32, use_qk_l2norm: Int32, has_state: Int32, use_state_indices: Int32,
               checkpoints: cute.Tensor, checkpoint_chunks: Int32, initial_state: cute.Tensor, state_in: Int32,
               has_initial: cute.Tensor, checkpoint_pool: cute.Tensor, batch_invariant: Int32, group: Int32):
        pdl.enter()
        tidx, _, _ = cute.arch.thread_idx()
        hv, r, _ = cute.arch.block_idx()
        warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        Storage = self._storage()
        assert Storage.size_in_bytes() == self.smem_bytes(), (Storage.size_in_bytes(), self.smem_bytes())
        assert self.smem_bytes() <= MAX_SMEM, self.smem_bytes()
        storage = cutlass.utils.SmemAllocator().allocate(Storage)
        lay = self._layouts()

        def view(field, name):
            return getattr(storage, field).get_tensor(lay[name].outer, swizzle=lay[name].inner)
        t = dict(sK=view("sk", "sk"), sKk=view("sk", "skk"), sQ=view("sq", "sq"), sP=view("sp", "sp"),
                 sV=view("sv", "sv"), sT=view("st", "st"))
        t["sV_vj"] = storage.sv.get_tensor(cute.select(lay["sv"], mode=[1, 0, 2]).outer, swizzle=lay["sv"].inner)
        bars = storage.bars.data_ptr()
        if warp == Role.LOAD:
            for atom in (tma_k, tma_q, tma_v, tma_o):
                cpasync.prefetch_descriptor(atom)
        if tidx < 2 * intra_chunk.BLK:       # the role's identity row (IntraChunk.inverse's sEye)
            storage.eye.get_tensor(cute.make_layout(2 * intra_chunk.BLK))[tidx] = cutlass.select_(
                tidx == intra_chunk.BLK - 1, Float32(1.0), Float32(0.0))
        # the KQ and VT rings (rings.tma_ring, rings.thread_ring; the gate ring's create below fences and
        # syncs the CTA)
        kq = rings.tma_ring(KQ_SLOTS, bars + MBar.KQ_FULL, self.kq_bytes, self.KQ_EMPTY_ARRIVALS)
        vt = rings.thread_ring(VT_SLOTS, bars + MBar.VT_FULL, self.VT_FULL_ARRIVALS, self.VT_EMPTY_ARRIVALS)
        if tidx == 0:
            chain.staged_init(bars + MBar.OSTAGED, VT_SLOTS * CHAINS)
        sOrder = storage.order.get_tensor(cute.make_layout(4))
        self.rank_longest_first(r, cu_seqlens, sOrder, tidx)
        # the gate ring (its create() initialises its barriers, fences and syncs the CTA: sOrder is then
        # written)
        gates = pipeline.PipelineAsync.create(
            num_stages=VT_SLOTS,
            producer_group=pipeline.CooperativeGroup(pipeline.Agent.Warp, self.NORM_THREADS // 32),
            consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Warp, 4),
            barrier_storage=bars + MBar.GATES)

        n = r
        if cu_seqlens.shape[0] - 1 <= self.RANK_MAX_SEQS:
            # clamped into [0, N) (defence: a permutation needs no clamp)
            n = cute.arch.make_warp_uniform(cutlass.min(cutlass.max(sOrder[0], Int32(0)), cu_seqlens.shape[0] - 2))
        run, slot = state_pool.pool_slot(n, state_indices, use_state_indices)    # padding entries skip
        bos = cu_seqlens[n]
        eos = cu_seqlens[n + 1]
        nch = (eos - bos + C - 1) // C
        # each warpgroup resizes its registers at one instruction that dominates all of its code
        if warp >= Role.LOAD:
            cute.arch.setmaxregister_decrease(self.IO_REGS)
            if run != 0:
                if warp == Role.LOAD:
                    self.loads(kq, vt, t, tma_k, mK, tma_q, mQ, tma_v, mV, bos, nch, hv, hv // group)
                elif warp < Role.STORE:
                    self.norms(kq, vt, gates, storage, t, g, beta, scale, use_qk_l2norm, batch_invariant, bos, eos,
                               nch, hv, tidx - Role.NORMS * 32)
                else:
                    self.stores(vt, bars, t, tma_o, mO, out, bos, eos, nch, hv)
        elif warp >= Role.INTRA:
            cute.arch.setmaxregister_decrease(self.INTRA_REGS)
            if run != 0:
                # the role's thread index as tidx & 127 (its warpgroup starts at a multiple of 128): a
                # value LLVM knows is non-negative, so that its divisions by powers of two stay 32-bit
                # shifts; as tidx - 256 they became 16-bit signed arithmetic with a correction each
                self.intra_role(kq, vt, gates, storage, t, scale, use_qk_l2norm, nch, tidx & 127)
        else:
            cute.arch.setmaxregister_increase(self.CHAIN_REGS)
            if run != 0:
                self.chain(kq, vt, bars, storage, t, tidx % 128, tidx // 128, n, hv, slot, bos, eos, nch, state,
                           has_state, checkpoints, checkpoint_chunks, initial_state,
                           state_pool.source(state_in, has_initial, n), out, checkpoint_pool)

    @cute.jit
    def rank_longest_first(self, r: Int32, cu_seqlens: cute.Tensor, sOrder: cute.Tensor, tidx: Int32):
        """Block row r runs the sequence of rank r, longest first (equal lengths by index, as stage
        1 ranks them for the serial plan): blocks start in index order, so a long sequence late in
        the batch would otherwise start in the last wave and end the call alone.  Warp 0, lane l
        holding the keys of sequences l, l + 32, .., counts the sequences ahead of each by 32
        shuffles per 32 sequences; the lane with r ahead of one of its sequences writes it to
        sOrder[0] (read after the CTA's first barrier).  Up to 32 sequences one key per lane,
        beyond (up to RANK_MAX_SEQS) two; beyond RANK_MAX_SEQS sequences, index order.  Equal
        lengths keep index order by one vote, without the shuffles."""
        N = cu_seqlens.shape[0] - 1
        if tidx < 32:
            if N <= 32:
                self._rank_keys(1, r, N, cu_seqlens, sOrder, tidx)
            elif N <= self.RANK_MAX_SEQS:
                self._rank_keys(self.RANK_MAX_SEQS // 32, r, N, cu_seqlens, sOrder, tidx)

    @cute.jit
    def _rank_keys(self, groups: cutlass.Constexpr, r: Int32, N: Int32, cu_seqlens: cute.Tensor, sOrder: cute.Tensor,
                   tidx: Int32):
        """rank_longest_first over N <= 32 groups sequences: a unique key per sequence, its length
        (clamped to fit) then its index, -1 past N (ahead of no sequence); straight-line code (the
        key lists are Python's, unrolled)."""
        ib = (32 * groups - 1).bit_length()          # index bits of the key
        keys, lengths = [], []
        for g in cutlass.range_constexpr(groups):
            s = tidx + 32 * g
            sc = cutlass.min(s, N - 1)
            # clamped to [0, 2^(31 - ib)): keys stay unique and >= 0, so the ranks are a permutation
            # of [0, N) even where cu_seqlens decreases (a device value the contract trusts)
            length = cutlass.max(cutlass.min(cu_seqlens[sc + 1] - cu_seqlens[sc], Int32((1 << (31 - ib)) - 1)),
                                 Int32(0))
            keys.append(cutlass.select_(s < N, (length << ib) | (32 * groups - 1 - s), Int32(-1)))
            lengths.append(length)
        # equal lengths rank in index order: one vote instead of the shuffles (a batch of equal
        # prompts pays no ranking)
        first = cute.arch.shuffle_sync(lengths[0], 0)
        same = Boolean(True)
        for g in cutlass.range_constexpr(groups):
            same = same & ((tidx + 32 * g >= N) | (lengths[g] == first))
        if cute.arch.vote_all_sync(same):
            if tidx == 0:
                sOrder[0] = r
        else:
            ahead = [Int32(0)] * groups
            for h in cutlass.range_constexpr(groups):
                for m in cutlass.range_constexpr(32):
                    other = cute.arch.shuffle_sync(keys[h], m)
                    for g in cutlass.range_constexpr(groups):
                        ahead[g] = ahead[g] + cutlass.select_(other > keys[g], Int32(1), Int32(0))
            for g in cutlass.range_constexpr(groups):
                if tidx + 32 * g < N:
                    if ahead[g] == r:
                        sOrder[0] = tidx + 32 * g

    # ------------------------------------------------------------------ I/O warps
    @cute.jit
    def loads(self, kq, vt, t, tma_k, mK, tma_q, mQ, tma_v, mV, bos: Int32, nch: Int32, hv: Int32, hk: Int32):
        """Chunk i's K and q into KQ slot i % KQ_SLOTS once chunk i - KQ_SLOTS has left it, then its
        V (both chains' columns) into VT slot i % VT_SLOTS likewise."""
        mK_h = mK[None, None, hk]
        mQ_h = mQ[None, None, hk]
        mV_h = mV[None, None, hv]
        ks = rings.state(KQ_SLOTS, True)
        vs = rings.state(VT_SLOTS, True)
        for i in cutlass.range(nch, unroll=1):
            t0 = bos + i * C
            sa = ks.index
            kq.producer_acquire(ks)
            bar = kq.producer_get_barrier(ks)
            tma.load(tma_k, tma.gmem_tile(mK_h, (t0, 0), (C, DK)), t["sKk"][None, None, sa], bar, Int32(0), 1)
            tma.load(tma_q, tma.gmem_tile(mQ_h, (t0, 0), (C, DK)), t["sQ"][None, None, sa], bar, Int32(0), 1)
            ks.advance()
            sb = vs.index
            bar = rings.tma_acquire(vt, vs, self.v_bytes)
            for wg in cutlass.range_constexpr(CHAINS):
                tma.load(tma_v, tma.gmem_tile(mV_h, (t0, wg * VB), (C, VB)), t["sV"][None, None, sb * CHAINS + wg],
                         bar, Int32(0), 1)
            vs.advance()

    @cute.jit
    def norms(self, kq, vt, gates, storage, t, g, beta, scale: Float32, use_qk_l2norm: Int32, batch_invariant: Int32,
              bos: Int32, eos: Int32, nch: Int32, hv: Int32, ntid: Int32):
        """The two norm warps, chunk by chunk: with l2norm, rk (warp 13) and rq (warp 14) of the
        chunk's rows (lane l: rows l, l + 32, summed as stage 1 sums them: bf16_sumsq.tree16;
        pre-normed, 1 and no sums); rk 0 past L; the range check's gate part (warp 14,
        gates_in_range, voted, and failed under batch_invariant: its key part is the role's, on
        K K^T's diagonal) and, on the first warp, the scan of g and beta, all into
        gate stage i % VT_SLOTS for the role (g and beta loaded by both warps before the wait for
        the tiles, gate_rows: the latency runs under the wait and the sums; scanned after,
        gate_cumsum); then, once the chains have left VT slot i % VT_SLOTS, thread r writes row r
        of the chains' table there (spine_rs's: coef_r = exp(g_last - gcum_r) rk_r, c_r = scale
        rq_r exp(gcum_r), a_r = exp(gcum_r) rk_r, beta_r; 0 past L)."""
        gprod = gates.make_producer()
        sGr, sBr, sRr, sQr, sF16 = self._gate_ring(storage)
        sTab, sBt = self._tables(storage)
        rows_q = cute.arch.make_warp_uniform(ntid // 32)      # warp 13: the K rows (rk), warp 14: the q rows (rq)
        # lane l: rows l and l + 32 of its tile, 16 vectors of 8 each
        cp = cute.make_tiled_copy_tv(
            cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), BFloat16, num_bits_per_copy=128),
            cute.make_layout((32, 1), stride=(1, 0)), cute.make_layout((1, 8)))
        for i in cutlass.range(nch, unroll=1):
            # the rings' states and the lane formed per chunk (inverse_f16.opaque): held across
            # the loop, they spill in the fp8-pool builds' 24 registers
            ks = rings.state_at(KQ_SLOTS, i, False)
            vs = rings.state_at(VT_SLOTS, i, True)
            lane = inverse_f16.opaque(ntid) & 31
            th = cp.get_slice(lane)
            t0 = bos + i * C
            L = cutlass.min(eos - t0, C)
            sa = ks.index
            g0, g1, b0, b1 = gate_rows(g, beta, t0, L, hv, lane)
            kq.consumer_wait(ks)
            r0 = Float32(1.0)
            r1 = Float32(1.0)
            if use_qk_l2norm != 0:
                tile = t["sKk"][None, None, sa]
                if rows_q == 1:
                    tile = t["sQ"][None, None, sa]
                t_s = th.partition_S(tile)                       # (8 values, 2 row blocks, 16 vectors)
                # the vectors' sums of squares added in stage 1's tree (its threads' reduce-scatter):
                # the same rk, rq bits as the serial plan; one row after the other (the registers)
                s0, s1 = (bf16_sumsq.tree16(
                    lambda c, b=b: (bf16_sumsq.sumsq_bf16x8(*bf16_sumsq.word_list(t_s[(None, b, c)])),))[0]
                    for b in (0, 1))
                r0 = cute.math.rsqrt(s0 + intra_chunk.L2_EPS)
                r1 = cute.math.rsqrt(s1 + intra_chunk.L2_EPS)
            kq.consumer_release(ks)
            gh = gprod.acquire_and_advance()
            if rows_q == 0:         # rk past L is 0: the role's key check passes those rows
                sRr[lane, gh.index] = cutlass.select_(lane < L, r0, Float32(0.0))
                sRr[lane + 32, gh.index] = cutlass.select_(lane + 32 < L, r1, Float32(0.0))
            else:
                sQr[lane, gh.index] = r0
                sQr[lane + 32, gh.index] = r1
                ok = Int32(cute.arch.vote_all_sync(inverse_f16.gates_in_range(g0, g1, b0.to(Float32), b1.to(Float32))))
                ok = cutlass.select_(batch_invariant != 0, Int32(0), ok)     # the fp32 inverse, as stage 1's
                if lane == 0:
                    sF16[gh.index] = ok
            if ntid < 32:
                c0, c1, e0, e1 = gate_cumsum(g0, g1, b0, b1, L, ntid)
                sGr[2 * ntid, gh.index] = c0
                sGr[2 * ntid + 1, gh.index] = c1
                sBr[2 * ntid, gh.index] = e0
                sBr[2 * ntid + 1, gh.index] = e1
            cute.arch.barrier(barrier_id=Barrier.NORMS, number_of_threads=self.NORM_THREADS)
            gh.commit()
            # the chains' table of chunk i, in VT slot sb once chunk i - VT_SLOTS has left it
            sb = vs.index
            vt.producer_acquire(vs)
            r = ntid
            gl = sGr[L - 1, gh.index]
            coef, cr, ar = chain.table_row(gl, sGr[r, gh.index], sRr[r, gh.index], lambda: sQr[r, gh.index], scale,
                                           r < L)
            sTab[r, sb] = coef
            sTab[chain.TAB_C + r, sb] = cr
            if r == 0:
                sTab[chain.TAB_GL, sb] = cute.math.exp(gl)
            sBt[0, r, sb] = ar
            sBt[1, r, sb] = sBr[r, gh.index]          # 0 past L (gate_cumsum)
            vt.producer_commit(vs)
        gprod.tail()

    @cute.jit
    def stores(self, vt, bars, t, tma_o, mO, out: cute.Tensor, bos: Int32, eos: Int32, nch: Int32, hv: Int32):
        """Chunk c's output of chain wg, staged in the V region of its own VT slot c % VT_SLOTS (once
        its four warps have arrived on OSTAGED[(c % VT_SLOTS) CHAINS + wg]) -> rows t0 .. t0 + L,
        columns 64 wg .. of out by one TMA store; once the stores have read the slot, its arrival
        on VT_EMPTY lets the slot be refilled.  A sequence's partial last chunk the chains store
        themselves (epilogue): its rows >= L are the next sequence's, and this warp's registers do
        not hold the row addresses of its thread stores."""
        lane = cute.arch.lane_idx()
        mO_h = mO[None, None, hv]
        vs = rings.state(VT_SLOTS, False)
        for c in cutlass.range(nch, unroll=1):
            t0 = bos + c * C
            L = cutlass.min(eos - t0, C)
            s = vs.index
            for wg in cutlass.range_constexpr(CHAINS):
                chain.staged_wait(bars + MBar.OSTAGED + s * CHAINS, wg, vs.phase)
                if L >= C:      # a partial (last) chunk's rows the chains have stored (epilogue)
                    tma.store(tma_o, t["sV"][None, None, s * CHAINS + wg], tma.gmem_tile(mO_h, (t0, wg * VB), (C, VB)))
            tma.release_after_stores(vt, vs, lane)
            vs.advance()
        cute.arch.cp_async_bulk_wait_group(0)

    # ------------------------------------------------------------------ the role
    @cute.jit
    def intra_role(self, kq, vt, gates, storage, t, scale: Float32, use_qk_l2norm: Int32, nch: Int32, ltid: Int32):
        """intra_chunk's phases over the chunks: K K^T, Q K^T on the tensor cores (then the KQ
        slot is the role's no longer), the range check (the gate ring's vote on the gates,
        IntraChunk.keys_in_range on K K^T's diagonal), the folds with the gate ring's rows (A in
        fp16 where the check passes, else fp32; P into its slot), the inverse (inverse_f16's or
        IntraChunk's), Tu into VT slot i % VT_SLOTS once the chains have left it; each thread
        fences its P and Tu writes for the chains' wgmma and arrives on VT_FULL."""

        gcons = gates.make_consumer()
        sA, sA2, sX = self.intra.scratch(storage)
        base, sAw, sH = self.intra.scratch16(storage)
        sEye = storage.eye.get_tensor(cute.make_layout(2 * intra_chunk.BLK))
        sGr, sBr, sRr, sQr, sF16 = self._gate_ring(storage)
        mma = self.intra._mma()
        thr = mma.get_slice(ltid)
        accG = cute.make_rmem_tensor(thr.partition_shape_C((C, C)), Float32)
        accQ = cute.make_rmem_tensor(thr.partition_shape_C((C, C)), Float32)
        rP = cute.make_rmem_tensor_like(accQ, BFloat16)
        # P -> its K-major, swizzled tile (the chains' B of G4) by stmatrix, as the chains stage S^T
        st_p = cute.make_tiled_copy_C(cute.make_copy_atom(cute.nvgpu.warp.StMatrix8x8x16bOp(False, 4), BFloat16),
                                      mma).get_slice(ltid)
        # A -> its fp16 matrix (inverse_f16's padded rows) by stmatrix
        st_a = cute.make_tiled_copy_C(cute.make_copy_atom(cute.nvgpu.warp.StMatrix8x8x16bOp(False, 4),
                                                         cutlass.Float16), mma).get_slice(ltid)
        ks = rings.state(KQ_SLOTS, False)
        vs = rings.state(VT_SLOTS, True)
        for i in cutlass.range(nch, unroll=1):
            sa = ks.index
            sb = vs.index
            kq.consumer_wait(ks)
            self.intra.issue_products(mma, thr, accG, accQ, t["sKk"][None, None, sa], t["sQ"][None, None, sa])
            warpgroup.wait_group(0)
            kq.consumer_release(ks)
            ks.advance()
            gh = gcons.wait_and_advance()
            gate = (sGr[None, gh.index], sBr[None, gh.index], sRr[None, gh.index], sQr[None, gh.index])
            # the range check: its gate part (a norm warp's vote) and its key part, each row's
            # ||k_i rk_i||^2 read off the diagonal of K K^T by the thread that holds it; all 128
            # threads agree by one bar.red.and
            # with l2norm the keys are this kernel's own: ||k rk||^2 = S / (S' + eps), S and S' two
            # fp32 sums of the same 128 bf16 squares (K K^T's diagonal, the norm warps' sums), so it
            # is <= 1 + 2^-14 for finite keys, far inside the check's 1 + 2^-6; a key part that can
            # fail only where a key is not finite (rk then NaN or 0 on both inverses' paths).  Only
            # pre-normed keys need it.
            f16 = Int32(0)
            if use_qk_l2norm != 0:
                f16 = cute.arch.make_warp_uniform(Int32(sF16[gh.index] != 0))
            else:
                keys_ok = self.intra.keys_in_range(accG, gate[2], ltid)
                f16 = cute.arch.make_warp_uniform(
                    inverse_f16.barrier_and(keys_ok & (sF16[gh.index] != 0), Barrier.INTRA, self.intra.INTRA_THREADS))
            if f16 != 0:
                if use_qk_l2norm != 0:
                    self.intra.folds(thr, accG, accQ, sH, True, *gate, scale, rP, st_a)
                else:       # pre-normed: rk = rq = 1 (intra_chunk.folds' unit_norms)
                    self.intra.folds(thr, accG, accQ, sH, True, *gate, scale, rP, st_a, True)
            else:
                self.intra.folds(thr, accG, accQ, sA2, False, *gate, scale, rP)
            cute.copy(st_p, st_p.retile(rP), st_p.partition_D(t["sP"][None, None, sa]))
            cute.arch.barrier(barrier_id=Barrier.INTRA, number_of_threads=128)
            gh.release()
            if f16 != 0:
                inverse_f16.invert(base, sAw, ltid, Barrier.INTRA)
            else:
                self.intra.inverse(sA, sX, inverse_f16.opaque(ltid) & 127, sEye)
            vt.producer_acquire(vs)
            if f16 != 0:
                self.stage_tu(sH, t["sT"][None, None, sb], ltid)
            else:
                self.stage_tu(sA, t["sT"][None, None, sb], ltid)
            cute.arch.fence_proxy("async.shared", space="cta")
            vt.producer_commit(vs)
            vs.advance()
            # the next chunk's folds overwrite sA
            cute.arch.barrier(barrier_id=Barrier.INTRA, number_of_threads=128)

    @cute.jit
    def stage_tu(self, sA, sT1, ltid: Int32):
        """Tu = bf16(Tm) into the (64, 64) tile sT1 in its wgmma layout: 16-byte copies (thread t:
        row t // 8 + 16 m, columns 8 (t % 8) ..; the swizzle keeps each 16 bytes together)."""
        th = tma.rows_copy(C).get_slice(ltid)
        tD = th.partition_D(sT1)
        tC = th.partition_D(cute.make_identity_tensor((C, C)))
        for m in cutlass.range_constexpr(cute.size(tD, mode=[1])):
            x = cute.make_rmem_tensor_like(tD[None, m, None], BFloat16)
            for e in cutlass.range_constexpr(cute.size(x)):
                r, c = tC[e, m, 0]
                x[e] = BFloat16(Float32(sA[r, c]))
            cute.autovec_copy(x, tD[None, m, None])

    def _gate_ring(self, storage):
        """gcum, beta, rk, rq of each row, per gate stage: (row, stage); and per stage the norm
        warp's vote on the gates (the range check's gate part)."""
        lay = cute.make_layout((C, VT_SLOTS), stride=(1, C))
        rows = tuple(f.get_tensor(lay) for f in (storage.gc, storage.be, storage.rk, storage.rq))
        return rows + (storage.f16.get_tensor(cute.make_layout(VT_SLOTS)),)

    @staticmethod
    def _tables(storage):
        """The chains' coefficient table (chain.TAB, slot) and (a, beta) pairs (2, row, slot)."""
        sTab = storage.tab.get_tensor(cute.make_layout((chain.TAB, VT_SLOTS)))
        sBt = storage.btab.get_tensor(cute.make_layout((2, C, VT_SLOTS), stride=(1, 2, 2 * C)))
        return sTab, sBt

    # ------------------------------------------------------------------ the chains
    @cute.jit
    def _turn(self, wg):
        """Wait for this chain warpgroup's turn to issue (ordered issue: the chains alternate)."""
        cute.arch.barrier(barrier_id=Barrier.ORDER + wg, number_of_threads=2 * 128)

    @cute.jit
    def _pass(self, wg):
        """Give the turn to the other chain warpgroup."""
        cute.arch.barrier_arrive(barrier_id=Barrier.ORDER + 1 - wg, number_of_threads=2 * 128)

    @cute.jit
    def chain(self, kq, vt, bars, storage, t, ltid: Int32, wg: Int32, n: Int32, hv: Int32, slot: Int32, bos: Int32,
              eos: Int32, nch: Int32, state: cute.Tensor, has_state: Int32, checkpoints: cute.Tensor,
              checkpoint_chunks: Int32, initial_state: cute.Tensor, state_in: Int32, out: cute.Tensor,
              checkpoint_pool: cute.Tensor):
        """Chain warpgroup wg: S^T of state columns 64 wg .. 64 wg + 63 through the sequence and their
        output.  Per chunk i (K, q, P in KQ slot i % KQ_SLOTS; V, Tu and the table in VT slot
        i % VT_SLOTS), every MMA's A operand in registers:
            rS = bf16(S^T); G1 Z = rS K^T and G2 Y = rS Q^T; S^T *= exp(g_last)
            Y'^T from Z and V^T (chain.y_t); G1b Vnew^T = Y'^T Tu^T; O^T = c Y
            G4 O^T += bf16(Vnew^T) P^T; G3 S^T += bf16(Vnew^T coef) K
        then chunk i's output, staged in its own V region (read into registers at the chunk's start),
        for the store warp.  Each group of MMAs is waited before the next is formed, so that no more
        than two 64 x 64 accumulators and rS are live beside S^T (CHAIN_REGS)."""
        col0 = wg * VB
        sTab, sBt = self._tables(storage)
        f = chain.Fragments(ltid, t["sKk"], t["sT"], t["sK"], t["sQ"], t["sP"])
        mma_n64, mma_s, tKkb, tQb, tTb, tPqb, tKb = f.mma_n64, f.mma_s, f.tKkb, f.tQb, f.tTb, f.tPqb, f.tKb
        accSt, accX, accY, rS, rP, rV = f.accSt, f.accX, f.accY, f.rS, f.rP, f.rV
        tSa, tPa, tVa, tScS, tXc = f.tSa, f.tPa, f.tVa, f.tScS, f.tXc
        ld_v, st_o, rVt, rVt_cv, accY_cv, rO = f.ld_v, f.st_o, f.rVt, f.rVt_cv, f.accY_cv, f.rO
        sV_vj = t["sV_vj"]

        gSt = chain.transposed_block(state, slot, hv, col0)
        state_pool.load(accSt, tScS, gSt, chain.transposed_block(initial_state, slot, hv, col0), state_in)
        mma_s.set(warpgroup.Field.ACCUMULATE, True)
        if wg == 1:
            self._pass(wg)              # chain 0 issues first
        seg = state_pool.segment_chunks(nch, checkpoint_chunks)
        ks = rings.state(KQ_SLOTS, False)
        vs = rings.state(VT_SLOTS, False)
        for sg in cutlass.range((nch + seg - 1) // seg, unroll=1):
            i_end = cutlass.min((sg + 1) * seg, nch)
            for i in cutlass.range(sg * seg, i_end, unroll=1):
                sa = ks.index
                sb = vs.index
                t0 = bos + i * C
                L = cutlass.min(eos - t0, C)
                kq.consumer_wait(ks)
                vt.consumer_wait(vs)
                if L < C:
                    chain.zero_tail(t["sK"], sV_vj, L, ltid, wg, CHAINS, sa, CHAINS, Barrier.CHAINS, vs=sb)
                # G1, G2 on rS = bf16(S^T); then S^T's decay (rS is a copy)
                rS.store(accSt.load().to(BFloat16))
                self._turn(wg)
                chain.issue(mma_n64, accX, tSa, tKkb, sa, True)
                chain.issue(mma_n64, accY, tSa, tQb, sa, True)
                self._pass(wg)
                decay = sTab[chain.TAB_GL, sb]
                for e in cutlass.range_constexpr(cute.size(accSt)):
                    accSt[e] = accSt[e] * decay
                warpgroup.wait_group(0)           # G1, G2: rS is free
                cute.copy(ld_v, ld_v.partition_S(sV_vj[None, None, sb * CHAINS + wg]), rVt_cv)
                chain.y_t(rP, rVt, accX, sTab, sBt, tXc, sb, sb)
                self._turn(wg)
                chain.issue(mma_n64, accX, tPa, tTb, sb, True)     # G1b
                self._pass(wg)
                for e in cutlass.range_constexpr(cute.size(accY)):
                    accY[e] = accY[e] * sTab[chain.TAB_C + tXc[e][1], sb]
                warpgroup.wait_group(0)           # G1b
                chain.vnew(rV, rP, accX, sTab, tXc, L, sb)
                self._turn(wg)
                mma_n64.set(warpgroup.Field.ACCUMULATE, True)
                chain.issue(mma_n64, accY, tVa, tPqb, sa, False)   # G4
                chain.issue(mma_s, accSt, tPa, tKb, sa, False)     # G3
                self._pass(wg)
                warpgroup.wait_group(1)           # G4: chunk i's output
                rO.store(accY_cv.load().to(BFloat16))
                self.epilogue(bars, i, ltid, wg, rO, st_o, sV_vj, sb, out=out, sV=t["sV"], hv=hv, t0=t0, L=L)
                warpgroup.wait_group(0)           # G3
                # this thread is done with KQ slot sa (K, q, P) and VT slot sb (V, Tu, the table; its
                # output staged there is the store warp's to release)
                kq.consumer_release(ks)
                vt.consumer_release(vs)
                ks.advance()
                vs.advance()
            ck = state_pool.checkpoint_slot_after(i_end - 1, (eos - bos) // C, n, checkpoints, checkpoint_chunks)
            if ck >= 0:
                state_pool.store(accSt, tScS, chain.transposed_block(checkpoint_pool, ck, hv, col0))
        if wg == 0:
            self._turn(wg)              # chain 1's last pass
        if has_state != 0:
            state_pool.store(accSt, tScS, gSt)

    @cute.jit
    def epilogue(self, bars, c: Int32, ltid: Int32, wg: Int32, rO, st_o, sV_vj, sb: Int32, out: cute.Tensor,
                 sV, hv: Int32, t0: Int32, L: Int32):
        """Chunk c's output (its G4 complete): O^T -> bf16 -> chain wg's V region of VT slot sb (this
        chunk's, whose V this warp has read into registers: each warp reads and writes only its own 16
        v rows), each warp fences its writes for the store's async proxy and arrives on OSTAGED.  A
        partial chunk (L < 64, a sequence's last): the warpgroup stores its rows < L itself, 16-byte
        copies from the staged tile once all four warps have written it (the store warp then stores
        nothing)."""
        cute.copy(st_o, rO, st_o.partition_D(sV_vj[None, None, sb * CHAINS + wg]))
        if L < C:
            cute.arch.barrier(barrier_id=Barrier.CHAIN_WG + wg, number_of_threads=128)
            cp = tma.rows_copy(VB)
            thr = cp.get_slice(ltid)
            tma.store_partial_rows(L, out, cp, thr, thr.partition_S(sV[None, None, sb * CHAINS + wg]),
                                   thr.partition_S(cute.make_identity_tensor((C, VB))), t0, hv, wg * VB, VB)
        chain.staged_signal(bars + MBar.OSTAGED + sb * CHAINS, wg, ltid % 32)


# --------------------------------------------------------------------------- the build's interface
# (cute_kernels.aot: parameter names are gdn_problem_t fields)
THREADS = SinglePrefill.THREADS


def SMEM_BYTES(layout: str, beta: str = "bf16", state_dtype: str = "fp32") -> int:  # noqa: N802
    return SinglePrefill(state_dtype).smem_bytes()


def launch_for(layout: str, beta: str = "bf16", state_dtype: str = "fp32"):
    kern = SinglePrefill(state_dtype)

    @cute.jit
    def single_prefill(q: cute.Tensor, k: cute.Tensor, v: cute.Tensor, g: cute.Tensor, beta: cute.Tensor,
                      cu_seqlens: cute.Tensor, state: cute.Tensor, state_indices: cute.Tensor, out: cute.Tensor,
                      scale: Float32, use_qk_l2norm: Int32, has_state: Int32, use_state_indices: Int32,
                      checkpoints: cute.Tensor, checkpoint_chunks: Int32, initial_state: cute.Tensor,
                      state_in: Int32, has_initial: cute.Tensor, checkpoint_pool: cute.Tensor,
                      batch_invariant: Int32, stream: cuda.CUstream):
        kern(q, k, v, g, beta, cu_seqlens, state, state_indices, out, scale, use_qk_l2norm, has_state,
             use_state_indices, checkpoints, checkpoint_chunks, initial_state, state_in, has_initial,
             checkpoint_pool, batch_invariant, stream)

    return single_prefill


# per beta dtype (the names recompute_wu's builds use), state layout and pool element type
VARIANTS: dict[str, dict] = state_pool.variants({
    f"single_prefill_beta{b}_{lay}": {"layout": lay, "beta": b} for b in ("f32", "bf16") for lay in ("kv", "vk")})


def fake_args(dims, layout: str, beta: str = "bf16", state_dtype: str = "fp32") -> list:
    from cute_kernels import fake
    st = state_pool.state_dtype(state_dtype)
    tma16 = {"stride_div": 8, "align": 16}
    return [fake.qk(dims, **tma16), fake.qk(dims, **tma16), fake.tv(dims, **tma16), fake.th(dims, Float32),
            fake.th(dims, BFloat16 if beta == "bf16" else Float32), fake.cu_seqlens(dims), fake.state(dims, layout, st),
            fake.state_indices(dims),
            fake.tv(dims, **tma16), fake.f32(128 ** -0.5), fake.i32(0), fake.i32(0), fake.i32(0),
            fake.checkpoints(dims), fake.i32(0), fake.state(dims, layout, st), fake.i32(1),
            fake.has_initial(dims), fake.checkpoint_pool(dims, layout, st), fake.i32(0)]
