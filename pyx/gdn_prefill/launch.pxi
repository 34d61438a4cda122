# Plan and launch: the launches of one call, in order, and gdn_prefill_raw.
# (Included by _ext.pyx: one module, one namespace; the order of the includes is the order of
# definition.)

# ----------------------------------------------------------------------------- plan + launch
cdef inline int _state_source(const gdn_problem_t *p) noexcept nogil:
    """gdn_problem_t.state_in of a validated problem (its one home: _derive sets it, explain()
    reports it): 0 zeros (has_initial_state=False, or no pool), 2 initial_state, 1 state in place;
    with a per-sequence has_initial mask, 3 and 4 for 1 and 2 (the sequences whose entry is 0 start
    from zeros: cute_kernels/state_pool.py source)."""
    cdef int src
    if p.zero_initial:
        return 0
    if p.initial_state.rank != 0:
        src = 2
    else:
        src = 1 if p.state.rank != 0 else 0
    if src != 0 and p.has_initial.rank != 0:
        src += 2
    return src


cdef void _logical_kv(gdn_tensor_t *t) noexcept nogil:
    """A bound "vk" pool [P, Hv, V, K] as its logical S[k, v] view: its last two strides swapped."""
    cdef int64_t tmp
    if t.rank != 0:
        tmp = t.stride[2]
        t.stride[2] = t.stride[3]
        t.stride[3] = tmp


cdef void _empty_pool_view(gdn_tensor_t *t, int64_t Hv, int state_layout, int dtype) noexcept nogil:
    """An absent pool (state, initial_state): the kernels still bind it, as a well-formed empty
    view of the call's pool type in the layout's logical S[k, v] order (never read or written:
    has_state, state_in)."""
    t.data = NULL
    t.rank = 4
    t.dtype = dtype
    t.shape[0] = 0
    t.shape[1] = Hv
    t.shape[2] = GDN_HEAD_DIM_K
    t.shape[3] = GDN_HEAD_DIM_V
    t.stride[0] = 0
    t.stride[1] = 0
    t.stride[2] = GDN_HEAD_DIM_V if state_layout == GDN_STATE_KV else 1
    t.stride[3] = 1 if state_layout == GDN_STATE_KV else GDN_HEAD_DIM_K


cdef void _derive(gdn_problem_t *p, int state_layout) noexcept nogil:
    """Prepare a validated problem for the kernels in place (_plan_call's step): the derived flags,
    a 'vk' pool switched to its logical S[k, v] view, and well-formed views for the absent
    tensors the kernels bind (pools, checkpoints, state_indices)."""
    p.has_state = 1 if p.state.rank != 0 else 0
    p.use_state_indices = 1 if p.state_indices.rank != 0 else 0
    p.state_in = _state_source(p)
    if state_layout == GDN_STATE_VK:
        _logical_kv(&p.state)
        _logical_kv(&p.initial_state)
        _logical_kv(&p.checkpoint_pool)
    cdef int pool_dtype = _pool_type(p)
    if p.initial_state.rank == 0:
        _empty_pool_view(&p.initial_state, p.v.shape[1], state_layout, pool_dtype)
    if not p.has_state:
        _empty_pool_view(&p.state, p.v.shape[1], state_layout, pool_dtype)
    if p.checkpoint_pool.rank == 0:
        p.checkpoint_pool = p.state            # checkpoints go into the state pool itself
    if p.has_initial.rank == 0:
        # no per-sequence mask (state_in <= 2): an unread [N] view
        p.has_initial.rank = 1
        p.has_initial.dtype = GDN_DTYPE_U8
        p.has_initial.shape[0] = p.cu_seqlens.shape[0] - 1
        p.has_initial.stride[0] = 1
    if p.checkpoints.rank == 0:
        # no checkpoints (checkpoint_chunks is 0): an unread [N, 1] view for the spines to bind
        p.checkpoints.rank = 2
        p.checkpoints.dtype = GDN_DTYPE_I32
        p.checkpoints.shape[0] = p.cu_seqlens.shape[0] - 1
        p.checkpoints.shape[1] = 1
        p.checkpoints.stride[0] = 1
        p.checkpoints.stride[1] = 1
    if not p.use_state_indices:
        p.state_indices.rank = 1
        p.state_indices.dtype = GDN_DTYPE_I32
        p.state_indices.shape[0] = p.cu_seqlens.shape[0] - 1
        p.state_indices.stride[0] = 1


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


cdef inline int64_t _plan_bytes(const gdn_problem_t *p, const plan_t *plan) noexcept nogil:
    """The workspace bytes of a planned call (_make_plan sized it)."""
    return plan.workspace_bytes


