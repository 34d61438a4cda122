# Every rule of docs/DESIGN.md §2 that does not depend on the spine (_validate and its helpers).
# (Included by _ext.pyx: one module, one namespace; the order of the includes is the order of
# definition.)

# ----------------------------------------------------------------------------- guards
cdef enum:
    DTYPE_I64 = 101         # int64 index tensors: no GDN_DTYPE_* (the kernels read int32); prefill()
                            # converts them on the device (api.pxi _convert), the C entry refuses them


cdef const char *_dtype_name(int d) noexcept nogil:
    if d == GDN_DTYPE_BF16:
        return "bfloat16"
    if d == GDN_DTYPE_F16:
        return "float16"
    if d == GDN_DTYPE_F32:
        return "float32"
    if d == GDN_DTYPE_I32:
        return "int32"
    if d == GDN_DTYPE_F8E4M3:
        return "float8_e4m3fn"
    if d == GDN_DTYPE_U8:
        return "uint8"
    if d == GDN_DTYPE_BOOL:
        return "bool"
    if d == DTYPE_I64:
        return "int64"
    return "an unsupported dtype"


cdef int64_t _elsize(int d) noexcept nogil:
    if d == GDN_DTYPE_F8E4M3 or d == GDN_DTYPE_U8 or d == GDN_DTYPE_BOOL:
        return 1
    if d == DTYPE_I64:
        return 8
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


cdef inline bint _is_pool_dtype(int d) noexcept nogil:
    """The state pools' element types: every spine has a build for each (cute_kernels/state_pool.py
    STATE_DTYPES); read once, rounded once when written, fp32 inside the kernels."""
    return d == GDN_DTYPE_F32 or d == GDN_DTYPE_BF16 or d == GDN_DTYPE_F16 or d == GDN_DTYPE_F8E4M3


cdef int _pool_dtype(const gdn_tensor_t *t, const char *name, char *msg) noexcept nogil:
    if _is_pool_dtype(t.dtype):
        return GDN_OK
    snprintf(msg, MSG_CAP, "%s: dtype must be float32, bfloat16, float16 or float8_e4m3fn (a state pool's "
             "types), got %s", name, _dtype_name(t.dtype))
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


cdef inline bint _ranges_overlap(uintptr_t alo, uintptr_t ahi, uintptr_t blo, uintptr_t bhi) noexcept nogil:
    """Two byte ranges [lo, hi), neither empty, share a byte."""
    return alo < ahi and blo < bhi and alo < bhi and blo < ahi


