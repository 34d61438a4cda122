"""Stage 1 of one (sequence, value head) in one warpgroup: the fused kernel's intra-chunk role.

The batched fused kernel (issue 42) runs a head's chains and its stage 1 in one CTA: the chains
(spine_rs's dual build) consume Tu and P a chunk after this role produced them in shared memory.
Whether that pays depends on one number, the time this role takes per chunk: the chains take
~2.2 us, and the kernel runs at the slower of the two.  This kernel is the role alone, so that the
number can be measured before the chains join it: per chunk of 64 tokens of its (sequence, head)
it computes exactly what recompute_wu's _pqk build computes (docs/DESIGN.md, section 1):

    gcum = in-chunk cumsum of g;  rq, rk = rsqrt(|x|^2 + 1e-6) of the q / k rows (1 without l2norm)
    A_ij = beta_i rk_i rk_j (k_i . k_j) exp(gcum_i - gcum_j)   (i > j, else 0)
    Tu   = bf16((I + A)^-1)                   (fp32 inverse: 16 x 16 diagonal blocks by forward
                                               substitution, merges in one TF32 pass)
    P_ij = scale rq_i rk_j (q_i . k_j) exp(gcum_i - gcum_j)   (j <= i, else 0), bf16

and writes gcum, rq, rk, beta32 (fp32), tu and pqk (bf16) into the fused plan's workspace, so that
its spine (spine_rs_o) can consume them as it consumes stage 1's.

Roles: one warpgroup of four warps does the chunk math, in order over the chunks; one warp loads
each chunk's K and q tiles by TMA into a two-stage ring (cutlass.pipeline.PipelineTmaAsync), so
the next chunk's tiles land while this one is computed, and reads its g / beta rows and scans g;
two more warps take the row norms from the landed tiles.  They hand gcum, beta, rk and rq over
through a second two-stage ring (cutlass.pipeline.PipelineAsync), so the warpgroup never waits on
a global load and holds no norm's registers: the four warps beside it are the fused kernel's I/O
warpgroup (load, norms, and a store warp there), whose registers setmaxnreg gives to the
other warpgroups (the _r104 build: the role within FlashInfer's 104).  Where recompute_wu spreads each
chunk over its own CTA (eight warps, four CTAs per SM, latency hidden by other CTAs), here every
step of a chunk is a dependent chain inside one warpgroup: this is the cost the fused kernel
would pay.

Rows >= L of a partial chunk: the TMA box brings the next sequence's rows (or zeros past T); their
beta is taken as 0 and their g as 0, so their rows of A are 0 and every column j >= L of A and P
multiplies a zero (A: i > j >= L has beta_i = 0; P: j <= i < L); nothing of them is stored.
"""
from __future__ import annotations

import enum

import cuda.bindings.driver as cuda

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
import cutlass.utils.hopper_helpers as sm90_utils
from cutlass import BFloat16, Float32, Int32
from cutlass.cute.nvgpu import OperandMajorMode, cpasync, warpgroup
from cutlass.tensor_utils import LayoutEnum

from cute_kernels import bf16_sumsq, fastexp, mma_tf32, tma, wgmma_acc
from cute_kernels.recompute_wu import gate_scan
from gdn_prefill import plan

C = plan.CHUNK                    # 64 tokens per chunk
DK = plan.HEAD_DIM_K              # 128
BLK = 16                          # diagonal block of the solve
HALF = C // 2
AS = C + 4                        # A / Tm row stride (fp32): 16-byte rows, conflict-free float4 rows
XS = HALF + 4                     # merge scratch row stride (fp32)
L2_EPS = 1e-6


class Role(enum.IntEnum):
    """Warp roles (first warp of each)."""
    INTRA = 0                     # warps 0-3: the chunk math
    LOAD = 4                      # warp 4: the K and q tiles of each chunk by TMA; g, beta and the scan
    NORMS = 5                     # warps 5, 6: rk, rq of each chunk's rows (warp 7: idle here, the store
                                  # warp of the fused kernel)


class Barrier(enum.IntEnum):
    """Named barriers (0 is the CTA's __syncthreads)."""
    INTRA = 1                     # the intra warpgroup's 128 threads


