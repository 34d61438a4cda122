"""Fake tensors that describe the kernels' C ABI to `cute.compile` (no GPU, no data).

One `Dims` object per compiled variant holds the dynamic extents; every tensor
that shares an extent reuses the same SymInt so the compiler knows they agree.
Divisibility declared here is an assumption the kernels may exploit: the Cython
guards (pyx/gdn_prefill/validate.pxi) enforce exactly these rules before any launch.
"""
from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import BFloat16, Float32, Int32

from gdn_prefill.grids import CHUNK, HEAD_DIM_K, HEAD_DIM_V


class Dims:
    """The dynamic problem extents: T tokens, N sequences (N1 = N + 1), heads, slots."""

    def __init__(self):
        self.T = cute.sym_int(symbol="T")
        self.N1 = cute.sym_int(symbol="N1")       # len(cu_seqlens) = N + 1
        self.N = cute.sym_int(symbol="N")         # len(state_indices)
        self.Hk = cute.sym_int(symbol="Hk")
        self.Hv = cute.sym_int(symbol="Hv")
        self.CB = cute.sym_int(symbol="CB")       # chunk slots, ceil(T/64) + N
        self.P = cute.sym_int(symbol="P")         # state slots
        self.M = cute.sym_int(symbol="M")         # segment slots of the segmented plan
        self.M2 = cute.sym_int(symbol="M2")       # 2 M: a map A and a map B per segment slot


def _stride(divisibility: int = 1):
    return cute.sym_int64(divisibility=divisibility)