cdef int _workspace_apart(const gdn_problem_t *p, uintptr_t lo, uintptr_t hi, char *msg) noexcept nogil:
    """The workspace [lo, hi) shares no byte with a tensor of the call (the kernels write it while
    they read the inputs and write out and the state)."""
    cdef const gdn_tensor_t *ts[11]
    cdef const char *names[11]
    cdef uintptr_t tlo, thi
    cdef int i
    ts[:] = [&p.q, &p.k, &p.v, &p.g, &p.beta, &p.out, &p.state, &p.cu_seqlens, &p.state_indices, &p.checkpoints,
             &p.initial_state]
    names[:] = [b"q", b"k", b"v", b"g", b"beta", b"out", b"state", b"cu_seqlens", b"state_indices", b"checkpoints",
                b"initial_state"]
    for i in range(11):
        _extent(ts[i], &tlo, &thi)
        if _ranges_overlap(lo, hi, tlo, thi):
            snprintf(msg, MSG_CAP, "workspace: overlaps the memory of %s; the workspace must be memory of its own",
                     names[i])
            return GDN_ERR_ALIAS
    return GDN_OK


cdef int _bind_workspace(gdn_problem_t *p, void *workspace, int64_t workspace_bytes, const plan_t *plan,
                         char *msg) noexcept nogil:
    """Carve the workspace of the planned call after checking it (a plan that needs none, the
    single plan, takes any workspace, an empty one included)."""
    cdef int64_t need = _plan_bytes(p, plan)
    if (workspace == NULL and need > 0) or workspace_bytes < need:
        snprintf(msg, MSG_CAP, "workspace: %lld bytes given, %lld needed by the %s plan (explain()[\"workspace_bytes\"]; "
                 "gdn_workspace_bytes serves any plan)", <long long>workspace_bytes, <long long>need,
                 _PLAN_CNAMES[plan.kind])
        return GDN_ERR_ARGUMENT
    if (<uintptr_t>workspace) % GDN_WORKSPACE_ALIGN_BYTES != 0:
        snprintf(msg, MSG_CAP, "workspace: data pointer is not %d-byte aligned", GDN_WORKSPACE_ALIGN_BYTES)
        return GDN_ERR_LAYOUT
    cdef int rc = _workspace_apart(p, <uintptr_t>workspace, <uintptr_t>workspace + <uintptr_t>workspace_bytes, msg)
    if rc:
        return rc
    _carve(p, <char *>workspace, p.q.shape[0], p.cu_seqlens.shape[0] - 1, p.v.shape[1], plan.kind, plan.seg_chunks)
    # nothing published through `ready` (the overlap plan sets its own: _launch_overlap); the
    # segmented plan's segment length
    p.overlap = 0
    p.wu_ctas = 0
    p.seg_chunks = plan.seg_chunks
    p.maps_all = 0          # the segmented plan's maps (distributed's _segment_maps sets 1 after this)
    return GDN_OK


cdef int _load_modules(char *msg) noexcept nogil:
    """Load every kernel module once (first call); GDN_ERR_LAUNCH and the CUDA error if that fails."""
    cdef int rc = gdn_load_modules()
    if rc != 0:
        snprintf(msg, MSG_CAP, "CUDA error while loading the kernel modules: %s", cudaGetErrorString(<cudaError_t>rc))
        return GDN_ERR_LAUNCH
    return GDN_OK


# Benchmark hook (docs/DESIGN.md, the host cost of a call): plan and validate as usual, then
# launch nothing, so the host cost of everything but the launches can be timed on its own.
cdef bint _dry_run = False


def _host_dry_run(bint on):
    """Benchmark hook: True skips every launch (and the overlap plan's memset); returns on."""
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


cdef int _execute(gdn_problem_t *p, const plan_t *plan, void *workspace, int64_t workspace_bytes,
                  cudaStream_t stream, char *msg) noexcept nogil:
    """Bind the workspace and launch the planned call (p planned and prepared by _plan_call)."""
    cdef int rc = _bind_workspace(p, workspace, workspace_bytes, plan, msg)
    if rc != GDN_OK:
        return rc
    if plan.kind == PLAN_OVERLAP:
        return _launch_overlap(p, plan.ids, plan.wu_ctas, stream, msg)
    return _launch(p, plan.ids, plan.n, stream, msg)


cdef int gdn_prefill_raw(gdn_problem_t *problem, int spine, int state_layout,
                         void *workspace, int64_t workspace_bytes, cudaStream_t stream,
                         int *chosen_spine, char *msg, size_t msg_cap) noexcept nogil:
    cdef gdn_problem_t p = problem[0]
    cdef char local[MSG_CAP]
    cdef plan_t plan
    cdef int rc
    local[0] = 0
    rc = _plan_call(&p, spine, state_layout, 0, &_NO_FORCE, True, &plan, NULL, local)
    if rc == GDN_OK:
        rc = _execute(&p, &plan, workspace, workspace_bytes, stream, local)
    if chosen_spine != NULL:
        chosen_spine[0] = plan.chosen
    if msg != NULL and msg_cap > 0:
        if local[0] != 0:
            snprintf(msg, msg_cap, "%s", local)
        else:
            msg[0] = 0
    return rc
