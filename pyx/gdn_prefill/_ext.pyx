# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The typed entry point of gdn-prefill: validate -> pack -> launch.

`gdn_prefill_raw` is the one implementation of every guard and of the launch
sequence; the Python `prefill` / `explain` fill a gdn_problem_t from torch tensors
and call it (or its planning half).  Nothing here reads device memory, so a call
never synchronises with the host and can be captured in a CUDA graph.
"""
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t, uintptr_t
from cpython.exc cimport PyErr_Clear
from cpython.pycapsule cimport PyCapsule_GetPointer, PyCapsule_IsValid
from libc.stdio cimport snprintf
from libc.string cimport memset
from libc.math cimport isfinite

from gdn_prefill.gdn_abi cimport *

import logging
import numbers as _numbers
import operator as _operator
import os

from gdn_prefill import errors as _errors
from gdn_prefill import plan as _plan

_log = logging.getLogger("gdn_prefill")

cdef enum:
    MSG_CAP = 512
    NUM_SPINES = 3          # index by GDN_SPINE_*; 0 (auto) unused
    NUM_LAYOUTS = 2
    NUM_SPINE_WG = 2        # spine builds by warpgroups per CTA (index warpgroups - 1)

# ----------------------------------------------------------------------------- variants
# Variant ids in the launch table, looked up once at import (-1: not compiled in).
# Stages 1 and 3 come in two builds: any strides (2-byte loads), and "_a16" for q/k/v/out
# whose base pointers are 16-byte aligned and token/head strides multiples of 8 elements
# (16-byte cp.async loads and stores; the usual case).  _aligned16() picks one per call.
cdef int _v_wu[2][2]      # [beta is bf16][aligned]
_v_wu[0][0] = gdn_variant_id(b"recompute_wu_bf16_betaf32")
_v_wu[1][0] = gdn_variant_id(b"recompute_wu_bf16_betabf16")
_v_wu[0][1] = gdn_variant_id(b"recompute_wu_bf16_betaf32_a16")
_v_wu[1][1] = gdn_variant_id(b"recompute_wu_bf16_betabf16_a16")
cdef int _v_fwd_o[2]      # [aligned]
_v_fwd_o[0] = gdn_variant_id(b"fwd_o_bf16")
_v_fwd_o[1] = gdn_variant_id(b"fwd_o_bf16_a16")
# The wgmma spine comes in two builds: 1 warpgroup per CTA (spine_wgmma_<layout>) and 2
# warpgroups sharing one W/K copy (spine_wgmma_wg2_<layout>); _spine_warpgroups() picks one per
# call from N and Hv.  The scalar spine has one build (both entries).
cdef int _v_spine[NUM_SPINES][NUM_LAYOUTS][NUM_SPINE_WG]   # [GDN_SPINE_*][GDN_STATE_*][warpgroups - 1]
cdef int _wgi
for _wgi in range(NUM_SPINE_WG):
    _v_spine[GDN_SPINE_AUTO][GDN_STATE_KV][_wgi] = -1
    _v_spine[GDN_SPINE_AUTO][GDN_STATE_VK][_wgi] = -1
    _v_spine[GDN_SPINE_SCALAR][GDN_STATE_KV][_wgi] = gdn_variant_id(b"spine_scalar_kv")
    _v_spine[GDN_SPINE_SCALAR][GDN_STATE_VK][_wgi] = gdn_variant_id(b"spine_scalar_vk")
_v_spine[GDN_SPINE_WGMMA][GDN_STATE_KV][0] = gdn_variant_id(b"spine_wgmma_kv")
_v_spine[GDN_SPINE_WGMMA][GDN_STATE_VK][0] = gdn_variant_id(b"spine_wgmma_vk")
_v_spine[GDN_SPINE_WGMMA][GDN_STATE_KV][1] = gdn_variant_id(b"spine_wgmma_wg2_kv")
_v_spine[GDN_SPINE_WGMMA][GDN_STATE_VK][1] = gdn_variant_id(b"spine_wgmma_wg2_vk")
# The fused plan (spine="wgmma" with q, k, v, out 16-byte aligned): recompute_wu writes the
# in-chunk attention (pqk) and Tu = (I + A)^-1 diag(beta) (tu) instead of W and U, and the spine
# forms Vnew from Tu and V and computes the output itself (spine_rs_o_*: the state in the
# registers of one warpgroup per 64 state columns, every regime): two launches, no W / U / h /
# vnew round trip through HBM, no fwd_o.  _fused_guard() decides per call.
cdef int _v_wu_pqk[2]     # [beta is bf16]
_v_wu_pqk[0] = gdn_variant_id(b"recompute_wu_bf16_betaf32_a16_pqk")
_v_wu_pqk[1] = gdn_variant_id(b"recompute_wu_bf16_betabf16_a16_pqk")
# Three builds of the fused spine: solo (one CTA per 64 state columns), pair (a head's two CTAs as
# a cluster that multicasts the tiles both load) and dual (one CTA per head, a consumer warpgroup
# per 64 state columns); _rs_build() picks one per call (from N, Hv and the overlap rule).
cdef enum:
    RS_SOLO = 0
    RS_PAIR = 1
    RS_DUAL = 2
    NUM_RS_BUILDS = 3
_RS_BUILDS = _plan.RS_BUILDS                              # their names, by code
assert len(_RS_BUILDS) == NUM_RS_BUILDS
cdef int _v_spine_o[NUM_LAYOUTS][NUM_RS_BUILDS]            # [GDN_STATE_*][RS_*]
_v_spine_o[GDN_STATE_KV][RS_SOLO] = gdn_variant_id(b"spine_rs_o_kv")
_v_spine_o[GDN_STATE_VK][RS_SOLO] = gdn_variant_id(b"spine_rs_o_vk")
_v_spine_o[GDN_STATE_KV][RS_PAIR] = gdn_variant_id(b"spine_rs_o_pair_kv")
_v_spine_o[GDN_STATE_VK][RS_PAIR] = gdn_variant_id(b"spine_rs_o_pair_vk")
_v_spine_o[GDN_STATE_KV][RS_DUAL] = gdn_variant_id(b"spine_rs_o_dual_kv")
_v_spine_o[GDN_STATE_VK][RS_DUAL] = gdn_variant_id(b"spine_rs_o_dual_vk")

SPINES = {"auto": GDN_SPINE_AUTO, "scalar": GDN_SPINE_SCALAR, "wgmma": GDN_SPINE_WGMMA}
SPINE_NAMES = {GDN_SPINE_SCALAR: "scalar", GDN_SPINE_WGMMA: "wgmma"}
STATE_LAYOUTS = {"kv": GDN_STATE_KV, "vk": GDN_STATE_VK}


def compiled_variants():
    """Names of the kernel variants linked into this build."""
    return [gdn_variant_name(i).decode() for i in range(gdn_num_variants())]


# ----------------------------------------------------------------------------- guards
cdef const char *_dtype_name(int d) noexcept nogil:
    if d == GDN_DTYPE_BF16:
        return "bfloat16"
    if d == GDN_DTYPE_F16:
        return "float16"
    if d == GDN_DTYPE_F32:
        return "float32"
    if d == GDN_DTYPE_I32:
        return "int32"
    return "an unsupported dtype"


cdef int64_t _elsize(int d) noexcept nogil:
    return 2 if (d == GDN_DTYPE_BF16 or d == GDN_DTYPE_F16) else 4


cdef int _need(const gdn_tensor_t *t, const char *name, int rank, char *msg) noexcept nogil:
    if t.rank == 0:
        snprintf(msg, MSG_CAP, "%s: a tensor is required", name)
        return GDN_ERR_ARGUMENT
    if t.rank != rank:
        snprintf(msg, MSG_CAP, "%s: must have %d dims, got %d", name, rank, t.rank)
        return GDN_ERR_SHAPE
    return GDN_OK


cdef int _dtype(const gdn_tensor_t *t, const char *name, int want, int alt, char *msg) noexcept nogil:
    if t.dtype == want or (alt != 0 and t.dtype == alt):
        return GDN_OK
    if alt != 0:
        snprintf(msg, MSG_CAP, "%s: dtype must be %s or %s, got %s", name, _dtype_name(want),
                 _dtype_name(alt), _dtype_name(t.dtype))
    else:
        snprintf(msg, MSG_CAP, "%s: dtype must be %s, got %s", name, _dtype_name(want), _dtype_name(t.dtype))
    return GDN_ERR_DTYPE


cdef int _dim(const gdn_tensor_t *t, const char *name, int mode, int64_t want, const char *what,
              char *msg) noexcept nogil:
    if t.shape[mode] == want:
        return GDN_OK
    snprintf(msg, MSG_CAP, "%s: dim %d (%s) is %lld, expected %lld", name, mode, what,
             <long long>t.shape[mode], <long long>want)
    return GDN_ERR_SHAPE


cdef int _layout(const gdn_tensor_t *t, const char *name, bint contiguous_last, char *msg) noexcept nogil:
    """No negative strides, base aligned to the element size, last dim contiguous if asked."""
    cdef int i
    cdef int64_t es = _elsize(t.dtype)
    for i in range(t.rank):
        if t.stride[i] < 0:
            snprintf(msg, MSG_CAP, "%s: stride of dim %d is %lld; negative strides are not supported",
                     name, i, <long long>t.stride[i])
            return GDN_ERR_LAYOUT
    if contiguous_last and t.shape[t.rank - 1] > 1 and t.stride[t.rank - 1] != 1:
        snprintf(msg, MSG_CAP, "%s: last dim has stride %lld; it must be contiguous (stride 1)",
                 name, <long long>t.stride[t.rank - 1])
        return GDN_ERR_LAYOUT
    if (<uintptr_t>t.data) % es != 0:
        snprintf(msg, MSG_CAP, "%s: data pointer is not aligned to its %lld-byte elements", name, <long long>es)
        return GDN_ERR_LAYOUT
    return GDN_OK


cdef void _extent(const gdn_tensor_t *t, uintptr_t *lo, uintptr_t *hi) noexcept nogil:
    """Byte range [lo, hi) the tensor may touch (empty if any extent is 0)."""
    cdef int i
    cdef int64_t last = 0
    lo[0] = <uintptr_t>t.data
    hi[0] = lo[0]
    if t.data == NULL:
        return
    for i in range(t.rank):
        if t.shape[i] == 0:
            return
        last += (t.shape[i] - 1) * t.stride[i]
    hi[0] = lo[0] + <uintptr_t>((last + 1) * _elsize(t.dtype))


cdef int _no_overlap(const gdn_tensor_t *a, const char *an, const gdn_tensor_t *b, const char *bn,
                     char *msg) noexcept nogil:
    cdef uintptr_t alo, ahi, blo, bhi
    _extent(a, &alo, &ahi)
    _extent(b, &blo, &bhi)
    if alo < ahi and blo < bhi and alo < bhi and blo < ahi:
        snprintf(msg, MSG_CAP, "%s: overlaps the memory of %s; outputs must not alias inputs", an, bn)
        return GDN_ERR_ALIAS
    return GDN_OK


cdef int _no_self_overlap(const gdn_tensor_t *t, const char *name, char *msg) noexcept nogil:
    """An output's elements must be distinct memory (CTAs write them concurrently): with the modes
    of extent > 1 sorted by stride, each stride must step past everything the smaller ones span.
    Sufficient and, for the layouts the kernels take (last dim contiguous), exact."""
    cdef int order[GDN_MAX_RANK]
    cdef int i, j, m = 0, tmp
    cdef int64_t span = 0
    for i in range(t.rank):
        if t.shape[i] > 1:
            order[m] = i
            m += 1
    for i in range(1, m):                          # insertion sort by stride (at most 4 modes)
        j = i
        while j > 0 and t.stride[order[j - 1]] > t.stride[order[j]]:
            tmp = order[j - 1]
            order[j - 1] = order[j]
            order[j] = tmp
            j -= 1
    for i in range(m):
        if t.stride[order[i]] <= span:
            snprintf(msg, MSG_CAP, "%s: dim %d (stride %lld) overlaps the elements of the smaller strides "
                     "(they span %lld elements); an output's elements must not share memory",
                     name, order[i], <long long>t.stride[order[i]], <long long>(span + 1))
            return GDN_ERR_LAYOUT
        span += (t.shape[order[i]] - 1) * t.stride[order[i]]
    return GDN_OK


cdef int _grid_fits(int64_t T, int64_t N, int64_t Hv, char *msg) noexcept nogil:
    """Every launch of every plan fits CUDA's grid limits: grid.y (the unfused spines' and fwd_o's
    heads) <= 65,535, grid.x (recompute_wu's chunk slots x heads, the fused spine's 64-column
    blocks) <= 2^31 - 1 (plan.py's grid functions)."""
    cdef int64_t blocks = max(_chunk_slots(T, N), (N + 1) * (GDN_HEAD_DIM_V // GDN_RS_SPINE_VBLOCK)) * Hv
    if Hv > 65535:
        snprintf(msg, MSG_CAP, "v: %lld value heads exceed the 65,535 a launch's grid.y can hold", <long long>Hv)
        return GDN_ERR_SHAPE
    if blocks > 0x7fffffff:
        snprintf(msg, MSG_CAP, "v: %lld value heads x %lld chunk slots need %lld blocks; a launch's grid.x holds "
                 "at most 2^31 - 1", <long long>Hv, <long long>_chunk_slots(T, N), <long long>blocks)
        return GDN_ERR_SHAPE
    return GDN_OK


cdef int _validate(const gdn_problem_t *p, int state_layout, char *msg) noexcept nogil:
    """Every rule of docs/DESIGN.md §2 that does not depend on the spine."""
    cdef int rc
    cdef int64_t T, Hk, Hv, N
    if state_layout != GDN_STATE_KV and state_layout != GDN_STATE_VK:
        snprintf(msg, MSG_CAP, "state_layout: must be 'kv' or 'vk'")
        return GDN_ERR_ARGUMENT
    # presence and rank
    rc = _need(&p.q, "q", 3, msg)
    if rc: return rc
    rc = _need(&p.k, "k", 3, msg)
    if rc: return rc
    rc = _need(&p.v, "v", 3, msg)
    if rc: return rc
    rc = _need(&p.g, "g", 2, msg)
    if rc: return rc
    rc = _need(&p.beta, "beta", 2, msg)
    if rc: return rc
    rc = _need(&p.out, "out", 3, msg)
    if rc: return rc
    rc = _need(&p.cu_seqlens, "cu_seqlens", 1, msg)
    if rc: return rc
    if p.state.rank != 0:
        rc = _need(&p.state, "state", 4, msg)
        if rc: return rc
    if p.state_indices.rank != 0:
        rc = _need(&p.state_indices, "state_indices", 1, msg)
        if rc: return rc
        if p.state.rank == 0:
            snprintf(msg, MSG_CAP, "state_indices: given without a state pool to index")
            return GDN_ERR_ARGUMENT
    # dtypes
    rc = _dtype(&p.q, "q", GDN_DTYPE_BF16, 0, msg)
    if rc: return rc
    rc = _dtype(&p.k, "k", GDN_DTYPE_BF16, 0, msg)
    if rc: return rc
    rc = _dtype(&p.v, "v", GDN_DTYPE_BF16, 0, msg)
    if rc: return rc
    rc = _dtype(&p.out, "out", GDN_DTYPE_BF16, 0, msg)
    if rc: return rc
    rc = _dtype(&p.g, "g", GDN_DTYPE_F32, 0, msg)
    if rc: return rc
    rc = _dtype(&p.beta, "beta", GDN_DTYPE_F32, GDN_DTYPE_BF16, msg)
    if rc: return rc
    rc = _dtype(&p.cu_seqlens, "cu_seqlens", GDN_DTYPE_I32, 0, msg)
    if rc: return rc
    if p.state.rank != 0:
        rc = _dtype(&p.state, "state", GDN_DTYPE_F32, 0, msg)
        if rc: return rc
    if p.state_indices.rank != 0:
        rc = _dtype(&p.state_indices, "state_indices", GDN_DTYPE_I32, 0, msg)
        if rc: return rc
    # shapes
    T = p.q.shape[0]
    Hk = p.q.shape[1]
    Hv = p.v.shape[1]
    N = p.cu_seqlens.shape[0] - 1
    if T < 1:
        snprintf(msg, MSG_CAP, "q: has %lld tokens; at least 1 is required", <long long>T)
        return GDN_ERR_SHAPE
    if T > 0x3fffffff:
        snprintf(msg, MSG_CAP, "q: %lld tokens exceed the int32 index range of the kernels", <long long>T)
        return GDN_ERR_SHAPE
    if N < 1:
        snprintf(msg, MSG_CAP, "cu_seqlens: must hold N+1 >= 2 offsets, got %lld", <long long>(N + 1))
        return GDN_ERR_SHAPE
    if N > GDN_MAX_SEQUENCES:
        snprintf(msg, MSG_CAP, "cu_seqlens: %lld sequences exceed the %d a call can hold (the kernels' "
                 "chunk-slot search over cu_seqlens)", <long long>N, <int>GDN_MAX_SEQUENCES)
        return GDN_ERR_SHAPE
    rc = _dim(&p.q, "q", 2, GDN_HEAD_DIM_K, "head dim K; the compiled tile is 128", msg)
    if rc: return rc
    rc = _dim(&p.k, "k", 0, T, "tokens, as in q", msg)
    if rc: return rc
    rc = _dim(&p.k, "k", 1, Hk, "key heads, as in q", msg)
    if rc: return rc
    rc = _dim(&p.k, "k", 2, GDN_HEAD_DIM_K, "head dim K; the compiled tile is 128", msg)
    if rc: return rc
    rc = _dim(&p.v, "v", 0, T, "tokens, as in q", msg)
    if rc: return rc
    rc = _dim(&p.v, "v", 2, GDN_HEAD_DIM_V, "head dim V; the compiled tile is 128", msg)
    if rc: return rc
    if Hk < 1 or Hv < 1 or Hv % Hk != 0:
        snprintf(msg, MSG_CAP, "v: %lld value heads is not a positive multiple of the %lld key heads of q/k",
                 <long long>Hv, <long long>Hk)
        return GDN_ERR_SHAPE
    rc = _grid_fits(T, N, Hv, msg)
    if rc: return rc
    rc = _dim(&p.out, "out", 0, T, "tokens, as in v", msg)
    if rc: return rc
    rc = _dim(&p.out, "out", 1, Hv, "value heads, as in v", msg)
    if rc: return rc
    rc = _dim(&p.out, "out", 2, GDN_HEAD_DIM_V, "head dim V, as in v", msg)
    if rc: return rc
    rc = _dim(&p.g, "g", 0, T, "tokens, as in q", msg)
    if rc: return rc
    rc = _dim(&p.g, "g", 1, Hv, "value heads, as in v", msg)
    if rc: return rc
    rc = _dim(&p.beta, "beta", 0, T, "tokens, as in q", msg)
    if rc: return rc
    rc = _dim(&p.beta, "beta", 1, Hv, "value heads, as in v", msg)
    if rc: return rc
    if p.state.rank != 0:
        rc = _dim(&p.state, "state", 1, Hv, "value heads, as in v", msg)
        if rc: return rc
        rc = _dim(&p.state, "state", 2, GDN_HEAD_DIM_K, "head dim; 128", msg)
        if rc: return rc
        rc = _dim(&p.state, "state", 3, GDN_HEAD_DIM_V, "head dim; 128", msg)
        if rc: return rc
        if p.state_indices.rank != 0:
            rc = _dim(&p.state_indices, "state_indices", 0, N, "one slot per sequence, N = len(cu_seqlens) - 1", msg)
            if rc: return rc
        else:
            rc = _dim(&p.state, "state", 0, N, "one state per sequence without state_indices, N = len(cu_seqlens) - 1",
                      msg)
            if rc: return rc
        if p.state.shape[0] > 0x7fffffff:
            snprintf(msg, MSG_CAP, "state: %lld slots exceed the int32 index range", <long long>p.state.shape[0])
            return GDN_ERR_SHAPE
    # layouts
    rc = _layout(&p.q, "q", True, msg)
    if rc: return rc
    rc = _layout(&p.k, "k", True, msg)
    if rc: return rc
    rc = _layout(&p.v, "v", True, msg)
    if rc: return rc
    rc = _layout(&p.out, "out", True, msg)
    if rc: return rc
    rc = _layout(&p.g, "g", False, msg)  # any strides: g/beta may be interleaved
    if rc: return rc
    rc = _layout(&p.beta, "beta", False, msg)
    if rc: return rc
    rc = _layout(&p.cu_seqlens, "cu_seqlens", True, msg)
    if rc: return rc
    if p.state_indices.rank != 0:
        rc = _layout(&p.state_indices, "state_indices", True, msg)
        if rc: return rc
    if p.state.rank != 0:
        rc = _layout(&p.state, "state", True, msg)
        if rc: return rc
        if p.state.stride[2] != GDN_HEAD_DIM_V:
            snprintf(msg, MSG_CAP, "state: dim 2 has stride %lld; each head's 128x128 block must be "
                     "contiguous (stride 128)", <long long>p.state.stride[2])
            return GDN_ERR_LAYOUT
        if (<uintptr_t>p.state.data) % GDN_TMA_ALIGN_BYTES != 0:
            snprintf(msg, MSG_CAP, "state: data pointer is not 16-byte aligned")
            return GDN_ERR_LAYOUT
        if p.state.stride[0] % 4 != 0 or p.state.stride[1] % 4 != 0:
            snprintf(msg, MSG_CAP, "state: slot and head strides (%lld, %lld) must be multiples of 4 elements "
                     "(16-byte aligned blocks)", <long long>p.state.stride[0], <long long>p.state.stride[1])
            return GDN_ERR_LAYOUT
    # outputs: no element shares memory with another (expand()ed or overlapping strides)
    rc = _no_self_overlap(&p.out, "out", msg)
    if rc: return rc
    if p.state.rank != 0:
        rc = _no_self_overlap(&p.state, "state", msg)
        if rc: return rc
    # aliasing: out and the in-place state must not share memory with anything read
    rc = _no_overlap(&p.out, "out", &p.q, "q", msg)
    if rc: return rc
    rc = _no_overlap(&p.out, "out", &p.k, "k", msg)
    if rc: return rc
    rc = _no_overlap(&p.out, "out", &p.v, "v", msg)
    if rc: return rc
    rc = _no_overlap(&p.out, "out", &p.g, "g", msg)
    if rc: return rc
    rc = _no_overlap(&p.out, "out", &p.beta, "beta", msg)
    if rc: return rc
    rc = _no_overlap(&p.out, "out", &p.cu_seqlens, "cu_seqlens", msg)
    if rc: return rc
    rc = _no_overlap(&p.out, "out", &p.state, "state", msg)
    if rc: return rc
    rc = _no_overlap(&p.out, "out", &p.state_indices, "state_indices", msg)
    if rc: return rc
    rc = _no_overlap(&p.state, "state", &p.q, "q", msg)
    if rc: return rc
    rc = _no_overlap(&p.state, "state", &p.k, "k", msg)
    if rc: return rc
    rc = _no_overlap(&p.state, "state", &p.v, "v", msg)
    if rc: return rc
    rc = _no_overlap(&p.state, "state", &p.g, "g", msg)
    if rc: return rc
    rc = _no_overlap(&p.state, "state", &p.beta, "beta", msg)
    if rc: return rc
    rc = _no_overlap(&p.state, "state", &p.cu_seqlens, "cu_seqlens", msg)
    if rc: return rc
    rc = _no_overlap(&p.state, "state", &p.state_indices, "state_indices", msg)
    if rc: return rc
    if not isfinite(p.scale):
        snprintf(msg, MSG_CAP, "scale: must be finite")
        return GDN_ERR_ARGUMENT
    return GDN_OK


cdef int _device_major() noexcept nogil:
    cdef int dev = 0, major = 0
    if cudaGetDevice(&dev) != 0:
        cudaGetLastError()
        return -1
    if cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != 0:
        cudaGetLastError()
        return -1
    return major


cdef int _wgmma_warpgroups(int64_t N, int64_t Hv) noexcept nogil:
    """Warpgroups per CTA of the wgmma spine build for N sequences and Hv value heads.

    The one C copy of gdn_prefill.plan.spine_wgmma_warpgroups (plan.py has the measurements):
    2 once the 1-warpgroup grid, N * Hv * (V / VBLOCK) CTAs, exceeds GDN_WGMMA_WG1_MAX_CTAS (more
    than one CTA per SM: then halving the W/K L2 traffic pays), else 1 (the shortest per-chunk
    chain wins).  The header records the measured crossover.  Shapes only: no device query.
    """
    if N * Hv * (GDN_HEAD_DIM_V // GDN_WGMMA_SPINE_VBLOCK) > GDN_WGMMA_WG1_MAX_CTAS:
        return 2
    return 1


cdef int _spine_warpgroups(const gdn_problem_t *p, int spine) noexcept nogil:
    """Warpgroups per CTA of the build of `spine` this (validated) problem runs."""
    if spine == GDN_SPINE_WGMMA:
        return _wgmma_warpgroups(p.cu_seqlens.shape[0] - 1, p.v.shape[1])
    return 1


cdef int _spine_variant(const gdn_problem_t *p, int spine, int state_layout, int warpgroups) noexcept nogil:
    """Launch-table id of the spine build that runs (-1: not compiled in).  warpgroups 0: the
    rule (_spine_warpgroups); 1 or 2 force a wgmma build (test / benchmark hook only)."""
    if spine != GDN_SPINE_SCALAR and spine != GDN_SPINE_WGMMA:
        return -1
    if state_layout != GDN_STATE_KV and state_layout != GDN_STATE_VK:
        return -1
    if warpgroups == 0:
        warpgroups = _spine_warpgroups(p, spine)
    if warpgroups < 1 or warpgroups > NUM_SPINE_WG:
        return -1
    return _v_spine[spine][state_layout][warpgroups - 1]


cdef inline int64_t _rs_ctas(int64_t N, int64_t Hv) noexcept nogil:
    """CTAs of the solo and pair builds' grid (one per SM while it runs): the C copy of
    gdn_prefill.plan.grid_spine_rs, read by the build rule, the overlap guard and explain()."""
    return N * Hv * (GDN_HEAD_DIM_V // GDN_RS_SPINE_VBLOCK)


cdef int _rs_build(const gdn_problem_t *p, int sms) noexcept nogil:
    """The spine_rs_o build (RS_SOLO, RS_PAIR, RS_DUAL) the fused plan runs for this (validated)
    problem: the one C copy of gdn_prefill.plan.spine_rs_build.  The pair wherever the overlap plan
    runs (stage 1's second part shares the L2 with the spine, and the spine's CTAs must leave half
    of the SMs to it); else the dual (two chains per SM, one CTA per head) where its waves of
    chunks cost less than the solo build's (one chain per SM, twice the CTAs): ceil(N Hv / sms)
    dual waves at GDN_RS_DUAL_WAVE_NS against ceil(2 N Hv / sms) solo waves at
    GDN_RS_SOLO_WAVE_NS; the header records the measurements.  No device query: sms is the
    caller's."""
    if _plan_split(p, 2, sms) > 0:
        return RS_PAIR
    cdef int64_t heads = (p.cu_seqlens.shape[0] - 1) * p.v.shape[1]
    if sms > 0 and ((heads + sms - 1) // sms * GDN_RS_DUAL_WAVE_NS
                    < (_rs_ctas(p.cu_seqlens.shape[0] - 1, p.v.shape[1]) + sms - 1) // sms * GDN_RS_SOLO_WAVE_NS):
        return RS_DUAL
    return RS_SOLO


def _spine_rs_build(int64_t T, int64_t N, int64_t Hv, int sms=GDN_SM_COUNT):
    """Test hook: the launcher's choice of spine_rs_o build ("solo", "pair" or "dual") for T tokens,
    N sequences, Hv value heads on `sms` SMs."""
    cdef gdn_problem_t p
    memset(&p, 0, sizeof(gdn_problem_t))
    p.q.shape[0] = T
    p.cu_seqlens.shape[0] = N + 1
    p.v.shape[1] = Hv
    return _RS_BUILDS[_rs_build(&p, sms)]


def _spine_wgmma_warpgroups(int64_t N, int64_t Hv):
    """Test hook: the launcher's warpgroups-per-CTA rule for the wgmma spine."""
    return _wgmma_warpgroups(N, Hv)


cdef int _spine_guard(const gdn_problem_t *p, int spine, int state_layout, char *why) noexcept nogil:
    """0 if `spine` can serve this (already validated) problem, else a status and the reason."""
    if spine == GDN_SPINE_WGMMA:
        if (<uintptr_t>p.k.data) % GDN_TMA_ALIGN_BYTES != 0:
            snprintf(why, MSG_CAP, "k: data pointer is not 16-byte aligned; TMA needs 16-byte aligned tiles")
            return GDN_ERR_SPINE
        if p.k.stride[0] % 8 != 0:
            snprintf(why, MSG_CAP, "k: token stride %lld is not a multiple of 8 elements; TMA needs 16-byte "
                     "aligned rows", <long long>p.k.stride[0])
            return GDN_ERR_SPINE
        if p.k.stride[1] % 8 != 0:
            snprintf(why, MSG_CAP, "k: head stride %lld is not a multiple of 8 elements; TMA needs 16-byte "
                     "aligned rows", <long long>p.k.stride[1])
            return GDN_ERR_SPINE
    if _spine_variant(p, spine, state_layout, 0) < 0:
        # the build this problem would run (the wgmma spine's warpgroups depend on N and Hv)
        snprintf(why, MSG_CAP, "variant: the %s spine for state_layout '%s' (spine_%s%s_%s) is not compiled "
                 "into this build", "scalar" if spine == GDN_SPINE_SCALAR else "wgmma",
                 "kv" if state_layout == GDN_STATE_KV else "vk",
                 "scalar" if spine == GDN_SPINE_SCALAR else "wgmma",
                 "_wg2" if _spine_warpgroups(p, spine) == 2 else "",
                 "kv" if state_layout == GDN_STATE_KV else "vk")
        return GDN_ERR_UNKNOWN_VARIANT
    return GDN_OK


cdef int _fused_guard(const gdn_problem_t *p, int chosen, int state_layout, int sms, char *why) noexcept nogil:
    """0 if the fused plan (spine + output in one kernel) can serve this problem with the chosen
    spine, else GDN_ERR_SPINE and the reason (then the unfused plan runs)."""
    if chosen != GDN_SPINE_WGMMA:
        snprintf(why, MSG_CAP, "spine: only the wgmma spine has a fused-output build")
        return GDN_ERR_SPINE
    cdef const gdn_tensor_t *bad = _unaligned16(p)
    if bad != NULL:
        # the fused spine loads q and stores out by TMA; its recompute_wu build is the _a16 one
        snprintf(why, MSG_CAP, "%s: the fused output needs a 16-byte aligned base and token/head strides "
                 "that are multiples of 8 elements (strides %lld, %lld)", _row_name(p, bad),
                 <long long>bad.stride[0], <long long>bad.stride[1])
        return GDN_ERR_SPINE
    if _v_spine_o[state_layout][_rs_build(p, sms)] < 0 or _v_wu_pqk[1 if p.beta.dtype == GDN_DTYPE_BF16 else 0] < 0:
        snprintf(why, MSG_CAP, "variant: the fused-output builds are not compiled into this build")
        return GDN_ERR_UNKNOWN_VARIANT
    return GDN_OK


cdef int _choose(const gdn_problem_t *p, int spine, int state_layout, int *chosen, char *msg) noexcept nogil:
    cdef char why[MSG_CAP]
    cdef int rc
    if spine == GDN_SPINE_AUTO:
        if _spine_guard(p, GDN_SPINE_WGMMA, state_layout, why) == GDN_OK:
            chosen[0] = GDN_SPINE_WGMMA
            return GDN_OK
        spine = GDN_SPINE_SCALAR
    if spine != GDN_SPINE_SCALAR and spine != GDN_SPINE_WGMMA:
        snprintf(msg, MSG_CAP, "spine: unknown spine code %d", spine)
        return GDN_ERR_ARGUMENT
    rc = _spine_guard(p, spine, state_layout, why)
    if rc:
        snprintf(msg, MSG_CAP, "spine '%s' cannot run: %s", "scalar" if spine == GDN_SPINE_SCALAR else "wgmma", why)
        return GDN_ERR_SPINE
    chosen[0] = spine
    return GDN_OK


# ----------------------------------------------------------------------------- workspace
cdef inline int64_t _aligned(int64_t n) noexcept nogil:
    return (n + GDN_WORKSPACE_ALIGN_BYTES - 1) // GDN_WORKSPACE_ALIGN_BYTES * GDN_WORKSPACE_ALIGN_BYTES


cdef inline int64_t _chunk_slots(int64_t T, int64_t N) noexcept nogil:
    """The C copy of gdn_prefill.plan.chunk_slots: ceil(T / CHUNK) + N slots cover every chunk."""
    return (T + GDN_CHUNK - 1) // GDN_CHUNK + N


cdef int64_t _carve(gdn_problem_t *p, char *base, int64_t T, int64_t N, int64_t Hv, bint fused) noexcept nogil:
    """Lay one plan's workspace tensors out from `base` (NULL: only count); returns the bytes used.
    The fused plan's: gcum, rq, rk, ready, tu, pqk, order; the unfused plan's: gcum, rq, rk, ready, w,
    u, vnew, h.  The other plan's tensors get their shapes and no memory (data NULL): its kernels
    take them as parameters and never touch them (at 1 x 65536, Hv = 32: 536 MiB against 2,585 MiB)."""
    cdef int64_t CB = _chunk_slots(T, N)
    cdef int64_t K = GDN_HEAD_DIM_K, V = GDN_HEAD_DIM_V
    cdef int64_t off = 0
    cdef char *fb = base if fused else NULL         # the fused plan's tensors
    cdef char *ub = NULL if fused else base         # the unfused plan's
    # gcum, rq, rk: [T, Hv] stored head-major, so a chunk's rows of one head are contiguous
    off = _head_major(&p.gcum, base, off, T, Hv)
    off = _head_major(&p.rq, base, off, T, Hv)
    off = _head_major(&p.rk, base, off, T, Hv)
    off = _piece(&p.ready, base, off, GDN_DTYPE_I32, 2, CB, Hv, 1, 1)
    cdef int64_t shared = off
    off = _piece(&p.tu, fb, off, GDN_DTYPE_BF16, 3, T, Hv, GDN_CHUNK, 1)
    off = _piece(&p.pqk, fb, off, GDN_DTYPE_BF16, 3, T, Hv, GDN_CHUNK, 1)
    off = _piece(&p.order, fb, off, GDN_DTYPE_I32, 1, N, 1, 1, 1)
    cdef int64_t fused_end = off
    off = _piece(&p.w, ub, shared, GDN_DTYPE_BF16, 3, T, Hv, K, 1)
    off = _piece(&p.u, ub, off, GDN_DTYPE_BF16, 3, T, Hv, V, 1)
    off = _piece(&p.vnew, ub, off, GDN_DTYPE_BF16, 3, T, Hv, V, 1)
    off = _piece(&p.h, ub, off, GDN_DTYPE_BF16, 4, CB, Hv, K, V)
    return fused_end if fused else off


cdef int64_t _piece(gdn_tensor_t *t, char *base, int64_t off, int dtype, int rank,
                    int64_t d0, int64_t d1, int64_t d2, int64_t d3) noexcept nogil:
    """A compact row-major tensor at `off`; returns the next aligned offset."""
    cdef int64_t dims[4]
    cdef int64_t stride = 1
    cdef int i
    dims[0] = d0
    dims[1] = d1
    dims[2] = d2
    dims[3] = d3
    t.rank = rank
    t.dtype = dtype
    t.data = <void *>(base + off) if base != NULL else NULL
    for i in range(3, -1, -1):
        t.shape[i] = dims[i] if i < rank else 1
        t.stride[i] = stride if i < rank else 0
        if i < rank:
            stride *= dims[i]
    return _aligned(off + stride * _elsize(dtype))


cdef int64_t _head_major(gdn_tensor_t *t, char *base, int64_t off, int64_t T, int64_t Hv) noexcept nogil:
    """An fp32 [T, Hv] tensor stored as a compact [Hv, T] one (strides 1, T)."""
    off = _piece(t, base, off, GDN_DTYPE_F32, 2, Hv, T, 1, 1)
    t.shape[0] = T
    t.shape[1] = Hv
    t.stride[0] = 1
    t.stride[1] = T
    return off


cdef int64_t _plan_workspace_bytes(int64_t T, int64_t N, int64_t Hv, bint fused) noexcept nogil:
    """Bytes of workspace one plan needs (_carve)."""
    cdef gdn_problem_t scratch
    return _carve(&scratch, NULL, T, N, Hv, fused)


cdef int64_t gdn_workspace_bytes(int64_t T, int64_t N, int64_t Hv) noexcept nogil:
    """Bytes of workspace that serve any call with these sizes, whichever plan it runs."""
    return max(_plan_workspace_bytes(T, N, Hv, True), _plan_workspace_bytes(T, N, Hv, False))


# ----------------------------------------------------------------------------- plan + launch
cdef int _prepare(gdn_problem_t *p, int spine, int state_layout, int *chosen, char *msg) noexcept nogil:
    """Validate, derive the flags, switch a 'vk' pool to its logical S[k, v] view, choose the spine."""
    cdef int rc = _validate(p, state_layout, msg)
    cdef int64_t tmp
    if rc:
        return rc
    p.has_state = 1 if p.state.rank != 0 else 0
    p.use_state_indices = 1 if p.state_indices.rank != 0 else 0
    if p.has_state and state_layout == GDN_STATE_VK:
        tmp = p.state.stride[2]
        p.state.stride[2] = p.state.stride[3]
        p.state.stride[3] = tmp
    if not p.has_state:
        # Kernels still bind the tensors: give them a well-formed empty view.
        p.state.rank = 4
        p.state.dtype = GDN_DTYPE_F32
        p.state.shape[0] = 0
        p.state.shape[1] = p.v.shape[1]
        p.state.shape[2] = GDN_HEAD_DIM_K
        p.state.shape[3] = GDN_HEAD_DIM_V
        p.state.stride[0] = 0
        p.state.stride[1] = 0
        p.state.stride[2] = GDN_HEAD_DIM_V if state_layout == GDN_STATE_KV else 1
        p.state.stride[3] = 1 if state_layout == GDN_STATE_KV else GDN_HEAD_DIM_K
    if not p.use_state_indices:
        p.state_indices.rank = 1
        p.state_indices.dtype = GDN_DTYPE_I32
        p.state_indices.shape[0] = p.cu_seqlens.shape[0] - 1
        p.state_indices.stride[0] = 1
    if _device_major() != 9:
        snprintf(msg, MSG_CAP, "device: the current CUDA device is not compute capability 9.x (Hopper); "
                 "the kernels are compiled for sm_90a")
        return GDN_ERR_ARGUMENT
    return _choose(p, spine, state_layout, chosen, msg)


cdef bint _row_aligned16(const gdn_tensor_t *t) noexcept nogil:
    return (<uintptr_t>t.data) % 16 == 0 and t.stride[0] % 8 == 0 and t.stride[1] % 8 == 0


cdef const gdn_tensor_t *_unaligned16(const gdn_problem_t *p) noexcept nogil:
    """The first of q, k, v, out that cannot be moved in 16-byte vectors, or NULL."""
    if not _row_aligned16(&p.q):
        return &p.q
    if not _row_aligned16(&p.k):
        return &p.k
    if not _row_aligned16(&p.v):
        return &p.v
    if not _row_aligned16(&p.out):
        return &p.out
    return NULL


cdef const char *_row_name(const gdn_problem_t *p, const gdn_tensor_t *t) noexcept nogil:
    return "q" if t == &p.q else ("k" if t == &p.k else ("v" if t == &p.v else "out"))


cdef bint _aligned16(const gdn_problem_t *p) noexcept nogil:
    """q, k, v and out can all be moved in 16-byte vectors (selects the _a16 stage builds and,
    with the wgmma spine, the fused-output plan)."""
    return _unaligned16(p) == NULL


cdef int _select_ids(const gdn_problem_t *p, int chosen, int state_layout, int warpgroups, int fused,
                     int rs_build, int sms, int *ids) noexcept nogil:
    """The build of each launch (-1 where it is not compiled in); returns the number of launches:
    2 for the fused plan (recompute_wu with pqk, spine_rs_o), else 3 (recompute_wu, spine,
    fwd_o).  The one place that picks the plan and the beta dtype, _a16 and
    warpgroups builds: prefill, explain and the stage test hook all read their launches from here.
    warpgroups 0 / fused -1 / rs_build -1: the rules; otherwise forced (test / benchmark hook only).
    sms: the SM count of the overlap rule, which the build rule follows (_rs_build)."""
    cdef int a16 = 1 if _aligned16(p) else 0
    cdef int bbf16 = 1 if p.beta.dtype == GDN_DTYPE_BF16 else 0
    cdef char why[MSG_CAP]
    if fused < 0:
        fused = 1 if _fused_guard(p, chosen, state_layout, sms, why) == GDN_OK else 0
    if fused:
        if rs_build < 0:
            rs_build = _rs_build(p, sms)
        ids[0] = _v_wu_pqk[bbf16] if a16 else -1
        ids[1] = _v_spine_o[state_layout][rs_build] if a16 and chosen == GDN_SPINE_WGMMA else -1
        return 2
    if warpgroups == 0:
        warpgroups = _spine_warpgroups(p, chosen)
    ids[0] = _v_wu[bbf16][a16]
    ids[1] = _spine_variant(p, chosen, state_layout, warpgroups)
    ids[2] = _v_fwd_o[a16]
    return 3


cdef int _stage_ids(const gdn_problem_t *p, int chosen, int state_layout, int sms, int *ids, int *n,
                    char *msg) noexcept nogil:
    """The launches of one prefill, in order (n of them); every one must be compiled in."""
    cdef int i
    n[0] = _select_ids(p, chosen, state_layout, 0, -1, -1, sms, ids)
    for i in range(n[0]):
        if ids[i] < 0:
            snprintf(msg, MSG_CAP, "build: stage %d of %d (%s) is not compiled into this build", i + 1, n[0],
                     "recompute_wu" if i == 0 else ("spine" if i == 1 else "fwd_o"))
            return GDN_ERR_UNKNOWN_VARIANT
    return GDN_OK


cdef int64_t _call_workspace_bytes(const gdn_problem_t *problem, int spine, int state_layout) noexcept nogil:
    """Workspace bytes of the plan this call runs (gdn_prefill_raw's choice: the same validation
    and plan rule on a copy); 1 where the call does not validate (gdn_prefill_raw then fails with
    that error before it looks at the workspace)."""
    cdef gdn_problem_t p = problem[0]
    cdef char local[MSG_CAP]
    cdef int chosen = 0, n = 0
    cdef int ids[3]
    cdef int64_t T = p.q.shape[0], N = p.cu_seqlens.shape[0] - 1, Hv = p.v.shape[1]
    if (_prepare(&p, spine, state_layout, &chosen, local) != GDN_OK
            or _stage_ids(&p, chosen, state_layout, _sm_count(), ids, &n, local) != GDN_OK):
        return 1
    return _plan_workspace_bytes(T, N, Hv, n == 2)


cdef int _workspace_apart(const gdn_problem_t *p, uintptr_t lo, uintptr_t hi, char *msg) noexcept nogil:
    """The workspace [lo, hi) shares no byte with a tensor of the call (the kernels write it while
    they read the inputs and write out and the state)."""
    cdef const gdn_tensor_t *ts[9]
    cdef const char *names[9]
    cdef uintptr_t tlo, thi
    cdef int i
    ts[:] = [&p.q, &p.k, &p.v, &p.g, &p.beta, &p.out, &p.state, &p.cu_seqlens, &p.state_indices]
    names[:] = [b"q", b"k", b"v", b"g", b"beta", b"out", b"state", b"cu_seqlens", b"state_indices"]
    for i in range(9):
        _extent(ts[i], &tlo, &thi)
        if tlo < thi and lo < hi and tlo < hi and lo < thi:
            snprintf(msg, MSG_CAP, "workspace: overlaps the memory of %s; the workspace must be memory of its own",
                     names[i])
            return GDN_ERR_ALIAS
    return GDN_OK


cdef int _bind_workspace(gdn_problem_t *p, void *workspace, int64_t workspace_bytes, bint fused,
                         char *msg) noexcept nogil:
    """Carve the workspace of the plan that runs (fused: the fused-output plan) after checking it."""
    cdef int64_t need = _plan_workspace_bytes(p.q.shape[0], p.cu_seqlens.shape[0] - 1, p.v.shape[1], fused)
    if workspace == NULL or workspace_bytes < need:
        snprintf(msg, MSG_CAP, "workspace: %lld bytes given, %lld needed by the %s plan (explain()[\"workspace_bytes\"]; "
                 "gdn_workspace_bytes serves either plan)", <long long>workspace_bytes, <long long>need,
                 b"fused-output" if fused else b"unfused")
        return GDN_ERR_ARGUMENT
    if (<uintptr_t>workspace) % GDN_WORKSPACE_ALIGN_BYTES != 0:
        snprintf(msg, MSG_CAP, "workspace: data pointer is not %d-byte aligned", GDN_WORKSPACE_ALIGN_BYTES)
        return GDN_ERR_LAYOUT
    cdef int rc = _workspace_apart(p, <uintptr_t>workspace, <uintptr_t>workspace + <uintptr_t>workspace_bytes, msg)
    if rc:
        return rc
    _carve(p, <char *>workspace, p.q.shape[0], p.cu_seqlens.shape[0] - 1, p.v.shape[1], fused)
    # the serial plan: recompute_wu over every chunk slot, nothing published through `ready`
    p.slot_begin = 0
    p.slot_end = <int32_t>p.ready.shape[0]
    p.ready_from = GDN_NO_OVERLAP
    return GDN_OK


cdef int _load_modules(char *msg) noexcept nogil:
    """Load every kernel module once (first call); GDN_ERR_LAUNCH and the CUDA error if that fails."""
    cdef int rc = gdn_load_modules()
    if rc != 0:
        snprintf(msg, MSG_CAP, "CUDA error while loading the kernel modules: %s", cudaGetErrorString(<cudaError_t>rc))
        return GDN_ERR_LAUNCH
    return GDN_OK


# Benchmark hook (tools/host_overhead.py): plan and validate as usual, then launch nothing, so the
# host cost of everything but the launches can be timed on its own.
cdef bint _dry_run = False


def _host_dry_run(bint on):
    """Benchmark hook: True skips every launch (and the overlap plan's stream work); returns on."""
    global _dry_run
    _dry_run = on
    return on


cdef int _launch(const gdn_problem_t *p, const int *ids, int n, cudaStream_t stream, char *msg) noexcept nogil:
    cdef int i, rc
    if _dry_run:
        return GDN_OK
    rc = _load_modules(msg)
    if rc != GDN_OK:
        return rc
    for i in range(n):
        rc = gdn_launch_variant(ids[i], p, stream)
        if rc != 0:
            snprintf(msg, MSG_CAP, "CUDA error launching %s: %s", gdn_variant_name(ids[i]),
                     cudaGetErrorString(<cudaError_t>rc))
            return GDN_ERR_LAUNCH
    return GDN_OK


# ----------------------------------------------------------------------------- overlap plan
# With few sequences the fused spine occupies N * Hv * 2 SMs for its whole run and stage 1 leaves
# them idle meanwhile (1x8K: 64 of 132 SMs for 151 us).  The overlap plan runs recompute_wu's
# first chunk slots [0, split) on the whole device, then the spine beside recompute_wu's other
# slots [split, CB), which publish each (slot, head) in the workspace's `ready` flags; the spine's
# loader waits for a flag before it reads the slot.  The spine and the first part run on a
# library-owned stream of the highest priority (so the spine's CTAs are placed as soon as the
# first part drains), the second part on the caller's stream; fork and join are events, so the
# caller's stream orders everything after the call behind both, and a CUDA graph captures it.
#
# Off by default (GDN_PREFILL_OVERLAP=1 opts in): the spine's CTAs wait for CTAs of another
# kernel on another stream, which the hardware does not promise to schedule beside them.  Within
# one process that calls prefill from one stream, the spine leaves half of the SMs to that kernel
# and it runs; but other streams' kernels (two-batch overlap, async scheduling), kernels queued
# behind ours with programmatic dependent launch, or other processes under MPS may hold those
# SMs, and a spine that waits on SMs while holding SMs can hang the GPU (issue 32: 3 hangs in 10
# runs of two streams).  The one safe rule, that a CTA waits only on lower-indexed CTAs of its
# own grid, is the fused single kernel's (docs/DESIGN.md).

OVERLAP_OFF = ("off by default: its spine waits for a kernel on another stream, which the GPU does not "
               "promise to schedule beside it when other streams or processes hold SMs (a hang under "
               "concurrent streams); GDN_PREFILL_OVERLAP=1 opts in for a process that calls prefill from "
               "one stream alone")

cdef extern from "pthread.h" nogil:
    ctypedef struct pthread_mutex_t:
        pass
    int pthread_mutex_init(pthread_mutex_t *m, void *attr)
    int pthread_mutex_lock(pthread_mutex_t *m)
    int pthread_mutex_unlock(pthread_mutex_t *m)

cdef enum:
    MAX_DEVICES = 64

cdef pthread_mutex_t _side_lock
pthread_mutex_init(&_side_lock, NULL)
cdef int _side_state[MAX_DEVICES]           # 0: not created, 1: ready, -1: creation failed
cdef cudaStream_t _side_stream[MAX_DEVICES]
cdef cudaEvent_t _side_fork[MAX_DEVICES]
cdef cudaEvent_t _side_join[MAX_DEVICES]
memset(_side_state, 0, sizeof(_side_state))


# GDN_PREFILL_OVERLAP=1 (read once, at import) opts in to the overlap plan (see above: only for a
# process that owns the GPU and calls prefill from one stream; never under MPS with an
# active-thread percentage or green contexts, where the queried SM count overstates the SMs a
# process gets and the deadlock guard's count would be wrong).
cdef bint _overlap_enabled = os.environ.get("GDN_PREFILL_OVERLAP", "0") == "1"


cdef int _sm_count() noexcept nogil:
    """SMs of the current device (GDN_SM_COUNT if it cannot be queried)."""
    cdef int dev = 0, sms = 0
    if cudaGetDevice(&dev) != 0 or cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != 0:
        cudaGetLastError()
        return GDN_SM_COUNT
    return sms


cdef bint _overlap_fits(int64_t N, int64_t Hv, int sms) noexcept nogil:
    """The overlap plan's deadlock guard: the spine's CTAs (one per SM) leave at least half of the
    SMs to the part of stage 1 they wait for."""
    return 2 * _rs_ctas(N, Hv) <= sms


cdef int64_t _overlap_split(int64_t T, int64_t N, int64_t Hv, int sms) noexcept nogil:
    """First chunk slot of stage 1's second part, or 0 for the serial plan (the one C copy of
    gdn_prefill.plan.overlap_split; gdn_abi.h has the constants)."""
    cdef int64_t cb = _chunk_slots(T, N)
    if not _overlap_fits(N, Hv, sms) or cb < GDN_OVERLAP_MIN_SLOTS:
        return 0
    return min(cb, GDN_OVERLAP_SPLIT_SLOTS)


cdef int64_t _plan_split(const gdn_problem_t *p, int n_launches, int sms) noexcept nogil:
    """The split the launcher uses for this (validated) problem: the rule for the fused plan
    (n_launches == 2) when the process opted in (GDN_PREFILL_OVERLAP=1); 0 for the serial plan."""
    if n_launches != 2 or not _overlap_enabled:
        return 0
    return _overlap_split(p.q.shape[0], p.cu_seqlens.shape[0] - 1, p.v.shape[1], sms)


def _overlap_opt_in():
    """Test hook: whether this process opted in to the overlap plan (GDN_PREFILL_OVERLAP=1)."""
    return bool(_overlap_enabled)


def _overlap_split_rule(int64_t T, int64_t N, int64_t Hv, int sms):
    """Test hook: the launcher's overlap rule (None: the serial plan)."""
    cdef int64_t split = _overlap_split(T, N, Hv, sms)
    return int(split) if split > 0 else None


cdef int _side_get(cudaStream_t stream, cudaStream_t *side, cudaEvent_t *fork, cudaEvent_t *join) noexcept nogil:
    """The current device's side stream and events, created on first use; 0 if unavailable (then
    the serial plan runs): creation failed, or the first use is inside a stream capture, where
    creating a stream is not permitted."""
    cdef int dev = 0, least = 0, greatest = 0, ok = 0
    cdef cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone
    if cudaGetDevice(&dev) != 0 or dev < 0 or dev >= MAX_DEVICES:
        cudaGetLastError()
        return 0
    if _side_state[dev] == 0:
        pthread_mutex_lock(&_side_lock)
        if _side_state[dev] == 0:
            if cudaStreamIsCapturing(stream, &capturing) != 0 or capturing != cudaStreamCaptureStatusNone:
                cudaGetLastError()
                pthread_mutex_unlock(&_side_lock)
                return 0
            ok = (cudaDeviceGetStreamPriorityRange(&least, &greatest) == 0
                  and cudaStreamCreateWithPriority(&_side_stream[dev], cudaStreamNonBlocking, greatest) == 0
                  and cudaEventCreateWithFlags(&_side_fork[dev], cudaEventDisableTiming) == 0
                  and cudaEventCreateWithFlags(&_side_join[dev], cudaEventDisableTiming) == 0)
            if not ok:
                cudaGetLastError()
            _side_state[dev] = 1 if ok else -1
        pthread_mutex_unlock(&_side_lock)
    if _side_state[dev] != 1:
        return 0
    side[0] = _side_stream[dev]
    fork[0] = _side_fork[dev]
    join[0] = _side_join[dev]
    return 1


cdef const char *_OVERLAP_STEPS[5]
_OVERLAP_STEPS[:] = [b"zeroing the ready flags", b"forking the side stream", b"launching recompute_wu (first part)",
                     b"launching recompute_wu (second part)", b"launching the spine"]


cdef int _launch_overlap(const gdn_problem_t *p, const int *ids, int64_t split, cudaStream_t stream,
                         char *msg) noexcept nogil:
    """The fused plan's two builds (ids[0] recompute_wu, ids[1] the spine) as the overlap plan.
    The spine is launched last: if any earlier step fails it is never launched, so nothing waits
    for a flag that will not come."""
    cdef gdn_problem_t a = p[0]
    cdef gdn_problem_t b = p[0]
    cdef cudaStream_t side
    cdef cudaEvent_t fork, join
    cdef int rc, step = 0
    cdef bint joined
    if _dry_run or not _side_get(stream, &side, &fork, &join):
        return _launch(p, ids, 2, stream, msg)
    rc = _load_modules(msg)
    if rc != GDN_OK:
        return rc
    a.slot_begin = 0
    a.slot_end = <int32_t>split
    a.ready_from = <int32_t>split
    b.slot_begin = <int32_t>split
    b.slot_end = p.slot_end
    b.ready_from = <int32_t>split
    rc = cudaMemsetAsync(p.ready.data, 0, p.ready.shape[0] * p.ready.shape[1] * 4, stream)
    if rc == 0:
        step = 1
        # record and wait under the lock: the events are the device's, shared by every caller, and
        # another thread's record between them would fork this call from that thread's stream
        pthread_mutex_lock(&_side_lock)
        rc = cudaEventRecord(fork, stream)
        if rc == 0:
            rc = cudaStreamWaitEvent(side, fork, 0)
        pthread_mutex_unlock(&_side_lock)
    if rc == 0:
        step = 2
        rc = gdn_launch_variant(ids[0], &a, side)
    if rc == 0:
        step = 3
        rc = gdn_launch_variant(ids[0], &b, stream)
    if rc == 0:
        step = 4
        rc = gdn_launch_variant(ids[1], &a, side)
    if step >= 2:
        # join even after a failed launch, so the caller's stream stays ordered behind the side stream
        pthread_mutex_lock(&_side_lock)
        joined = cudaEventRecord(join, side) == 0 and cudaStreamWaitEvent(stream, join, 0) == 0
        pthread_mutex_unlock(&_side_lock)
        if not joined and rc == 0:
            rc = <int>cudaGetLastError()
    if rc != 0:
        snprintf(msg, MSG_CAP, "CUDA error in the overlap plan (%s): %s", _OVERLAP_STEPS[step],
                 cudaGetErrorString(<cudaError_t>rc))
        return GDN_ERR_LAUNCH
    return GDN_OK


cdef int gdn_prefill_raw(gdn_problem_t *problem, int spine, int state_layout,
                         void *workspace, int64_t workspace_bytes, cudaStream_t stream,
                         int *chosen_spine, char *msg, size_t msg_cap) noexcept nogil:
    cdef gdn_problem_t p = problem[0]
    cdef char local[MSG_CAP]
    cdef int rc, chosen = 0, n = 0
    cdef int ids[3]
    cdef int64_t split
    cdef int sms
    local[0] = 0
    rc = _prepare(&p, spine, state_layout, &chosen, local)
    if rc == GDN_OK:
        sms = _sm_count()
        rc = _stage_ids(&p, chosen, state_layout, sms, ids, &n, local)
    if rc == GDN_OK:
        rc = _bind_workspace(&p, workspace, workspace_bytes, n == 2, local)
    if rc == GDN_OK:
        split = _plan_split(&p, n, sms)
        if split > 0:
            rc = _launch_overlap(&p, ids, split, stream, local)
        else:
            rc = _launch(&p, ids, n, stream, local)
    if chosen_spine != NULL:
        chosen_spine[0] = chosen
    if msg != NULL and msg_cap > 0:
        if local[0] != 0:
            snprintf(msg, msg_cap, "%s", local)
        else:
            msg[0] = 0
    return rc


# ----------------------------------------------------------------------------- torch side
# A tensor's metadata read through Python attributes (dim, dtype, data_ptr, shape, stride) costs
# ~0.7 us per tensor (run 50: 6.0 us for nine, a fifth of prefill()'s host time).  torch >= 2.10
# exports DLPack's C exchange table on its tensor type (`__dlpack_c_exchange_api__`, DLPack 1.x):
# dltensor_from_py_object_no_sync fills a borrowed DLTensor in C (no allocation, no reference
# taken: valid while the caller holds the tensor, which it does for the whole call) and
# current_work_stream returns torch's current stream of a device.  The declarations below are
# that ABI's layout (dlpack.h, DLPack 1.x: the version header, then the function pointers).
cdef extern from *:
    """
    typedef struct { int32_t device_type; int32_t device_id; } gdn_dl_device_t;
    typedef struct { uint8_t code; uint8_t bits; uint16_t lanes; } gdn_dl_dtype_t;
    typedef struct {
        void *data; gdn_dl_device_t device; int32_t ndim; gdn_dl_dtype_t dtype;
        int64_t *shape; int64_t *strides; uint64_t byte_offset;
    } gdn_dl_tensor_t;
    typedef struct {
        uint32_t major; uint32_t minor; void *prev_api;
        void *managed_tensor_allocator;
        void *managed_tensor_from_py_object_no_sync;
        void *managed_tensor_to_py_object_no_sync;
        int (*dltensor_from_py_object_no_sync)(void *py_object, gdn_dl_tensor_t *out);
        int (*current_work_stream)(int32_t device_type, int32_t device_id, void **out_stream);
    } gdn_dl_exchange_api_t;
    """
    ctypedef struct gdn_dl_device_t:
        int32_t device_type
        int32_t device_id
    ctypedef struct gdn_dl_dtype_t:
        uint8_t code
        uint8_t bits
        uint16_t lanes
    ctypedef struct gdn_dl_tensor_t:
        void *data
        gdn_dl_device_t device
        int32_t ndim
        gdn_dl_dtype_t dtype
        int64_t *shape
        int64_t *strides
        uint64_t byte_offset
    ctypedef struct gdn_dl_exchange_api_t:
        uint32_t major
        uint32_t minor
        int (*dltensor_from_py_object_no_sync)(void *py_object, gdn_dl_tensor_t *out) noexcept
        int (*current_work_stream)(int32_t device_type, int32_t device_id, void **out_stream) noexcept

cdef enum:
    DL_INT = 0              # DLPack type codes and the device type of CUDA memory
    DL_UINT = 1
    DL_FLOAT = 2
    DL_BFLOAT = 4
    DL_CPU = 1
    DL_CUDA = 2
    DTYPE_U8 = 100          # uint8 (the workspace): no GDN_DTYPE_*, _dtype_name() calls it unsupported

cdef object _torch = None                        # the torch module, imported by the first call
cdef const gdn_dl_exchange_api_t *_dl = NULL     # torch's exchange table (NULL: torch has none)
cdef object _dl_type = None                      # the exact type it serves (torch.Tensor)
cdef bint _dl_on = True                          # test hook: _use_dlpack(False) reads attributes
cdef dict _DTYPES = {}


cdef object _torch_init():
    """Import torch once; find its DLPack exchange table (major version 1, both functions)."""
    global _torch, _dl, _dl_type
    import torch
    cdef const gdn_dl_exchange_api_t *api
    _DTYPES.update({torch.bfloat16: GDN_DTYPE_BF16, torch.float16: GDN_DTYPE_F16,
                    torch.float32: GDN_DTYPE_F32, torch.int32: GDN_DTYPE_I32, torch.uint8: DTYPE_U8})
    cap = getattr(torch.Tensor, "__dlpack_c_exchange_api__", None)
    if cap is not None and PyCapsule_IsValid(cap, b"dlpack_exchange_api"):
        api = <const gdn_dl_exchange_api_t *>PyCapsule_GetPointer(cap, b"dlpack_exchange_api")
        if api.major == 1 and api.dltensor_from_py_object_no_sync != NULL and api.current_work_stream != NULL:
            _dl = api
            _dl_type = torch.Tensor
    _torch = torch
    return torch


def _use_dlpack(bint on):
    """Test / benchmark hook: read tensors through torch's DLPack table (True, when torch has
    one) or through Python attributes (False).  Returns whether the table is in use now."""
    global _dl_on
    if _torch is None:
        _torch_init()
    _dl_on = on
    return _dl_on and _dl != NULL


cdef inline int _dl_dtype(gdn_dl_dtype_t t) noexcept nogil:
    if t.lanes != 1:
        return 0
    if t.code == DL_BFLOAT and t.bits == 16:
        return GDN_DTYPE_BF16
    if t.code == DL_FLOAT and t.bits == 16:
        return GDN_DTYPE_F16
    if t.code == DL_FLOAT and t.bits == 32:
        return GDN_DTYPE_F32
    if t.code == DL_INT and t.bits == 32:
        return GDN_DTYPE_I32
    if t.code == DL_UINT and t.bits == 8:
        return DTYPE_U8
    return 0


cdef enum:
    DEV_NONE = -1           # _fill's device codes besides a CUDA index (>= 0): no tensor,
    DEV_CPU = -2            # a CPU tensor,
    DEV_META = -3           # a meta tensor,
    DEV_OTHER = -4          # any other device
    FILL_ERROR = -100       # (an exception was raised)


cdef object _not_a_tensor(object x, str name):
    """The GdnTypeError for an argument that must be a dense torch tensor."""
    if x is None:
        return _errors.GdnTypeError(f"{name}: a tensor is required, got None")
    if not isinstance(x, _torch.Tensor):
        return _errors.GdnTypeError(f"{name}: must be a torch.Tensor, got {type(x).__module__}.{type(x).__qualname__}"
                                    if type(x).__module__ != "builtins" else
                                    f"{name}: must be a torch.Tensor, got {type(x).__qualname__}")
    if x.layout != _torch.strided:
        return _errors.GdnTypeError(f"{name}: must be a dense (strided) tensor, got layout {x.layout}")
    if x.is_quantized:
        return _errors.GdnTypeError(f"{name}: quantized tensors are not supported (dtype {x.dtype})")
    return None


cdef int _fill(gdn_tensor_t *t, object x, str name, bint required=False) except FILL_ERROR:
    """Fill t from tensor x (None: rank 0, absent; required: a GdnTypeError).  Returns the CUDA device
    index of x, or a DEV_* code.  torch tensors go through the DLPack table; other tensor types
    (subclasses included) and tensors DLPack cannot describe (meta) through attributes: the same
    fields either way (tests/test_dlpack.py compares them).  Anything but a dense torch tensor
    raises GdnTypeError naming the argument."""
    cdef int i, rank
    cdef int64_t st
    cdef gdn_dl_tensor_t d
    memset(t, 0, sizeof(gdn_tensor_t))
    if x is None and not required:
        return DEV_NONE
    if _torch is None:
        _torch_init()
    if _dl_on and _dl != NULL and type(x) is _dl_type:
        if _dl.dltensor_from_py_object_no_sync(<void *>x, &d) == 0:
            if d.ndim < 1 or d.ndim > GDN_MAX_RANK:
                raise _errors.GdnShapeError(f"{name}: must have 1 to {GDN_MAX_RANK} dims, got {d.ndim}")
            t.rank = d.ndim
            t.dtype = _dl_dtype(d.dtype)
            t.data = <void *>(<char *>d.data + d.byte_offset)
            st = 1
            for i in range(d.ndim - 1, -1, -1):      # DLPack < 1.2 may leave strides NULL: compact
                t.shape[i] = d.shape[i]
                t.stride[i] = d.strides[i] if d.strides != NULL else st
                st *= d.shape[i]
            if d.device.device_type == DL_CUDA:
                return d.device.device_id
            return DEV_CPU if d.device.device_type == DL_CPU else DEV_OTHER
        PyErr_Clear()
    err = _not_a_tensor(x, name)
    if err is not None:
        raise err
    rank = x.dim()
    if rank < 1 or rank > GDN_MAX_RANK:
        raise _errors.GdnShapeError(f"{name}: must have 1 to {GDN_MAX_RANK} dims, got {rank}")
    t.rank = rank
    t.dtype = _DTYPES.get(x.dtype, 0)
    t.data = <void *><uintptr_t>x.data_ptr()
    shape = x.shape
    stride = x.stride()
    for i in range(rank):
        t.shape[i] = shape[i]
        t.stride[i] = stride[i]
    dev = x.device
    if dev.type == "cuda":
        return dev.index if dev.index is not None else 0
    return DEV_CPU if dev.type == "cpu" else (DEV_META if dev.type == "meta" else DEV_OTHER)


def _tensor_view(x):
    """Test hook: (data, shape, stride, dtype code, device) as _fill reads x."""
    cdef gdn_tensor_t t
    cdef int dev = _fill(&t, x, "x"), i
    if dev < 0:
        dev = -2 if dev != DEV_NONE else -1       # the hook's contract: -2 for any non-CUDA device
    return (<uintptr_t>t.data, tuple(t.shape[i] for i in range(t.rank)),
            tuple(t.stride[i] for i in range(t.rank)), t.dtype, dev)


cdef enum:
    DEVICES_ANY = 0         # _build's device rule: none (explain(check_device=False), the fake op)
    DEVICES_ONE = 1         # every tensor on one device of any kind (explain: planning on CPU / meta)
    DEVICES_CUDA = 2        # every tensor on one CUDA device (prefill)


cdef int _device_error(int dev, object x, str name, object first_x, str first, int rule) except -1:
    if rule == DEVICES_CUDA and dev < 0:
        raise _errors.GdnDeviceError(f"{name}: must be a CUDA tensor, got device {x.device}")
    raise _errors.GdnDeviceError(f"{name}: is on {x.device} but {first} is on {first_x.device}; "
                                 "all tensors must be on one device")


cdef object _raise(int rc, const char *msg):
    raise _errors.BY_STATUS.get(rc, _errors.GdnError)(msg.decode())


cdef const char *_TENSOR_NAMES[10]
_TENSOR_NAMES[:] = [b"q", b"k", b"v", b"g", b"beta", b"out", b"state", b"cu_seqlens", b"state_indices", b"workspace"]


cdef int _build(gdn_problem_t *p, q, k, v, g, beta, out, state, cu_seqlens, state_indices,
                scale, use_qk_l2norm, int rule=DEVICES_ANY, gdn_tensor_t *ws=NULL,
                workspace=None) except -100:
    """Fill p (and ws from workspace, if given) from the arguments, checking their types (the
    library's GdnTypeError, naming the argument), then the device rule (DEVICES_*): an argument of
    the wrong kind is named as such whatever the devices of the others.  Returns the device code
    of the first tensor (a CUDA index, or DEV_*; DEV_NONE under DEVICES_ANY)."""
    cdef int dev[10]
    cdef int index = DEV_NONE, first = 0, i
    memset(p, 0, sizeof(gdn_problem_t))
    dev[0] = _fill(&p.q, q, "q", True)
    dev[1] = _fill(&p.k, k, "k", True)
    dev[2] = _fill(&p.v, v, "v", True)
    dev[3] = _fill(&p.g, g, "g", True)
    dev[4] = _fill(&p.beta, beta, "beta", True)
    dev[5] = _fill(&p.out, out, "out", True)
    dev[6] = _fill(&p.state, state, "state")
    dev[7] = _fill(&p.cu_seqlens, cu_seqlens, "cu_seqlens", True)
    dev[8] = _fill(&p.state_indices, state_indices, "state_indices")
    dev[9] = _fill(ws, workspace, "workspace") if ws != NULL else DEV_NONE
    p.scale = _scale(scale)
    p.use_qk_l2norm = 1 if _flag(use_qk_l2norm, "use_qk_l2norm") else 0
    if rule == DEVICES_ANY:
        return DEV_NONE
    for i in range(10):
        if dev[i] == DEV_NONE:
            continue
        if (rule == DEVICES_CUDA and dev[i] < 0) or (index != DEV_NONE and dev[i] != index):
            xs = (q, k, v, g, beta, out, state, cu_seqlens, state_indices, workspace)
            _device_error(dev[i], xs[i], _TENSOR_NAMES[i].decode(), xs[first], _TENSOR_NAMES[first].decode(), rule)
        if index == DEV_NONE:
            index = dev[i]
            first = i
    return index


cdef float _scale(object scale) except? -1.0:
    """scale: None (K^-1/2) or a real number (not a bool); finiteness is _validate's rule."""
    if scale is None:
        return GDN_HEAD_DIM_K ** -0.5
    if type(scale) is float or type(scale) is int:
        return <float>scale
    if isinstance(scale, bool) or not isinstance(scale, _numbers.Real):
        raise _errors.GdnTypeError(f"scale: must be a real number or None, got {type(scale).__qualname__}")
    return <float>float(scale)


cdef bint _flag(object x, str name) except -1:
    """A bool argument: True / False, or an integer-like 0 / 1 (numpy.bool_, numpy ints)."""
    if x is True:
        return True
    if x is False:
        return False
    try:
        i = _operator.index(x)
    except TypeError:
        i = None
        if type(x).__module__ == "numpy" and getattr(x, "ndim", None) == 0 and getattr(x, "dtype", None) == bool:
            return bool(x)      # numpy.bool_: no __index__ since numpy 2
    if i is None or (i != 0 and i != 1):
        raise _errors.GdnTypeError(f"{name}: must be a bool, got {type(x).__qualname__}"
                                   + (f" {x!r}" if i is not None else ""))
    return i == 1


cdef object _stream_handle(object stream):
    """The raw handle of prefill()'s `stream`: a torch.cuda.Stream (or anything with .cuda_stream)
    or an int handle."""
    if type(stream) is int:
        return stream
    h = getattr(stream, "cuda_stream", None)
    if type(h) is int:
        return h
    if isinstance(stream, int) and not isinstance(stream, bool):
        return int(stream)
    raise _errors.GdnTypeError(f"stream: must be a torch.cuda.Stream, a raw stream handle (int) or None, "
                               f"got {type(stream).__qualname__}")


cdef int _codes(object spine, object state_layout, int *spine_code, int *layout_code) except -1:
    if type(spine) is not str:
        raise _errors.GdnTypeError(f"spine: must be a str, got {type(spine).__qualname__}")
    if type(state_layout) is not str:
        raise _errors.GdnTypeError(f"state_layout: must be a str, got {type(state_layout).__qualname__}")
    if spine not in SPINES:
        raise _errors.GdnArgumentError(f"spine: must be one of {sorted(SPINES)}, got {spine!r}")
    if state_layout not in STATE_LAYOUTS:
        raise _errors.GdnArgumentError(f"state_layout: must be 'kv' or 'vk', got {state_layout!r}")
    spine_code[0] = SPINES[spine]
    layout_code[0] = STATE_LAYOUTS[state_layout]
    return 0


def workspace_bytes(int64_t T, int64_t N, int64_t Hv, fused=None):
    """Bytes of device workspace a call with T tokens, N sequences and Hv value heads needs:
    fused None, whichever plan it runs; True / False, the fused-output / unfused plan's
    (explain()["workspace_bytes"] is the one a given call runs)."""
    if fused is None:
        return gdn_workspace_bytes(T, N, Hv)
    return _plan_workspace_bytes(T, N, Hv, bool(fused))


_SUMMARY = os.environ.get("GDN_PREFILL_LOG_CALLS", "") not in ("", "0")


cdef int _stream_of(int device, void **sp) except -1:
    """The current stream of `device`, as prefill() launches on it: torch's DLPack table
    (current_work_stream) when torch has one, else torch's raw-stream query (the one Triton's
    launcher uses, ~0.3 us; torch.cuda.current_stream(device) builds a Stream object: 3.6 us per
    call on the H200, run 9)."""
    if _torch is None:
        _torch_init()
    if _dl_on and _dl != NULL:
        if _dl.current_work_stream(DL_CUDA, device, sp) != 0:
            return -1       # torch has set the Python error
        return 0
    query = getattr(_torch._C, "_cuda_getCurrentRawStream", None)
    sp[0] = <void *><uintptr_t>(query(device) if query is not None else _torch.cuda.current_stream(device).cuda_stream)
    return 0


def _current_raw_stream(int device):
    """Test hook: _stream_of(device) as an integer handle."""
    cdef void *sp = NULL
    _stream_of(device, &sp)
    return <uintptr_t>sp


cdef bint _compact(const gdn_tensor_t *t) noexcept nogil:
    """Row-major contiguous (strides of size-1 dims are free, as torch's is_contiguous())."""
    cdef int i
    cdef int64_t want = 1
    for i in range(t.rank - 1, -1, -1):
        if t.shape[i] != 1 and t.stride[i] != want:
            return False
        want *= t.shape[i]
    return True


cdef object _whole_sequence(object q):
    """cu_seqlens = [0, T] for a call without one, made on q's device by a kernel: no host-to-device
    copy, graph-capturable (q's type and rank checked first, so a bad q is named as such)."""
    cdef gdn_tensor_t t
    _fill(&t, q, "q", True)
    return _torch.arange(0, 2 * t.shape[0], max(t.shape[0], 1), dtype=_torch.int32, device=q.device)[:2]


cdef object _own_workspace(int64_t need, object stream, void *sp, int device):
    """The workspace prefill() allocates when the caller gives none.  torch's caching allocator
    orders a block's reuse on the stream current at allocation; when `stream` names another one,
    the block is allocated under that stream, so no other stream's work gets the bytes before
    this call's kernels are done with them."""
    cdef void *cur = NULL
    if stream is not None:
        _stream_of(device, &cur)
    if stream is None or cur == sp:
        return _torch.empty(max(need, 1), dtype=_torch.uint8, device=_torch.device("cuda", device))
    s = stream if isinstance(stream, _torch.cuda.Stream) else _torch.cuda.ExternalStream(<uintptr_t>sp, device=device)
    with _torch.cuda.stream(s):
        return _torch.empty(max(need, 1), dtype=_torch.uint8, device=_torch.device("cuda", device))


def prefill(q, k, v, g, beta, out, state=None, *, cu_seqlens=None, state_indices=None,
            state_layout="kv", scale=None, use_qk_l2norm=False, spine="auto",
            stream=None, workspace=None):
    """Run the Gated DeltaNet chunked prefill; writes `out` and updates `state` in place.

    q, k [T, Hk, 128] and v, out [T, Hv, 128] bf16 (last dim contiguous, other strides
    free); g [T, Hv] fp32 log-decay and beta [T, Hv] fp32/bf16 with any strides;
    cu_seqlens int32 [N+1] on the device (None: one sequence of T tokens); state fp32
    [P, Hv, 128, 128] ("kv": S[k, v]; "vk": S[v, k]) read as the initial state and
    overwritten with the final one (None: start from zero, no final state); with
    state_indices int32 [N], sequence n uses slot state_indices[n] and -1 skips the
    sequence entirely.  Returns the name of the spine that ran.
    """
    cdef gdn_problem_t p
    cdef gdn_tensor_t ws
    cdef int spine_code = 0, layout_code = 0, chosen = 0, rc, n, device, cur = -1, i
    cdef int ids[3]
    cdef char msg[MSG_CAP]
    cdef void *sp = NULL
    cdef int64_t ws_bytes = 1, need = 0
    torch = _torch if _torch is not None else _torch_init()
    _codes(spine, state_layout, &spine_code, &layout_code)
    if stream is not None:      # its type, like every argument's, before the device rule
        sp = <void *><uintptr_t>_stream_handle(stream)
    if cu_seqlens is None:
        cu_seqlens = _whole_sequence(q)
    device = _build(&p, q, k, v, g, beta, out, state, cu_seqlens, state_indices, scale, use_qk_l2norm,
                    DEVICES_CUDA, &ws, workspace)
    if stream is None:
        _stream_of(device, &sp)
    if workspace is None:
        # the plan's own bytes (the fused plan needs a fifth of the unfused one's at 64K tokens)
        with nogil:
            need = _call_workspace_bytes(&p, spine_code, layout_code)
        workspace = _own_workspace(need, stream, sp, device)
        _fill(&ws, workspace, "workspace")
    if ws.dtype != DTYPE_U8 or not _compact(&ws):
        raise _errors.GdnArgumentError("workspace: must be a contiguous uint8 CUDA tensor")
    for i in range(ws.rank):
        ws_bytes *= ws.shape[i]
    # the launches go to the current CUDA device: switch only when the tensors live elsewhere
    # (torch's device context manager costs ~2.4 us per call on the H200, run 9)
    if cudaGetDevice(&cur) != 0:
        cudaGetLastError()
        cur = -1
    if cur == device:
        with nogil:
            rc = gdn_prefill_raw(&p, spine_code, layout_code, ws.data, ws_bytes, <cudaStream_t>sp, &chosen,
                                 msg, MSG_CAP)
    else:
        with torch.cuda.device(device):
            with nogil:
                rc = gdn_prefill_raw(&p, spine_code, layout_code, ws.data, ws_bytes, <cudaStream_t>sp, &chosen,
                                     msg, MSG_CAP)
    if rc != GDN_OK:
        if rc == GDN_ERR_SPINE:
            _log.warning("gdn_prefill: %s", msg.decode())
        _raise(rc, msg)
    name = SPINE_NAMES[chosen]
    if spine_code == GDN_SPINE_AUTO and chosen != GDN_SPINE_WGMMA and _log.isEnabledFor(logging.DEBUG):
        if _spine_guard(&p, GDN_SPINE_WGMMA, layout_code, msg) != GDN_OK:
            _log.debug("gdn_prefill: spine=auto ran %s; wgmma rejected: %s", name, msg.decode())
    if _SUMMARY:
        # the launches prefill() just made: two for the fused-output plan, its spine build is ids[1]
        n = _select_ids(&p, chosen, layout_code, 0, -1, -1, _sm_count(), ids)
        _log.info("gdn_prefill: spine=%s T=%d N=%d Hk=%d Hv=%d state=%s grid(spine)=%s build=%s", name,
                  p.q.shape[0], p.cu_seqlens.shape[0] - 1, p.q.shape[1], p.v.shape[1], state_layout,
                  _spine_grid(chosen, p.q.shape[0], p.cu_seqlens.shape[0] - 1, p.v.shape[1], 0, n == 2,
                              gdn_variant_name(ids[1]).decode()),
                  gdn_variant_name(ids[1]).decode())
    return name


def _spine_grid(int chosen, T, N, Hv, int warpgroups=0, bint fused=False, str name=""):
    """Grid of the spine build that runs (warpgroups 0: the launcher's rule for N, Hv; fused: the
    fused plan's spine_rs_o build `name`)."""
    if fused:
        return _plan.grid_spine_rs(T, N, Hv, "_dual_" in name)
    if chosen == GDN_SPINE_WGMMA:
        return _plan.grid_spine_wgmma(T, N, Hv, warpgroups or _wgmma_warpgroups(N, Hv))
    return _plan.grid_spine_scalar(T, N, Hv)


def explain(q, k, v, g, beta, out, state=None, *, cu_seqlens=None, state_indices=None,
            state_layout="kv", scale=None, use_qk_l2norm=False, spine="auto",
            stream=None, workspace=None, check_device=True):
    """The plan prefill() would run, without launching anything.

    Takes prefill's arguments and applies every rule prefill() applies that does not need the GPU
    itself: the tensors may live on the CPU or be "meta" tensors, but on one device (any device
    each with check_device=False), and a given workspace must fit the plan.  Returns a dict: "spines" maps each spine to "runs" or the
    guard that rejects it; "chosen" the spine "auto" (or the requested one) runs;
    "kernels" the builds with grid, block and shared-memory bytes (two when the output is
    fused into the spine, else three); "fused_output" is "runs" or the reason the unfused plan
    runs instead; "overlap" is "runs: ..." when stage 1 is split around the spine (the
    recompute_wu build then launches twice, over chunk slots [0, overlap_split) and the rest;
    "overlap_split" that slot, else None) or the reason the serial plan runs; "workspace_bytes".
    Raises the same errors prefill() raises.
    """
    cdef gdn_problem_t p, pw
    cdef gdn_tensor_t ws
    cdef int spine_code = 0, layout_code = 0, chosen = 0, rc, s, n = 0, sms, i
    cdef int64_t ws_bytes = 1
    cdef int ids[3]
    cdef char msg[MSG_CAP]
    cdef char why[MSG_CAP]
    if _torch is None:
        _torch_init()
    _codes(spine, state_layout, &spine_code, &layout_code)
    if stream is not None:
        _stream_handle(stream)
    check_device = _flag(check_device, "check_device")
    if cu_seqlens is None:
        cu_seqlens = _whole_sequence(q)
    _build(&p, q, k, v, g, beta, out, state, cu_seqlens, state_indices, scale, use_qk_l2norm,
           DEVICES_ONE if check_device else DEVICES_ANY, &ws, workspace)
    rc = _validate(&p, layout_code, msg)
    if rc != GDN_OK:
        _raise(rc, msg)
    spines = {}
    for s in (GDN_SPINE_SCALAR, GDN_SPINE_WGMMA):
        spines[SPINE_NAMES[s]] = "runs" if _spine_guard(&p, s, layout_code, why) == GDN_OK else why.decode()
        if spines[SPINE_NAMES[s]] != "runs":
            _log.debug("gdn_prefill: explain: spine %s rejected: %s", SPINE_NAMES[s], spines[SPINE_NAMES[s]])
    rc = _choose(&p, spine_code, layout_code, &chosen, msg)
    if rc != GDN_OK:
        if rc == GDN_ERR_SPINE:
            _log.warning("gdn_prefill: %s", msg.decode())
        _raise(rc, msg)
    sms = _sm_count() if check_device else GDN_SM_COUNT
    rc = _stage_ids(&p, chosen, layout_code, sms, ids, &n, msg)
    if rc != GDN_OK:
        _raise(rc, msg)
    fused = "runs" if _fused_guard(&p, chosen, layout_code, sms, why) == GDN_OK else why.decode()
    if workspace is not None:
        # prefill()'s workspace rules, on a copy (size for this plan, alignment, no shared bytes)
        if ws.dtype != DTYPE_U8 or not _compact(&ws):
            raise _errors.GdnArgumentError("workspace: must be a contiguous uint8 CUDA tensor")
        for i in range(ws.rank):
            ws_bytes *= ws.shape[i]
        pw = p
        rc = _bind_workspace(&pw, ws.data, ws_bytes, n == 2, msg)
        if rc != GDN_OK:
            _raise(rc, msg)
    T, N, Hv = p.q.shape[0], p.cu_seqlens.shape[0] - 1, p.v.shape[1]
    cb = _plan.chunk_slots(T, N)
    split = _plan_split(&p, n, sms)
    if split > 0:
        overlap = (f"runs: recompute_wu's chunk slots [0, {split}) first, then the spine beside slots "
                   f"[{split}, {cb}) (library side stream; the first call inside a graph capture runs "
                   "the serial plan)")
    elif n != 2:
        overlap = "only the fused-output plan overlaps stage 1 with the spine"
    elif cb < GDN_OVERLAP_MIN_SLOTS:
        overlap = f"{cb} chunk slots: fewer than GDN_OVERLAP_MIN_SLOTS = {GDN_OVERLAP_MIN_SLOTS}"
    elif not _overlap_fits(N, Hv, sms):
        overlap = (f"the spine's {_rs_ctas(N, Hv)} CTAs would hold more than "
                   f"half of the {sms} SMs that stage 1 needs beside it")
    else:
        overlap = OVERLAP_OFF
    spine_name = SPINE_NAMES[chosen]
    grids = (_plan.grid_recompute_wu(T, N, Hv),
             _spine_grid(chosen, T, N, Hv, 0, n == 2, gdn_variant_name(ids[1]).decode() if ids[1] >= 0 else ""),
             _plan.grid_fwd_o(T, N, Hv))
    kernels = [(gdn_variant_name(ids[i]).decode(), grids[i]) for i in range(n)]
    from gdn_prefill import _manifest
    return {
        "spines": spines,
        "chosen": spine_name,
        "fused_output": fused,
        "kernels": [dict(name=name, grid=tuple(int(x) for x in grid), **_manifest.launch_info(name))
                    for name, grid in kernels],
        "workspace_bytes": int(_plan_workspace_bytes(T, N, Hv, n == 2)),
        "chunk_slots": int(cb),
        "overlap": overlap,
        "overlap_split": int(split) if split > 0 else None,
    }


def workspace_layout(int64_t T, int64_t N, int64_t Hv, bint fused=True):
    """{name: (byte offset, shape, dtype name)} of one plan's workspace tensors (gdn_abi.h; fused:
    the fused-output plan's gcum, rq, rk, ready, tu, pqk, order, else the unfused plan's gcum, rq,
    rk, ready, w, u, vnew, h); shape is the storage's row-major shape: (Hv, T) for gcum, rq and rk,
    which are stored head-major (the kernels index them [t, hv]), the logical shape for the others."""
    cdef gdn_problem_t p
    cdef char *base = <char *>GDN_WORKSPACE_ALIGN_BYTES  # any aligned non-NULL base: offsets only
    _carve(&p, base, T, N, Hv, fused)
    names = ("gcum", "rq", "rk", "ready", "w", "u", "vnew", "h", "pqk", "tu", "order")
    cdef gdn_tensor_t *ts[11]
    ts[:] = [&p.gcum, &p.rq, &p.rk, &p.ready, &p.w, &p.u, &p.vnew, &p.h, &p.pqk, &p.tu, &p.order]
    out = {}
    for i in range(len(names)):
        if ts[i].data == NULL:
            continue                                      # the other plan's
        strides = [ts[i].stride[j] for j in range(ts[i].rank)]
        order = sorted(range(ts[i].rank), key=lambda j: -strides[j])          # storage order
        out[names[i]] = (<uintptr_t>ts[i].data - <uintptr_t>base, tuple(ts[i].shape[j] for j in order),
                         _dtype_name(ts[i].dtype).decode())
    return out


cdef int _check_rs_build(int rs_build) except -1:
    """The benchmark hooks' forced spine_rs_o build: -1 (the rule) or a code of _RS_BUILDS."""
    if rs_build < -1 or rs_build >= NUM_RS_BUILDS:
        raise _errors.GdnArgumentError(f"rs_build: must be -1 (the rule), 0 (solo), 1 (pair) or 2 (dual), got {rs_build}")
    return 0


def _builds(q, k, v, g, beta, out, state=None, *, cu_seqlens, state_indices=None, str state_layout="kv",
            str spine="auto", int warpgroups=0, int fused=-1, int rs_build=-1):
    """Benchmark hook: the variant names of the launches _launch_stages(..., warpgroups, fused,
    rs_build) makes (what explain() lists for the rules, warpgroups 0, fused -1 and rs_build -1)."""
    cdef gdn_problem_t p
    cdef int spine_code = 0, layout_code = 0, chosen = 0, rc, n, i
    cdef int ids[3]
    cdef char msg[MSG_CAP]
    _codes(spine, state_layout, &spine_code, &layout_code)
    _build(&p, q, k, v, g, beta, out, state, cu_seqlens, state_indices, None, False)
    rc = _validate(&p, layout_code, msg)
    if rc == GDN_OK:
        rc = _choose(&p, spine_code, layout_code, &chosen, msg)
    if rc != GDN_OK:
        _raise(rc, msg)
    _check_rs_build(rs_build)
    n = _select_ids(&p, chosen, layout_code, warpgroups, fused, rs_build, _sm_count(), ids)
    return [gdn_variant_name(ids[i]).decode() if ids[i] >= 0 else None for i in range(n)]


def _launch_stages(stages, q, k, v, g, beta, out, state=None, *, cu_seqlens, state_indices=None,
                   str state_layout="kv", scale=None, bint use_qk_l2norm=False, str spine="auto", workspace,
                   int warpgroups=0, int fused=-1, int64_t overlap_split=-1, int rs_build=-1):
    """Test hook: validate like prefill(), then launch only the named stages on the current stream.

    `stages` is a subset of ("recompute_wu", "spine", "fwd_o"), run in that order,
    so GPU tests can check each stage's workspace output against the fp64 oracle.  The builds
    are the ones prefill() picks; `warpgroups` 1 or 2 forces the unfused plan's wgmma spine
    build of that regime instead (benchmarks of the warpgroups rule; 0: the rule), `rs_build` 0 / 1
    / 2 the fused plan's solo, pair or dual spine_rs_o build (benchmarks of its rule; -1: the rule) and
    `fused` 0 / 1 the unfused or the fused-output plan (-1: the rule; the fused plan has no fwd_o
    stage and writes no h / vnew).
    With both stages of the fused plan, `overlap_split` 0 runs the serial plan, s > 0 the overlap
    plan split at chunk slot s (wherever the rule's deadlock guard allows it, also below its
    minimum of chunk slots), -1 the rule; the other stage sets run serially.
    """
    cdef gdn_problem_t p
    cdef int spine_code = 0, layout_code = 0, chosen = 0, rc, i, n = 0, nplan, sms
    cdef int64_t split = 0
    cdef int all_ids[3]
    cdef int ids[3]
    cdef char msg[MSG_CAP]
    import torch
    _codes(spine, state_layout, &spine_code, &layout_code)
    if warpgroups < 0 or warpgroups > NUM_SPINE_WG:
        raise _errors.GdnArgumentError(f"warpgroups: must be 0 (the rule), 1 or 2, got {warpgroups}")
    if fused < -1 or fused > 1:
        raise _errors.GdnArgumentError(f"fused: must be -1 (the rule), 0 or 1, got {fused}")
    _check_rs_build(rs_build)
    _build(&p, q, k, v, g, beta, out, state, cu_seqlens, state_indices, scale, use_qk_l2norm)
    rc = _prepare(&p, spine_code, layout_code, &chosen, msg)
    if rc == GDN_OK and warpgroups != 0 and chosen != GDN_SPINE_WGMMA:
        raise _errors.GdnArgumentError("warpgroups: only the wgmma spine has builds by warpgroups")
    order = ("recompute_wu", "spine", "fwd_o")
    if rc == GDN_OK:
        sms = _sm_count()
        nplan = _select_ids(&p, chosen, layout_code, warpgroups, fused, rs_build, sms, all_ids)
        rc = _bind_workspace(&p, <void *><uintptr_t>workspace.data_ptr(), workspace.numel(), nplan == 2, msg)
    if rc == GDN_OK:
        # only the requested stages must be compiled in
        if fused == 1 and _fused_guard(&p, chosen, layout_code, sms, msg) != GDN_OK:
            raise _errors.GdnSpineError(f"fused: {msg.decode()}")
        for stage in stages:
            if stage not in order:
                raise _errors.GdnArgumentError(f"stages: {stage!r} is not one of {order}")
        for i in range(3):
            if order[i] in stages:
                if i >= nplan:
                    raise _errors.GdnArgumentError(f"stage {order[i]} is not part of the fused-output plan")
                if all_ids[i] < 0:
                    raise _errors.GdnSpineError(f"stage {order[i]} is not compiled into this build")
                ids[n] = all_ids[i]
                n += 1
        stream_ptr = torch.cuda.current_stream().cuda_stream
        split = 0
        if nplan == 2 and n == 2:
            if overlap_split < 0:
                split = _plan_split(&p, n, sms)
            elif overlap_split > 0:
                # a forced split may ignore the rule's GDN_OVERLAP_MIN_SLOTS (a speed threshold that
                # bench_overlap.py measures) but never its deadlock guard
                if not _overlap_fits(p.cu_seqlens.shape[0] - 1, p.v.shape[1], sms):
                    raise _errors.GdnArgumentError("overlap_split: the spine's CTAs would hold more than half of "
                                                   "the SMs, which the second part of stage 1 needs (deadlock guard)")
                if overlap_split >= p.slot_end:
                    raise _errors.GdnArgumentError(f"overlap_split: must be below the {p.slot_end} chunk slots")
                split = overlap_split
        if split > 0:
            rc = _launch_overlap(&p, ids, split, <cudaStream_t><uintptr_t>stream_ptr, msg)
        else:
            rc = _launch(&p, ids, n, <cudaStream_t><uintptr_t>stream_ptr, msg)
    if rc != GDN_OK:
        _raise(rc, msg)
    return SPINE_NAMES[chosen]