class IntraChunk:
    """One CTA per (sequence, value head); see the module docstring."""

    STAGES = 2                    # the K / q tile ring
    INTRA_THREADS = 128
    NORM_WARPS = 2
    THREADS = INTRA_THREADS + 128  # the role's warpgroup and the I/O warpgroup (setmaxnreg resizes whole ones)

    def __init__(self, write_out: bool = True, role_regs: int = 0):
        self.write_out = write_out                   # P and Tu to the workspace (else they stay in smem,
                                                     # as in the fused kernel: the role's own time)
        self.role_regs = role_regs                   # > 0: setmaxnreg sets the role's warpgroup to this
                                                     # and the I/O warpgroup to IO_REGS, as in a fused CTA
        self.tile_bytes = C * DK * 2
        self.tx_bytes = 2 * self.tile_bytes          # K and q of one chunk

    @staticmethod
    def can_implement(K: int, V: int, Hk: int, Hv: int, q_k_aligned16: bool) -> tuple[bool, str]:
        """What the kernel accepts (the launcher's guards check the same before any launch)."""
        if K != DK or V != plan.HEAD_DIM_V:
            return False, f"head dims must be {DK} (got K={K}, V={V})"
        if Hk <= 0 or Hv % Hk != 0:
            return False, f"Hv ({Hv}) must be a multiple of Hk ({Hk})"
        if not q_k_aligned16:
            return False, "q and k must have 16-byte aligned bases and token / head strides of 8 elements (TMA)"
        return True, ""

    IO_REGS = 56

    def _nbars(self) -> int:
        return 2 * self.STAGES * 2                   # full / empty per stage, two rings

    def smem_bytes(self) -> int:
        """_shared_storage's size, in its field order (plain Python: the build states it outside
        the DSL; the kernel asserts the two agree)."""
        def up(x, a):
            return (x + a - 1) // a * a
        off = 0
        gs = self.STAGES
        for size, align in ((2 * self.STAGES * C * DK, 1024), (2 * self.STAGES * C * DK, 1024),   # sk, sq
                            (4 * C * AS, 16), (4 * HALF * XS, 16),          # a, x
                            (2 * C * C, 128), (2 * C * C, 128),             # p, t
                            (4 * C * gs, 16), (4 * C * gs, 16), (4 * C * gs, 16), (4 * C * gs, 16),
                            (8 * self._nbars(), 8)):
            off = up(off, align) + size
        return up(off, 1024)

    # ------------------------------------------------------------------ layouts
    def _tile_layout(self):
        """(64 rows, 128 k, STAGES): K-major, 128-byte swizzle: the A and B operand of K K^T and
        Q K^T, as TMA writes it."""
        return sm90_utils.make_smem_layout_a(LayoutEnum.ROW_MAJOR, (C, C, DK), BFloat16, self.STAGES)

    def _shared_storage(self):
        def f32(n):
            return cute.struct.Align[cute.struct.MemRange[Float32, n], 16]

        fields = {
            "sk": cute.struct.Align[cute.struct.MemRange[BFloat16, self.STAGES * C * DK], 1024],
            "sq": cute.struct.Align[cute.struct.MemRange[BFloat16, self.STAGES * C * DK], 1024],
            "a": f32(C * AS), "x": f32(HALF * XS),
            "p": cute.struct.Align[cute.struct.MemRange[BFloat16, C * C], 128],
            "t": cute.struct.Align[cute.struct.MemRange[BFloat16, C * C], 128],
            "gc": f32(C * self.STAGES), "be": f32(C * self.STAGES), "rk": f32(C * self.STAGES),
            "rq": f32(C * self.STAGES),
            "bars": cute.struct.Align[cute.struct.MemRange[cutlass.Int64, self._nbars()], 8],
        }
        return cute.struct(type("IntraChunkStorage", (), {"__annotations__": fields}))

    def _mma(self):
        # G[i, j] = sum_d K[i, d] K[j, d] (and Q K^T): A, B K-major, the whole 64 x 64 in one warpgroup
        return sm90_utils.make_trivial_tiled_mma(BFloat16, BFloat16, OperandMajorMode.K, OperandMajorMode.K,
                                                 Float32, (1, 1, 1), tiler_mn=(C, C))

    # ------------------------------------------------------------------ launch
    @cute.jit
    def __call__(self, q: cute.Tensor, k: cute.Tensor, g: cute.Tensor, beta: cute.Tensor,
                 cu_seqlens: cute.Tensor, gcum: cute.Tensor, rq: cute.Tensor, rk: cute.Tensor,
                 beta32: cute.Tensor, tu: cute.Tensor, pqk: cute.Tensor, scale: Float32, use_qk_l2norm: Int32,
                 stream: cuda.CUstream):
        Hv = g.shape[1]
        N = cu_seqlens.shape[0] - 1
        one = cute.slice_(self._tile_layout(), (None, None, 0))
        load = cpasync.CopyBulkTensorTileG2SOp()
        tma_k, mK = cpasync.make_tiled_tma_atom(load, tma.view(k, [0, 2, 1]), one, (C, DK))
        tma_q, mQ = cpasync.make_tiled_tma_atom(load, tma.view(q, [0, 2, 1]), one, (C, DK))
        self.kernel(tma_k, mK, tma_q, mQ, g, beta, cu_seqlens, gcum, rq, rk, beta32, tu, pqk, scale,
                    use_qk_l2norm, Hv // k.shape[1]).launch(
            grid=[Hv, N, 1], block=[self.THREADS, 1, 1], stream=stream,
            smem=self.smem_bytes(), preferred_smem_carveout=100,
            # with role_regs, the launch bound a fused CTA of 512 threads has (128 registers), which
            # setmaxnreg then moves between the warpgroups (ptxas drops it without one)
            min_blocks_per_mp=2 if self.role_regs > 0 else 0)

    @cute.kernel
    def kernel(self, tma_k: cute.CopyAtom, mK: cute.Tensor, tma_q: cute.CopyAtom, mQ: cute.Tensor,
               g: cute.Tensor, beta: cute.Tensor, cu_seqlens: cute.Tensor, gcum: cute.Tensor, rq: cute.Tensor,
               rk: cute.Tensor, beta32: cute.Tensor, tu: cute.Tensor, pqk: cute.Tensor, scale: Float32,
               use_qk_l2norm: Int32, group: Int32):
        tidx, _, _ = cute.arch.thread_idx()
        hv, n, _ = cute.arch.block_idx()
        warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        Storage = self._shared_storage()
        assert Storage.size_in_bytes() == self.smem_bytes(), (Storage.size_in_bytes(), self.smem_bytes())
        storage = cutlass.utils.SmemAllocator().allocate(Storage)
        lay = self._tile_layout()
        assert cute.cosize(lay) == self.STAGES * C * DK
        sK = storage.sk.get_tensor(lay.outer, swizzle=lay.inner)
        sQ = storage.sq.get_tensor(lay.outer, swizzle=lay.inner)
        ring = pipeline.PipelineTmaAsync.create(
            num_stages=self.STAGES,
            producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, 1),
            consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread,
                                                     self.INTRA_THREADS // 32 + self.NORM_WARPS),
            tx_count=self.tx_bytes, barrier_storage=storage.bars.data_ptr())
        bos = cu_seqlens[n]
        eos = cu_seqlens[n + 1]
        nch = (eos - bos + C - 1) // C
        hk = hv // group
        gring = pipeline.PipelineAsync.create(
            num_stages=self.STAGES,
            producer_group=pipeline.CooperativeGroup(pipeline.Agent.Warp, 1 + self.NORM_WARPS),
            consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Warp, self.INTRA_THREADS // 32),
            barrier_storage=storage.bars.data_ptr() + 2 * self.STAGES)
        # each warpgroup resizes its registers at one instruction that dominates all of its roles' code
        if warp >= Role.LOAD:
            if cutlass.const_expr(self.role_regs > 0):
                cute.arch.setmaxregister_decrease(self.IO_REGS)
            if warp == Role.LOAD:
                self.load_role(ring, gring, storage, tma_k, mK, tma_q, mQ, sK, sQ, g, beta, gcum, beta32,
                               bos, eos, nch, hk, hv, tidx % 32)
            elif warp < Role.NORMS + self.NORM_WARPS:
                self.norm_role(ring, gring, storage, sK, sQ, rq, rk, use_qk_l2norm, bos, eos, nch, hv,
                               tidx - Role.NORMS * 32)
        else:
            if cutlass.const_expr(self.role_regs > 0):
                cute.arch.setmaxregister_decrease(self.role_regs)
            self.intra_role(ring, gring, storage, sK, sQ, tu, pqk, scale, bos, eos, nch, hv, tidx)

    # ------------------------------------------------------------------ roles
    @cute.jit
    def load_role(self, ring, gring, storage, tma_k, mK, tma_q, mQ, sK, sQ, g, beta, gcum, beta32,
                  bos: Int32, eos: Int32, nch: Int32, hk: Int32, hv: Int32, lane: Int32):
        """The K and q tiles of chunk i into ring stage i % STAGES, as soon as the role and the norm
        warps have released it; then its g / beta rows scanned into gate stage i % STAGES (gcum,
        beta fp32; lane: rows 2 lane, 2 lane + 1, 0 past L), and to the workspace, rows < L."""
        producer = ring.make_producer()
        gprod = gring.make_producer()
        sGr, sBr, _, _ = self._gate_ring(storage)
        for i in cutlass.range(nch, unroll=1):
            t0 = bos + i * C
            h = producer.acquire_and_advance()
            tma.load(tma_k, tma.gmem_tile(mK[None, None, hk], (t0, 0), (C, DK)), sK[None, None, h.index],
                     h.barrier, Int32(0), 1)
            tma.load(tma_q, tma.gmem_tile(mQ[None, None, hk], (t0, 0), (C, DK)), sQ[None, None, h.index],
                     h.barrier, Int32(0), 1)
            L = cutlass.min(eos - t0, C)
            c0, c1, b0, b1 = gate_scan(g, beta, t0, L, hv, lane)
            gh = gprod.acquire_and_advance()
            r0 = 2 * lane
            sGr[r0, gh.index] = c0
            sGr[r0 + 1, gh.index] = c1
            sBr[r0, gh.index] = b0
            sBr[r0 + 1, gh.index] = b1
            gh.commit()
            for r, c, b in ((r0, c0, b0), (r0 + 1, c1, b1)):
                if r < L:
                    gcum[t0 + r, hv] = c
                    beta32[t0 + r, hv] = b
        producer.tail()
        gprod.tail()

    @cute.jit
    def norm_role(self, ring, gring, storage, sK, sQ, rq, rk, use_qk_l2norm: Int32, bos: Int32, eos: Int32,
                  nch: Int32, hv: Int32, ntid: Int32):
        """rk, rq of chunk i's rows into gate stage i % STAGES and to the workspace (rows < L; 1
        without l2norm: the spine reads them whatever the flag, as stage 1 writes them).  Norm
        thread t (of 64) holds 8-column vectors of the k and q rows t // 16 + 4 m, m = 0..15
        (tma.rows_copy): 32 partial sums of squares that the 16 threads of its row group complete by
        one reduce-scatter (xor 8, 4, 2, 1: 30 shuffles where a butterfly per sum took 128); thread
        lg = t % 16 then owns sums 2 lg, 2 lg + 1, i.e. k (lg < 8) or q of rows t // 16 + 4 m,
        m = 2 lg % 16 + (0, 1).  They wait for the tiles even without l2norm: each release must
        follow its stage's fill (an early arrive would count toward the phase the role still reads)."""
        consumer = ring.make_consumer()
        gprod = gring.make_producer()
        _, _, sRr, sQr = self._gate_ring(storage)
        th = tma.rows_copy(DK, self.NORM_WARPS * 32).get_slice(ntid)
        tC = th.partition_S(cute.make_identity_tensor((C, DK)))
        lg = ntid % 16
        row0, _ = tC[(0, 0, 0)]
        row1, _ = tC[(0, 1, 0)]
        rows = [row0 + (row1 - row0) * ((2 * lg + e) % 16) for e in range(2)]
        for i in cutlass.range(nch, unroll=1):
            t0 = bos + i * C
            L = cutlass.min(eos - t0, C)
            h = consumer.wait_and_advance()
            r0 = Float32(1.0)
            r1 = Float32(1.0)
            if use_qk_l2norm != 0:
                ss = []
                for t in (sK[None, None, h.index], sQ[None, None, h.index]):
                    t_s = th.partition_S(t)
                    for m in cutlass.range_constexpr(cute.size(t_s, mode=[1])):
                        v = cute.make_rmem_tensor_like(t_s[(None, m, 0)], BFloat16)
                        cute.autovec_copy(t_s[(None, m, 0)], v)
                        vw = cute.recast_tensor(v, Int32)
                        ss.append(bf16_sumsq.sumsq_bf16x8(vw[0], vw[1], vw[2], vw[3]))
                assert len(ss) == 32
                k0, k1 = bf16_sumsq.reduce_scatter(ss, lg, (8, 4, 2, 1))
                r0 = cute.math.rsqrt(k0 + L2_EPS)
                r1 = cute.math.rsqrt(k1 + L2_EPS)
            h.release()
            rs = (r0, r1)
            gh = gprod.acquire_and_advance()
            for e in cutlass.range_constexpr(2):
                if lg < 8:
                    sRr[rows[e], gh.index] = rs[e]
                else:
                    sQr[rows[e], gh.index] = rs[e]
            gh.commit()
            for e in cutlass.range_constexpr(2):
                if rows[e] < L:
                    if lg < 8:
                        rk[t0 + rows[e], hv] = rs[e]
                    else:
                        rq[t0 + rows[e], hv] = rs[e]
        gprod.tail()

    @cute.jit
    def intra_role(self, ring, gring, storage, sK, sQ, tu, pqk, scale: Float32, bos: Int32, eos: Int32,
                   nch: Int32, hv: Int32, tidx: Int32):
        """The chunks in order: the two products on the tensor cores, their folds with the gate
        ring's gcum, beta, rk and rq (P staged in smem), the inverse, Tu staged in smem, both written
        out.  Every step ends at a barrier of the warpgroup (Barrier.INTRA)."""
        consumer = ring.make_consumer()
        gcons = gring.make_consumer()
        sA, sA2, sX, sP, sT = self._views(storage)
        sGr, sBr, sRr, sQr = self._gate_ring(storage)
        mma = self._mma()
        thr = mma.get_slice(tidx)
        accG = cute.make_rmem_tensor(thr.partition_shape_C((C, C)), Float32)
        accQ = cute.make_rmem_tensor(thr.partition_shape_C((C, C)), Float32)
        for i in cutlass.range(nch, unroll=1):
            t0 = bos + i * C
            L = cutlass.min(eos - t0, C)
            h = consumer.wait_and_advance()
            self.issue_products(mma, thr, accG, accQ, sK[None, None, h.index], sQ[None, None, h.index])
            warpgroup.wait_group(0)
            # the previous chunk's write_rows read sP, which the folds overwrite
            cute.arch.barrier(barrier_id=Barrier.INTRA, number_of_threads=self.INTRA_THREADS)
            h.release()
            gh = gcons.wait_and_advance()
            self.folds(thr, accG, accQ, sA2, self.pairs(sP), sGr[None, gh.index], sBr[None, gh.index],
                       sRr[None, gh.index], sQr[None, gh.index], scale)
            cute.arch.barrier(barrier_id=Barrier.INTRA, number_of_threads=self.INTRA_THREADS)
            gh.release()
            self.inverse(sA, sX, tidx)
            self.stage_tu(sA, sT, tidx)
            cute.arch.barrier(barrier_id=Barrier.INTRA, number_of_threads=self.INTRA_THREADS)
            if cutlass.const_expr(self.write_out):
                self.write_rows(sP, pqk, t0, L, hv, tidx)
                self.write_rows(sT, tu, t0, L, hv, tidx)

    def _gate_ring(self, storage):
        """The gate ring's gcum / beta / rk / rq tables: (row, stage)."""
        lay = cute.make_layout((C, self.STAGES), stride=(1, C))
        return tuple(t.get_tensor(lay) for t in (storage.gc, storage.be, storage.rk, storage.rq))

    @staticmethod
    def scratch(storage):
        """The role's fp32 shared memory, fields a and x of any storage that has them: A / Tm (and
        its float2 view) and the merge scratch."""
        sA = cute.make_tensor(storage.a.data_ptr(), cute.make_layout((C, C), stride=(AS, 1)))
        sA2 = cute.make_tensor(storage.a.data_ptr(), cute.make_layout((C, C // 2, 2), stride=(AS, 2, 1)))
        sX = cute.make_tensor(storage.x.data_ptr(), cute.make_layout((HALF, HALF), stride=(XS, 1)))
        return sA, sA2, sX

    @classmethod
    def _views(cls, storage):
        """The role's shared-memory tensors: scratch(), then the staged P and Tu (bf16)."""
        staged = [t.get_tensor(cute.make_layout((C, C), stride=(C, 1))) for t in (storage.p, storage.t)]
        return (*cls.scratch(storage), *staged)

    # ------------------------------------------------------------------ phases
    @cute.jit
    def issue_products(self, mma, thr, accG, accQ, sK1, sQ1):
        """G = K K^T and QK = Q K^T issued on warpgroup MMA (the first k-step overwrites the
        accumulators); the caller waits (warpgroup.wait_group)."""
        tKa = thr.make_fragment_A(thr.partition_A(sK1))
        tQa = thr.make_fragment_A(thr.partition_A(sQ1))
        tKb = thr.make_fragment_B(thr.partition_B(sK1))
        warpgroup.fence()
        for kb in cutlass.range_constexpr(cute.size(tKa, mode=[2])):
            mma.set(warpgroup.Field.ACCUMULATE, kb > 0)
            cute.gemm(mma, accG, tKa[None, None, kb], tKb[None, None, kb], accG)
        for kb in cutlass.range_constexpr(cute.size(tQa, mode=[2])):
            mma.set(warpgroup.Field.ACCUMULATE, kb > 0)
            cute.gemm(mma, accQ, tQa[None, None, kb], tKb[None, None, kb], accQ)
        warpgroup.commit_group()

    @staticmethod
    def pairs(sP):
        """(i, j // 2, j % 2) view of a (64, 64) bf16 tile: the folds store P's columns j, j + 1
        together.  sP's own layout and swizzle (row-major here; the fused kernel's wgmma B tile)
        place them: the pair stays contiguous under a 16-byte swizzle."""
        pair_of = cute.make_layout((C, C // 2, 2), stride=(1, 2 * C, C))       # -> (i, j) of the tile
        return cute.make_tensor(sP.iterator, cute.composition(sP.layout, pair_of))

    @cute.jit
    def folds(self, thr, accG, accQ, sA2, sP2, sG, sB, sR, sRq, scale: Float32, rP=None):
        """A = select(i > j, beta_i rk_i rk_j G_ij exp(gcum_i - gcum_j), 0) -> smem (fp32);
        P = select(j <= i, scale rq_i rk_j QK_ij exp(...), 0) -> bf16 -> smem (the exp shared).
        A thread's 32 values lie on 2 rows and 16 columns (wgmma_acc); columns j, j + 1 of a row
        leave as one 8-byte (A) and one 4-byte (P, sP2 = pairs(the tile)) store.  With rP (a bf16
        tensor of accQ's layout; sP2 then None), P stays there for the caller (the fused kernel
        stores it by stmatrix into its swizzled tile: the pairs' swizzled addresses cost the role
        registers it does not have)."""
        tc = thr.partition_C(cute.make_identity_tensor((C, C)))
        nc = cute.size(accG) // 2
        rows = [tc[wgmma_acc.first_of_row(h)][0] for h in range(2)]
        cols = [tc[wgmma_acc.first_of_col(c)][1] for c in range(nc)]
        g_row = [sG[r] for r in rows]
        br_row = [sB[r] * sR[r] for r in rows]
        q_row = [scale * sRq[r] for r in rows]
        pair = cute.make_rmem_tensor(2, Float32)
        ppair = cute.make_rmem_tensor(2, BFloat16)
        g_col = [None] * nc
        r_col = [None] * nc
        for e in cutlass.range_constexpr(cute.size(accG)):
            hh = wgmma_acc.row(e)
            c = wgmma_acc.col(e)
            if cutlass.const_expr(e % 4 == 0):
                for cc in (c, c + 1):
                    g_col[cc] = sG[cols[cc]]
                    r_col[cc] = sR[cols[cc]]
            i = rows[hh]
            j = cols[c]
            rx = r_col[c] * fastexp.exp(g_row[hh] - g_col[c])
            pair[e % 2] = Float32(cutlass.select_(i > j, accG[e] * br_row[hh] * rx, Float32(0.0)))
            p = BFloat16(cutlass.select_(i >= j, accQ[e] * q_row[hh] * rx, Float32(0.0)))
            if cutlass.const_expr(rP is None):
                ppair[e % 2] = p
            else:
                rP[e] = p
            if cutlass.const_expr(e % 2 == 1):
                sA2[i, j // 2, None].store(pair.load())
                if cutlass.const_expr(rP is None):
                    sP2[i, j // 2, None].store(ppair.load())

    @cute.jit
    def inverse(self, sA, sX, tidx: Int32, sEye=None):
        """Tm = (I + A)^-1 in place over sA, by 16 x 16 blocks (rows / columns of block b: 16 b ..):
        1. warps 0, 1: the diagonal blocks 2w, 2w + 1 by forward substitution (lane: one column);
        2. warps 2p, 2p + 1: the 32 x 32 merge of pair p, T_{2p+1,2p} = -D_{2p+1} (A_{2p+1,2p} D_{2p});
        3. all four warps: T_{[2,3],[0,1]} = -T_{[2,3],[2,3]} (A_{[2,3],[0,1]} T_{[0,1],[0,1]});
        the merges on mma.sync in one TF32 pass (mma_tf32), skipping k-steps of exact zeros.
        sEye (the fused kernel): 2 BLK - 1 floats, 1 at BLK - 1 and 0 elsewhere, so that row ii's
        right-hand side e_jj[ii] is one shared load: as 16 selects of a 0 / 1 float they were
        loop invariants that ptxas hoisted out of the chunk loop, 16 registers the fused role
        spilled."""
        warp = tidx // 32
        lane = tidx % 32
        xcol = cute.make_rmem_tensor(BLK, Float32)
        if warp < 2:
            rb = (2 * warp + lane // BLK) * BLK
            jj = lane % BLK
            for ii in cutlass.range_constexpr(BLK):
                part = Float32(0.0)
                for m in cutlass.range_constexpr(ii):
                    part = part + sA[rb + ii, rb + m] * xcol[m]
                if cutlass.const_expr(sEye is None):
                    diag = Float32(0.0)
                    if jj == ii:
                        diag = Float32(1.0)
                    xcol[ii] = diag - part
                else:
                    xcol[ii] = sEye[ii - jj + BLK - 1] - part
            cute.arch.sync_warp()
            for ii in cutlass.range_constexpr(BLK):
                sA[rb + ii, rb + jj] = xcol[ii]
        cute.arch.barrier(barrier_id=Barrier.INTRA, number_of_threads=self.INTRA_THREADS)
        p = warp // 2
        wl = warp % 2
        lo = 2 * BLK * p
        hi = lo + BLK
        acc = cute.make_rmem_tensor(4, Float32)
        acc.fill(0.0)
        mma_tf32.tile_16x8(acc, sA, hi, lo, sA, lo, lo + 8 * wl, wl, 2, lane, 2)
        mma_tf32.store_tile_16x8(acc, sX, BLK * p, 8 * wl, lane, False)
        cute.arch.barrier(barrier_id=Barrier.INTRA, number_of_threads=self.INTRA_THREADS)
        acc.fill(0.0)
        mma_tf32.tile_16x8(acc, sA, hi, hi, sX, BLK * p, 8 * wl, 0, 2, lane, 2)
        mma_tf32.store_tile_16x8(acc, sA, hi, lo + 8 * wl, lane, True)
        cute.arch.barrier(barrier_id=Barrier.INTRA, number_of_threads=self.INTRA_THREADS)
        # 3: warp w owns the column block nj = w of both row blocks mi = 0, 1 of each product
        for mi in cutlass.range_constexpr(2):
            acc.fill(0.0)
            mma_tf32.tile_16x8(acc, sA, HALF + BLK * mi, 0, sA, 0, 8 * warp, warp, 4, lane, 4)
            mma_tf32.store_tile_16x8(acc, sX, BLK * mi, 8 * warp, lane, False)
        cute.arch.barrier(barrier_id=Barrier.INTRA, number_of_threads=self.INTRA_THREADS)
        for mi in cutlass.range_constexpr(2):
            acc.fill(0.0)
            mma_tf32.tile_16x8(acc, sA, HALF + BLK * mi, HALF, sX, 0, 8 * warp, 0, 2 * mi + 2, lane, 4)
            mma_tf32.store_tile_16x8(acc, sA, HALF + BLK * mi, 8 * warp, lane, True)
        cute.arch.barrier(barrier_id=Barrier.INTRA, number_of_threads=self.INTRA_THREADS)

    @cute.jit
    def stage_tu(self, sA, sT, tidx: Int32):
        """Tu = bf16(Tm) -> smem (the fused kernel's chains read it there): thread t, row t // 2,
        columns 32 (t % 2) .., four 16-byte stores."""
        r = tidx // 2
        c0 = 32 * (tidx % 2)
        sT8 = cute.make_tensor(sT.iterator, cute.make_layout((C, C // 8, 8), stride=(C, 8, 1)))
        for v in cutlass.range_constexpr(4):
            x = cute.make_rmem_tensor(8, BFloat16)
            for e in cutlass.range_constexpr(8):
                x[e] = BFloat16(sA[r, c0 + 8 * v + e])
            sT8[r, c0 // 8 + v, None].store(x.load())

    @cute.jit
    def write_rows(self, sX, out, t0: Int32, L: Int32, hv: Int32, tidx: Int32):
        """Rows i < L of the staged 64 x 64 bf16 tile -> out[t0 + i, hv, :] (16-byte copies)."""
        cp = tma.rows_copy(C)
        th = cp.get_slice(tidx)
        tS = th.partition_S(sX)
        tC = th.partition_S(cute.make_identity_tensor((C, C)))
        gO = cute.domain_offset((t0, 0), out[None, hv, None])
        tG = th.partition_D(cute.local_tile(gO, (C, C), (0, 0)))
        for m in cutlass.range_constexpr(cute.size(tS, mode=[1])):
            if tC[0, m, 0][0] < L:
                cute.copy(cp, tS[None, m, None], tG[None, m, None])


# --------------------------------------------------------------------------- the build's interface
# (cute_kernels.aot: parameter names are gdn_problem_t fields)
THREADS = IntraChunk.THREADS


def SMEM_BYTES(write_out: bool = True, role_regs: int = 0) -> int:  # noqa: N802
    return IntraChunk(write_out, role_regs).smem_bytes()


def launch_for(write_out: bool = True, role_regs: int = 0):
    kern = IntraChunk(write_out, role_regs)

    @cute.jit
    def intra_chunk(q: cute.Tensor, k: cute.Tensor, g: cute.Tensor, beta: cute.Tensor, cu_seqlens: cute.Tensor,
                    gcum: cute.Tensor, rq: cute.Tensor, rk: cute.Tensor, beta32: cute.Tensor, tu: cute.Tensor,
                    pqk: cute.Tensor, scale: Float32, use_qk_l2norm: Int32, stream: cuda.CUstream):
        kern(q, k, g, beta, cu_seqlens, gcum, rq, rk, beta32, tu, pqk, scale, use_qk_l2norm, stream)

    return intra_chunk


VARIANTS: dict[str, dict] = {
    # the fused plan's stage 1 in one warpgroup per (sequence, head): issue 42's go / no-go (beta bf16,
    # the vLLM / FLA convention; the fused plan's aligned q, k)
    "intra_chunk": {"write_out": True},
    # the same with P and Tu left in shared memory: the role's time as the fused kernel would see it
    "intra_chunk_smem": {"write_out": False},
    # ... with the role's warpgroup held to 104 registers by setmaxnreg (FlashInfer's split of a fused
    # CTA, 24 / 192 / 192 / 104: what two chain warpgroups at 192 leave it)
    "intra_chunk_smem_r104": {"write_out": False, "role_regs": 104},
}


def fake_args(dims, write_out: bool = True, role_regs: int = 0) -> list:
    from cute_kernels import fake
    qk = {"stride_div": 8, "align": 16}
    return [fake.qk(dims, **qk), fake.qk(dims, **qk), fake.th(dims, Float32), fake.th(dims, BFloat16),
            fake.cu_seqlens(dims), fake.ws_th(dims), fake.ws_th(dims), fake.ws_th(dims), fake.ws_th(dims),
            fake.ws_tvd(dims, C), fake.ws_tvd(dims, C), fake.f32(128 ** -0.5), fake.i32(0)]