cdef int _no_overlap(const gdn_tensor_t *a, const char *an, const gdn_tensor_t *b, const char *bn,
                     char *msg) noexcept nogil:
    cdef uintptr_t alo, ahi, blo, bhi
    _extent(a, &alo, &ahi)
    _extent(b, &blo, &bhi)
    if _ranges_overlap(alo, ahi, blo, bhi):
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
    heads) <= 65,535, grid.x (recompute_wu's chunk slots x heads, the register-state spine's 64-column
    blocks) <= 2^31 - 1 (grids.py's grid functions)."""
    cdef int64_t blocks = max(_chunk_slots(T, N), (N + 1) * (GDN_HEAD_DIM_V // GDN_RS_SPINE_VBLOCK)) * Hv
    if Hv > 65535:
        snprintf(msg, MSG_CAP, "v: %lld value heads exceed the 65,535 a launch's grid.y can hold", <long long>Hv)
        return GDN_ERR_SHAPE
    if blocks > 0x7fffffff:
        snprintf(msg, MSG_CAP, "v: %lld value heads x %lld chunk slots need %lld blocks; a launch's grid.x holds "
                 "at most 2^31 - 1", <long long>Hv, <long long>_chunk_slots(T, N), <long long>blocks)
        return GDN_ERR_SHAPE
    return GDN_OK


cdef int _pool_shape(const gdn_tensor_t *t, const char *name, int64_t N, int64_t Hv, bint indexed,
                     char *msg) noexcept nogil:
    """A state pool (state, initial_state): [P, Hv, 128, 128], P = N without state_indices."""
    cdef int rc = _dim(t, name, 1, Hv, "value heads, as in v", msg)
    if rc: return rc
    rc = _dim(t, name, 2, GDN_HEAD_DIM_K, "head dim; 128", msg)
    if rc: return rc
    rc = _dim(t, name, 3, GDN_HEAD_DIM_V, "head dim; 128", msg)
    if rc: return rc
    if not indexed:
        rc = _dim(t, name, 0, N, "one state per sequence without state_indices, N = len(cu_seqlens) - 1", msg)
        if rc: return rc
    if t.shape[0] > 0x7fffffff:
        snprintf(msg, MSG_CAP, "%s: %lld slots exceed the int32 index range", name, <long long>t.shape[0])
        return GDN_ERR_SHAPE
    return GDN_OK


cdef int _pool_layout(const gdn_tensor_t *t, const char *name, char *msg) noexcept nogil:
    """A state pool's layout: each head's 128 x 128 block contiguous and 16-byte aligned."""
    cdef int rc = _layout(t, name, True, msg)
    if rc: return rc
    if t.stride[2] != GDN_HEAD_DIM_V:
        snprintf(msg, MSG_CAP, "%s: dim 2 has stride %lld; each head's 128x128 block must be "
                 "contiguous (stride 128)", name, <long long>t.stride[2])
        return GDN_ERR_LAYOUT
    if (<uintptr_t>t.data) % GDN_TMA_ALIGN_BYTES != 0:
        snprintf(msg, MSG_CAP, "%s: data pointer is not 16-byte aligned", name)
        return GDN_ERR_LAYOUT
    cdef int64_t per16 = 16 // _elsize(t.dtype)
    if t.stride[0] % per16 != 0 or t.stride[1] % per16 != 0:
        snprintf(msg, MSG_CAP, "%s: slot and head strides (%lld, %lld) must be multiples of %lld elements "
                 "(16-byte aligned blocks)", name, <long long>t.stride[0], <long long>t.stride[1],
                 <long long>per16)
        return GDN_ERR_LAYOUT
    return GDN_OK


cdef int _checkpoints_given(const gdn_problem_t *p, char *msg) noexcept nogil:
    """The checkpoint table and its interval come together, with a pool they write into and the
    state_indices that keep it apart from the live states (without indices every pool slot is
    a sequence's own) unless they go into a checkpoint_pool of their own; the entries themselves are
    trusted device values, as state_indices are."""
    if p.checkpoint_pool.rank != 0 and p.checkpoints.rank == 0:
        snprintf(msg, MSG_CAP, "checkpoint_pool: given without checkpoints (the table of its slots) and "
                 "checkpoint_every")
        return GDN_ERR_ARGUMENT
    if p.checkpoint_chunks < 0:
        snprintf(msg, MSG_CAP, "checkpoint_every: must be positive, got %d chunks", <int>p.checkpoint_chunks)
        return GDN_ERR_ARGUMENT
    if p.checkpoints.rank == 0:
        if p.checkpoint_chunks != 0:
            snprintf(msg, MSG_CAP, "checkpoint_every: given without a checkpoints table")
            return GDN_ERR_ARGUMENT
        return GDN_OK
    cdef int rc = _need(&p.checkpoints, "checkpoints", 2, msg)
    if rc: return rc
    if p.checkpoint_chunks == 0:
        snprintf(msg, MSG_CAP, "checkpoints: given without checkpoint_every (the interval in tokens)")
        return GDN_ERR_ARGUMENT
    if p.checkpoint_pool.rank != 0:
        return GDN_OK          # a pool of their own: no live state to keep them apart from
    if p.state.rank == 0:
        snprintf(msg, MSG_CAP, "checkpoints: given without a pool to write them into (state, or a "
                 "checkpoint_pool)")
        return GDN_ERR_ARGUMENT
    if p.state_indices.rank == 0:
        snprintf(msg, MSG_CAP, "checkpoints: need state_indices (without them every pool slot is a "
                 "sequence's live state, which a checkpoint would overwrite)")
        return GDN_ERR_ARGUMENT
    return GDN_OK


cdef int _checkpoint_pool_apart(const gdn_problem_t *p, char *msg) noexcept nogil:
    """A checkpoint_pool of its own is an output: its slots distinct memory, sharing none with any
    other tensor of the call (the state pool itself is passed as state, or as the absent pool)."""
    cdef const gdn_tensor_t *others[12]
    cdef const char *names[12]
    cdef int i, rc
    if p.checkpoint_pool.rank == 0:
        return GDN_OK
    rc = _no_self_overlap(&p.checkpoint_pool, "checkpoint_pool", msg)
    if rc: return rc
    others[:] = [&p.q, &p.k, &p.v, &p.g, &p.beta, &p.out, &p.state, &p.cu_seqlens, &p.state_indices,
                 &p.checkpoints, &p.initial_state, &p.has_initial]
    names[:] = [b"q", b"k", b"v", b"g", b"beta", b"out", b"state", b"cu_seqlens", b"state_indices", b"checkpoints",
                b"initial_state", b"has_initial_state"]
    for i in range(12):
        if others[i].rank != 0:
            rc = _no_overlap(&p.checkpoint_pool, "checkpoint_pool", others[i], names[i], msg)
            if rc: return rc
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
    if p.initial_state.rank != 0:
        rc = _need(&p.initial_state, "initial_state", 4, msg)
        if rc: return rc
        if p.zero_initial:
            snprintf(msg, MSG_CAP, "has_initial_state: False, but an initial_state was given")
            return GDN_ERR_ARGUMENT
    if p.state_indices.rank != 0:
        rc = _need(&p.state_indices, "state_indices", 1, msg)
        if rc: return rc
        if p.state.rank == 0 and p.initial_state.rank == 0:
            snprintf(msg, MSG_CAP, "state_indices: given without a state pool to index")
            return GDN_ERR_ARGUMENT
    rc = _checkpoints_given(p, msg)
    if rc: return rc
    if p.batch_invariant != 0 and p.batch_invariant != 1:
        snprintf(msg, MSG_CAP, "batch_invariant: must be 0 or 1, got %d", <int>p.batch_invariant)
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
        rc = _pool_dtype(&p.state, "state", msg)
        if rc: return rc
    if p.initial_state.rank != 0:
        rc = _pool_dtype(&p.initial_state, "initial_state", msg)
        if rc: return rc
        if p.state.rank != 0 and p.initial_state.dtype != p.state.dtype:
            snprintf(msg, MSG_CAP, "initial_state: dtype %s differs from state's %s; the pools share one type",
                     _dtype_name(p.initial_state.dtype), _dtype_name(p.state.dtype))
            return GDN_ERR_DTYPE
    if p.state_indices.rank != 0:
        rc = _dtype(&p.state_indices, "state_indices", GDN_DTYPE_I32, 0, msg)
        if rc: return rc
    if p.checkpoints.rank != 0:
        rc = _dtype(&p.checkpoints, "checkpoints", GDN_DTYPE_I32, 0, msg)
        if rc: return rc
    if p.checkpoint_pool.rank != 0:
        rc = _need(&p.checkpoint_pool, "checkpoint_pool", 4, msg)
        if rc: return rc
        rc = _pool_dtype(&p.checkpoint_pool, "checkpoint_pool", msg)
        if rc: return rc
        if (p.state.rank != 0 or p.initial_state.rank != 0) and p.checkpoint_pool.dtype != _pool_type(p):
            snprintf(msg, MSG_CAP, "checkpoint_pool: dtype %s differs from the state pool's %s; the pools share "
                     "one type", _dtype_name(p.checkpoint_pool.dtype), _dtype_name(_pool_type(p)))
            return GDN_ERR_DTYPE
    if p.has_initial.rank != 0:
        rc = _need(&p.has_initial, "has_initial_state", 1, msg)
        if rc: return rc
        rc = _dtype(&p.has_initial, "has_initial_state", GDN_DTYPE_BOOL, GDN_DTYPE_U8, msg)
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
        rc = _pool_shape(&p.state, "state", N, Hv, p.state_indices.rank != 0, msg)
        if rc: return rc
    if p.initial_state.rank != 0:
        rc = _pool_shape(&p.initial_state, "initial_state", N, Hv, p.state_indices.rank != 0, msg)
        if rc: return rc
        if p.state.rank != 0:
            rc = _dim(&p.initial_state, "initial_state", 0, p.state.shape[0], "slots, as in state", msg)
            if rc: return rc
    if p.state_indices.rank != 0:
        rc = _dim(&p.state_indices, "state_indices", 0, N, "one slot per sequence, N = len(cu_seqlens) - 1", msg)
        if rc: return rc
    if p.checkpoints.rank != 0:
        rc = _dim(&p.checkpoints, "checkpoints", 0, N, "one row per sequence, N = len(cu_seqlens) - 1", msg)
        if rc: return rc
    if p.checkpoint_pool.rank != 0:
        rc = _pool_shape(&p.checkpoint_pool, "checkpoint_pool", N, Hv, True, msg)
        if rc: return rc
    if p.has_initial.rank != 0:
        rc = _dim(&p.has_initial, "has_initial_state", 0, N, "one entry per sequence, N = len(cu_seqlens) - 1",
                  msg)
        if rc: return rc
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
    if p.checkpoints.rank != 0:
        rc = _layout(&p.checkpoints, "checkpoints", True, msg)
        if rc: return rc
    if p.state.rank != 0:
        rc = _pool_layout(&p.state, "state", msg)
        if rc: return rc
    if p.initial_state.rank != 0:
        rc = _pool_layout(&p.initial_state, "initial_state", msg)
        if rc: return rc
    if p.checkpoint_pool.rank != 0:
        rc = _pool_layout(&p.checkpoint_pool, "checkpoint_pool", msg)
        if rc: return rc
    if p.has_initial.rank != 0:
        rc = _layout(&p.has_initial, "has_initial_state", False, msg)
        if rc: return rc
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
    rc = _no_overlap(&p.out, "out", &p.checkpoints, "checkpoints", msg)
    if rc: return rc
    rc = _no_overlap(&p.state, "state", &p.checkpoints, "checkpoints", msg)
    if rc: return rc
    rc = _no_overlap(&p.out, "out", &p.initial_state, "initial_state", msg)
    if rc: return rc
    rc = _no_overlap(&p.state, "state", &p.initial_state, "initial_state", msg)
    if rc: return rc
    rc = _no_overlap(&p.out, "out", &p.has_initial, "has_initial_state", msg)
    if rc: return rc
    rc = _no_overlap(&p.state, "state", &p.has_initial, "has_initial_state", msg)
    if rc: return rc
    rc = _checkpoint_pool_apart(p, msg)
    if rc: return rc
    if not isfinite(p.scale):
        snprintf(msg, MSG_CAP, "scale: must be finite")
        return GDN_ERR_ARGUMENT
    return GDN_OK
