# The workspace: each plan's tensors carved from one buffer (gdn_abi.h lists them).
# (Included by _ext.pyx: one module, one namespace; the order of the includes is the order of
# definition.)

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
