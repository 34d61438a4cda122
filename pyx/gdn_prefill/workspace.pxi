# The workspace: each plan's tensors carved from one buffer (gdn_abi.h lists them).
# (Included by _ext.pyx: one module, one namespace; the order of the includes is the order of
# definition.)

# ----------------------------------------------------------------------------- workspace
cdef inline int64_t _aligned(int64_t n) noexcept nogil:
    return (n + GDN_WORKSPACE_ALIGN_BYTES - 1) // GDN_WORKSPACE_ALIGN_BYTES * GDN_WORKSPACE_ALIGN_BYTES


cdef int64_t _carve(gdn_problem_t *p, char *base, int64_t T, int64_t N, int64_t Hv, int kind,
                    int32_t seg_chunks) noexcept nogil:
    """Lay one plan's workspace tensors out from `base` (NULL: only count); returns the bytes used.
    The fused plans' (PLAN_SERIAL, PLAN_OVERLAP): gcum, rq, rk, ready, tu, pqk, order, beta32; the
    segmented plan's: those, maps and seg_state (M = segment slots of seg_chunks chunks); the
    unfused plan's: gcum, rq, rk, ready, w, u, vnew, h; the single plan's: none (0 bytes).  The
    other plans' tensors get their shapes
    and no memory (data NULL): their kernels take them as parameters and never touch them (at
    1 x 65536, Hv = 32: 536 MiB against 2,585 MiB)."""
    cdef int64_t CB = _chunk_slots(T, N)
    cdef int64_t K = GDN_HEAD_DIM_K, V = GDN_HEAD_DIM_V
    cdef int64_t M = _segment_slots(T, N, seg_chunks) if kind == PLAN_SEGMENTED else 0
    cdef int64_t off = 0
    if kind == PLAN_SINGLE:
        base = NULL                                            # single_prefill keeps it all on chip
    cdef char *fb = NULL if kind == PLAN_UNFUSED else base     # the fused plans' tensors
    cdef char *ub = base if kind == PLAN_UNFUSED else NULL     # the unfused plan's
    cdef char *sb = base if kind == PLAN_SEGMENTED else NULL   # the segmented plan's own
    # gcum, rq, rk: [T, Hv] stored head-major, so a chunk's rows of one head are contiguous
    off = _head_major(&p.gcum, base, off, T, Hv)
    off = _head_major(&p.rq, base, off, T, Hv)
    off = _head_major(&p.rk, base, off, T, Hv)
    off = _piece(&p.ready, base, off, GDN_DTYPE_I32, 2, CB, Hv, 1, 1)
    cdef int64_t shared = off
    off = _piece(&p.tu, fb, off, GDN_DTYPE_BF16, 3, T, Hv, GDN_CHUNK, 1)
    off = _piece(&p.pqk, fb, off, GDN_DTYPE_BF16, 3, T, Hv, GDN_CHUNK, 1)
    off = _piece(&p.order, fb, off, GDN_DTYPE_I32, 1, N, 1, 1, 1)
    off = _head_major(&p.beta32, fb, off, T, Hv)
    cdef int64_t fused_end = off
    off = _piece(&p.maps, sb, off, GDN_DTYPE_F32, 4, 2 * M, Hv, K, V)
    off = _piece(&p.seg_state, sb, off, GDN_DTYPE_F32, 4, M, Hv, K, V)
    cdef int64_t segmented_end = off
    off = _piece(&p.w, ub, shared, GDN_DTYPE_BF16, 3, T, Hv, K, 1)
    off = _piece(&p.u, ub, off, GDN_DTYPE_BF16, 3, T, Hv, V, 1)
    off = _piece(&p.vnew, ub, off, GDN_DTYPE_BF16, 3, T, Hv, V, 1)
    off = _piece(&p.h, ub, off, GDN_DTYPE_BF16, 4, CB, Hv, K, V)
    if kind == PLAN_UNFUSED:
        return off
    if kind == PLAN_SINGLE:
        return 0
    return segmented_end if kind == PLAN_SEGMENTED else fused_end


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


cdef int64_t _plan_workspace_bytes(int64_t T, int64_t N, int64_t Hv, int kind, int32_t seg_chunks) noexcept nogil:
    """Bytes of workspace one plan needs (_carve)."""
    cdef gdn_problem_t scratch
    return _carve(&scratch, NULL, T, N, Hv, kind, seg_chunks)


cdef int64_t _segmented_extra_bound(int64_t T, int64_t N, int64_t Hv) noexcept nogil:
    """The most bytes the segmented plan's maps and seg_state take beyond the serial fused plan's
    workspace, over every segment length the planner may pick: M segment slots of 3 states of 64 KiB
    per head, M Hv <= GDN_SEG_MAX_CTAS / 2 (_choose_segments) and M <= _segment_slots(T, N, 1) (one
    chunk per segment); none below two chunks of tokens (nothing to split)."""
    if T < 2 * GDN_CHUNK:
        return 0
    cdef int64_t heads_slots = min(<int64_t>(GDN_SEG_MAX_CTAS // 2), Hv * _segment_slots(T, N, 1))
    return 3 * heads_slots * GDN_HEAD_DIM_K * GDN_HEAD_DIM_V * 4 + 2 * GDN_WORKSPACE_ALIGN_BYTES


cdef int64_t gdn_workspace_bytes(int64_t T, int64_t N, int64_t Hv) noexcept nogil:
    """Bytes of workspace that serve any call with these sizes, whichever plan it runs (the
    segmented plan's by its bound, _segmented_extra_bound)."""
    return max(_plan_workspace_bytes(T, N, Hv, PLAN_SERIAL, 0) + _segmented_extra_bound(T, N, Hv),
               _plan_workspace_bytes(T, N, Hv, PLAN_UNFUSED, 0))