def qk(dims: Dims, dtype=BFloat16, stride_div: int = 1, align: int | None = None):
    """q or k: [T, Hk, K], last dim contiguous, token and head strides free."""
    return cute.runtime.make_fake_tensor(
        dtype, (dims.T, dims.Hk, HEAD_DIM_K), stride=(_stride(stride_div), _stride(stride_div), 1),
        assumed_align=align or dtype.width // 8)


def tv(dims: Dims, dtype=BFloat16, stride_div: int = 1, align: int | None = None, d: int = HEAD_DIM_V):
    """v or out (or any user [T, Hv, D] tensor): last dim contiguous, strides free."""
    return cute.runtime.make_fake_tensor(
        dtype, (dims.T, dims.Hv, d), stride=(_stride(stride_div), _stride(stride_div), 1),
        assumed_align=align or dtype.width // 8)


def th(dims: Dims, dtype=Float32):
    """g or beta: [T, Hv] with any token and head stride (e.g. interleaved in [T, 2*Hv])."""
    return cute.runtime.make_fake_tensor(dtype, (dims.T, dims.Hv), stride=(_stride(), _stride()),
                                         assumed_align=dtype.width // 8)


def ws_th(dims: Dims):
    """Workspace gcum / rq / rk: [T, Hv] fp32 stored head-major (strides 1, T): a chunk's 64 rows
    of one head are 256 contiguous bytes, so the per-row reads of the spines and fwd_o and the
    writes of recompute_wu are coalesced (token-major, each row would be its own 32-byte sector)."""
    return cute.runtime.make_fake_tensor(Float32, (dims.T, dims.Hv), stride=(1, _stride()), assumed_align=16)


def ws_tvd(dims: Dims, d: int):
    """Workspace w / u / vnew: [T, Hv, d] bf16, compact (token stride = Hv*d)."""
    return cute.runtime.make_fake_tensor(BFloat16, (dims.T, dims.Hv, d), stride=(_stride(d), d, 1),
                                         assumed_align=16)


def ws_h(dims: Dims):
    """Workspace h: [CB, Hv, K, V] bf16 compact, the state at every chunk's entry."""
    kv = HEAD_DIM_K * HEAD_DIM_V
    return cute.runtime.make_fake_tensor(BFloat16, (dims.CB, dims.Hv, HEAD_DIM_K, HEAD_DIM_V),
                                         stride=(_stride(kv), kv, HEAD_DIM_V, 1), assumed_align=16)


def ws_states(dims: Dims, rows):
    """Workspace maps / seg_state: [rows, Hv, K, V] fp32 compact, states S[k, v] (the segmented
    plan's maps A, B of every segment slot, and the composed state at each segment's entry)."""
    kv = HEAD_DIM_K * HEAD_DIM_V
    return cute.runtime.make_fake_tensor(Float32, (rows, dims.Hv, HEAD_DIM_K, HEAD_DIM_V),
                                         stride=(_stride(kv), kv, HEAD_DIM_V, 1), assumed_align=16)


def ws_ready(dims: Dims):
    """Workspace ready: [CB, Hv] int32 compact, one flag per (chunk slot, value head) (overlap plan)."""
    return cute.runtime.make_fake_tensor(Int32, (dims.CB, dims.Hv), stride=(_stride(), 1), assumed_align=16)


def ws_order(dims: Dims):
    """Workspace order: [N] int32, the sequences longest first (the fused plan's spine grid)."""
    return cute.runtime.make_fake_tensor(Int32, (dims.N,), stride=(1,), assumed_align=16)


def cu_seqlens(dims: Dims):
    return cute.runtime.make_fake_tensor(Int32, (dims.N1,), stride=(1,), assumed_align=4)


def state_indices(dims: Dims):
    return cute.runtime.make_fake_tensor(Int32, (dims.N,), stride=(1,), assumed_align=4)


def state(dims: Dims, layout: str, dtype=Float32):
    """state: logical S[k, v] view of a [P, Hv, K, V] ("kv") or [P, Hv, V, K] ("vk") pool, fp32 or
    bf16 (each head's block 16-byte aligned)."""
    inner = (HEAD_DIM_V, 1) if layout == "kv" else (1, HEAD_DIM_K)
    return cute.runtime.make_fake_tensor(dtype, (dims.P, dims.Hv, HEAD_DIM_K, HEAD_DIM_V),
                                         stride=(_stride(), _stride()) + inner, assumed_align=16)


def checkpoint_pool(dims: Dims, layout: str, dtype=Float32):
    """checkpoint_pool: a pool as `state` (its layout and type) with a slot count of its own (the
    launcher binds `state` itself when the caller gives no separate pool)."""
    inner = (HEAD_DIM_V, 1) if layout == "kv" else (1, HEAD_DIM_K)
    return cute.runtime.make_fake_tensor(dtype, (cute.sym_int(symbol="PC"), dims.Hv, HEAD_DIM_K, HEAD_DIM_V),
                                         stride=(_stride(), _stride()) + inner, assumed_align=16)


def has_initial(dims: Dims):
    """has_initial: [N] one byte per sequence (bool or uint8), any stride: 0 = start from zero."""
    return cute.runtime.make_fake_tensor(cutlass.Uint8, (cute.sym_int(symbol="NH"),), stride=(_stride(),),
                                         assumed_align=1)


def f32(value: float = 1.0):
    return Float32(value)


def i32(value: int = 0):
    return Int32(value)


def checkpoints(dims: Dims):
    """checkpoints: [N, J] int32, last dim contiguous, row stride free (the state pool's slot of
    sequence n's j-th checkpoint, -1 = none)."""
    return cute.runtime.make_fake_tensor(Int32, (dims.N, cute.sym_int(symbol="J")), stride=(_stride(), 1),
                                         assumed_align=4)


def spine_args(dims: Dims, layout: str, sdt=Float32) -> list:
    """The parameter list every spine build starts with (spine_wgmma, spine_rs; names: gdn_problem_t
    fields), in order; `sdt` the pool's element type."""
    return [
        qk(dims, stride_div=8, align=16),      # q: TMA source (spine_rs) -> 16 B aligned
        qk(dims, stride_div=8, align=16),      # k: TMA source -> 16 B aligned base and strides
        ws_tvd(dims, HEAD_DIM_K),              # w
        ws_tvd(dims, HEAD_DIM_V),              # u
        ws_tvd(dims, CHUNK),                   # pqk
        ws_th(dims),                           # gcum
        ws_th(dims),                           # rq
        ws_th(dims),                           # rk
        cu_seqlens(dims),
        state(dims, layout, sdt),
        state_indices(dims),
        ws_tvd(dims, HEAD_DIM_V),              # vnew
        ws_h(dims),                            # h
        tv(dims, stride_div=8, align=16),      # out: TMA destination (spine_rs)
        f32(1.0),                              # scale
        i32(0),                                # has_state
        i32(0),                                # use_state_indices
        checkpoints(dims),                     # checkpoints [N, J]
        i32(0),                                # checkpoint_chunks
        state(dims, layout, sdt),              # initial_state (state_in 2)
        i32(1),                                # state_in
        has_initial(dims),                     # has_initial [N] (state_in 3, 4)
        checkpoint_pool(dims, layout, sdt),
    ]
