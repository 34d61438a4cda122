# The Python API: argument checks, prefill(), explain(), workspace_bytes / workspace_layout.
# (Included by _ext.pyx: one module, one namespace; the order of the includes is the order of
# definition.)

cdef const char *_TENSOR_NAMES[14]
_TENSOR_NAMES[:] = [b"q", b"k", b"v", b"g", b"beta", b"out", b"state", b"cu_seqlens", b"state_indices", b"checkpoints",
                    b"initial_state", b"workspace", b"has_initial_state", b"checkpoint_pool"]


cdef int _build(gdn_problem_t *p, q, k, v, g, beta, out, state, cu_seqlens, state_indices,
                scale, use_qk_l2norm, int rule=DEVICES_ANY, gdn_tensor_t *ws=NULL,
                workspace=None, checkpoints=None, checkpoint_every=None, initial_state=None,
                has_initial_state=True, max_seqlen=None, checkpoint_pool=None) except -100:
    """Fill p (and ws from workspace, if given) from the arguments, checking their types (the
    library's GdnTypeError, naming the argument), then the device rule (DEVICES_*): an argument of
    the wrong kind is named as such whatever the devices of the others.  Returns the device code
    of the first tensor (a CUDA index, or DEV_*; DEV_NONE under DEVICES_ANY)."""
    cdef int dev[14]
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
    dev[9] = _fill(&p.checkpoints, checkpoints, "checkpoints")
    dev[10] = _fill(&p.initial_state, initial_state, "initial_state")
    dev[11] = _fill(ws, workspace, "workspace") if ws != NULL else DEV_NONE
    dev[12] = DEV_NONE
    if _torch is None:
        _torch_init()
    if has_initial_state is True or has_initial_state is False or not isinstance(has_initial_state, _torch.Tensor):
        p.zero_initial = 0 if _initial_flag(has_initial_state) else 1
    else:                               # a per-sequence mask [N] on the device
        dev[12] = _fill(&p.has_initial, has_initial_state, "has_initial_state")
    dev[13] = _fill(&p.checkpoint_pool, checkpoint_pool, "checkpoint_pool")
    if p.checkpoint_pool.rank != 0 and _same_view(&p.checkpoint_pool, &p.state):
        memset(&p.checkpoint_pool, 0, sizeof(gdn_tensor_t))    # the state pool itself: the default
        dev[13] = DEV_NONE
    p.checkpoint_chunks = _checkpoint_chunks(checkpoint_every)
    p.max_seqlen = _max_seqlen(max_seqlen)
    p.scale = _scale(scale)
    p.use_qk_l2norm = 1 if _flag(use_qk_l2norm, "use_qk_l2norm") else 0
    if rule == DEVICES_ANY:
        return DEV_NONE
    for i in range(14):
        if dev[i] == DEV_NONE:
            continue
        if (rule == DEVICES_CUDA and dev[i] < 0) or (index != DEV_NONE and dev[i] != index):
            xs = (q, k, v, g, beta, out, state, cu_seqlens, state_indices, checkpoints, initial_state, workspace,
                  has_initial_state, checkpoint_pool)
            _device_error(dev[i], xs[i], _TENSOR_NAMES[i].decode(), xs[first], _TENSOR_NAMES[first].decode(), rule)
        if index == DEV_NONE:
            index = dev[i]
            first = i
    return index


cdef bint _same_view(const gdn_tensor_t *a, const gdn_tensor_t *b) noexcept nogil:
    """a and b are one view of one memory (same base, dtype, shape and strides)."""
    cdef int i
    if a.data != b.data or a.rank != b.rank or a.dtype != b.dtype:
        return False
    for i in range(a.rank):
        if a.shape[i] != b.shape[i] or a.stride[i] != b.stride[i]:
            return False
    return True


cdef bint _initial_flag(object x) except -1:
    """has_initial_state as one flag for every sequence (a bool, or 0 / 1)."""
    try:
        return _flag(x, "has_initial_state")
    except _errors.GdnTypeError:
        raise _errors.GdnTypeError(f"has_initial_state: must be a bool or a per-sequence tensor [N] (bool or "
                                   f"integer) on the device, got {type(x).__qualname__}") from None


# ----------------------------------------------------------------------------- device conversions
# What prefill() converts on the device before the kernels read it (explain()["conversions"] lists
# them): int64 cu_seqlens / state_indices (vLLM's and SGLang's metadata) to int32, and an integer
# has_initial_state mask to bool.  One small elementwise kernel each on the call's stream: no host
# sync, graph-capturable (the copies come from torch's caching allocator).  The values must fit
# int32, which their own ranges already require (offsets <= T < 2^30, slots < P < 2^31).
cdef enum:
    CONVERT_CU = 1          # _conversion_flags: int64 cu_seqlens
    CONVERT_INDICES = 2     # int64 state_indices
    CONVERT_MASK = 4        # an int32 / int64 has_initial_state mask


cdef int _conversion_flags(const gdn_problem_t *p) noexcept nogil:
    """CONVERT_* of the tensors a filled problem has in a dtype the kernels do not read: the one
    rule prefill() converts by and explain() reports."""
    cdef int f = 0
    if p.cu_seqlens.dtype == DTYPE_I64:
        f |= CONVERT_CU
    if p.state_indices.rank != 0 and p.state_indices.dtype == DTYPE_I64:
        f |= CONVERT_INDICES
    if p.has_initial.rank != 0 and (p.has_initial.dtype == DTYPE_I64 or p.has_initial.dtype == GDN_DTYPE_I32):
        f |= CONVERT_MASK
    return f


cdef list _conversions(gdn_problem_t *p):
    """explain()'s view of the conversions: their descriptions, and p's dtypes set to those the
    kernels will read (it reads no data)."""
    cdef int f = _conversion_flags(p)
    out = []
    if f & CONVERT_CU:
        out.append("cu_seqlens: int64 -> int32")
        p.cu_seqlens.dtype = GDN_DTYPE_I32
    if f & CONVERT_INDICES:
        out.append("state_indices: int64 -> int32")
        p.state_indices.dtype = GDN_DTYPE_I32
    if f & CONVERT_MASK:
        out.append(f"has_initial_state: {_dtype_name(p.has_initial.dtype).decode()} -> bool (entry != 0)")
        p.has_initial.dtype = GDN_DTYPE_BOOL
    return out


cdef object _alloc_stream(object stream, void *sp, int device):
    """None when the call runs on torch's current stream; else that stream as a torch stream, to
    allocate under: torch's caching allocator orders a block's reuse on the stream current at
    allocation, so memory a call's kernels use is allocated under the call's stream."""
    cdef void *cur = NULL
    if stream is None:
        return None
    _stream_of(device, &cur)
    if cur == sp:
        return None
    return stream if isinstance(stream, _torch.cuda.Stream) else _torch.cuda.ExternalStream(<uintptr_t>sp, device=device)


cdef object _convert(object x, bint mask, object stream, void *sp, int device):
    """x converted on the call's stream (mask: x != 0 as bool; else int32)."""
    s = _alloc_stream(stream, sp, device)
    if s is None:
        return (x != 0) if mask else x.to(_torch.int32)
    with _torch.cuda.stream(s):
        return (x != 0) if mask else x.to(_torch.int32)


cdef int32_t _checkpoint_chunks(object every) except -1:
    """checkpoint_every: None (no checkpoints) or a positive multiple of GDN_CHUNK tokens (an int,
    not a bool) -> chunks between checkpoints (gdn_problem_t.checkpoint_chunks)."""
    if every is None:
        return 0
    if isinstance(every, bool) or not isinstance(every, _numbers.Integral):
        raise _errors.GdnTypeError(f"checkpoint_every: must be an int (tokens) or None, got {type(every).__qualname__}")
    n = int(every)
    if n <= 0 or n % GDN_CHUNK != 0 or n // GDN_CHUNK > 0x7fffffff:
        raise _errors.GdnArgumentError(f"checkpoint_every: must be a positive multiple of {GDN_CHUNK} tokens "
                                       f"(the chunk), got {n}")
    return n // GDN_CHUNK


cdef int64_t _max_seqlen(object n) except -1:
    """max_seqlen: None (unknown: 0) or a positive int, the caller's bound on the longest sequence's
    tokens (a planning hint: the lengths themselves are device values)."""
    if n is None:
        return 0
    if isinstance(n, bool) or not isinstance(n, _numbers.Integral):
        raise _errors.GdnTypeError(f"max_seqlen: must be an int (tokens) or None, got {type(n).__qualname__}")
    if n <= 0 or n > 0x7fffffff:
        raise _errors.GdnArgumentError(f"max_seqlen: must be a positive number of tokens below 2^31, got {n}")
    return int(n)


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
    fused None, whichever plan it runs; True / False, the serial fused-output / unfused plan's
    (explain()["workspace_bytes"] is the one a given call runs)."""
    if fused is None:
        return gdn_workspace_bytes(T, N, Hv)
    return _plan_workspace_bytes(T, N, Hv, PLAN_SERIAL if fused else PLAN_UNFUSED, 0)


_SUMMARY = os.environ.get("GDN_PREFILL_LOG_CALLS", "") not in ("", "0")


cdef int _stream_of(int device, void **sp) except -1:
    """The current stream of `device`, as prefill() launches on it: torch's DLPack table
    (current_work_stream) when torch has one, else torch's raw-stream query (the one Triton's
    launcher uses, ~0.3 us; torch.cuda.current_stream(device) builds a Stream object: 3.6 us per
    call on the H200)."""
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


cdef object _whole_sequence(object q, bint values=True):
    """cu_seqlens = [0, T] for a call without one, made on q's device by a kernel: no host-to-device
    copy, graph-capturable (q's type and rank checked first, so a bad q is named as such).
    values=False: its shape and device only (explain() never reads it, and launches nothing)."""
    cdef gdn_tensor_t t
    _fill(&t, q, "q", True)
    if not values:
        return _torch.empty(2, dtype=_torch.int32, device=q.device)
    return _torch.arange(0, 2 * t.shape[0], max(t.shape[0], 1), dtype=_torch.int32, device=q.device)[:2]


cdef int64_t _workspace_size(const gdn_tensor_t *ws) except -1:
    """Bytes of a given workspace, which must be a contiguous uint8 tensor (prefill and explain)."""
    cdef int64_t n = 1
    cdef int i
    if ws.dtype != GDN_DTYPE_U8 or not _compact(ws):
        raise _errors.GdnArgumentError("workspace: must be a contiguous uint8 CUDA tensor")
    for i in range(ws.rank):
        n *= ws.shape[i]
    return n


cdef object _own_workspace(int64_t need, object stream, void *sp, int device):
    """The workspace prefill() allocates when the caller gives none.  torch's caching allocator
    orders a block's reuse on the stream current at allocation; when `stream` names another one,
    the block is allocated under that stream, so no other stream's work gets the bytes before
    this call's kernels are done with them."""
    s = _alloc_stream(stream, sp, device)
    if s is None:
        return _torch.empty(max(need, 1), dtype=_torch.uint8, device=_torch.device("cuda", device))
    with _torch.cuda.stream(s):
        return _torch.empty(max(need, 1), dtype=_torch.uint8, device=_torch.device("cuda", device))


def prefill(q, k, v, g, beta, out, state=None, *, cu_seqlens=None, state_indices=None,
            state_layout="kv", scale=None, use_qk_l2norm=False, spine="auto",
            stream=None, workspace=None, checkpoint_every=None, checkpoints=None, initial_state=None,
            has_initial_state=True, max_seqlen=None, checkpoint_pool=None, batch_invariant=False):
    """Run the Gated DeltaNet chunked prefill; writes `out` and updates `state` in place.

    q, k [T, Hk, 128] and v, out [T, Hv, 128] bf16 (last dim contiguous, other strides
    free); g [T, Hv] fp32 log-decay and beta [T, Hv] fp32/bf16 with any strides;
    cu_seqlens int32 or int64 [N+1] on the device (None: one sequence of T tokens); state
    [P, Hv, 128, 128] ("kv": S[k, v]; "vk": S[v, k]) read as the initial state and
    overwritten with the final one (None: start from zero, no final state), a pool of fp32,
    bf16, fp16 or float8_e4m3fn (read once and rounded once when written, round to nearest even,
    fp8 saturating at +-448; fp32 inside the kernels); with
    state_indices int32 or int64 [N], sequence n uses slot state_indices[n] and -1 skips the
    sequence entirely (int64 index tensors are converted on the device: explain()["conversions"]).
    Checkpoints (prefix caching): with checkpoint_every = c tokens (a multiple of 64) and checkpoints
    int32 [N, J] on the device, the state after token (j + 1) c of sequence n, for each such token
    at or before the sequence's end (FlashInfer's rule: floor(length / c) of them), is written into
    slot checkpoints[n, j] (-1, or j >= J: not written) of checkpoint_pool, a pool of `state`'s
    dtype and layout with slots of its own, or without one of `state` itself (then state_indices
    are required, to keep them apart from the live states).  The initial state: with initial_state
    (`state`'s dtype, shape and layout; `state` may then be None), read from there and `state` only
    written; has_initial_state=False, every sequence starts from zero; a device tensor [N] (bool,
    or integer: entry != 0), sequence n starts from zero where its entry is false.  max_seqlen (optional): the longest sequence's tokens, when the caller knows it on the
    host (serving engines do); with several sequences it lets the planner split long ones across
    the SMs (explain()["plan"]).  batch_invariant=True: each sequence's output and final state are the
    same bits in any batch it is part of (the serial plan, or the single plan with its inverse in fp32:
    never the segmented plan; explain()["plan"]["why"]).
    Returns the name of the spine that ran.
    """
    cdef gdn_problem_t p
    cdef gdn_tensor_t ws
    cdef int spine_code = 0, layout_code = 0, device, convert
    cdef void *sp = NULL
    if _torch is None:
        _torch_init()
    _codes(spine, state_layout, &spine_code, &layout_code)
    invariant = _flag(batch_invariant, "batch_invariant")
    if stream is not None:      # its type, like every argument's, before the device rule
        sp = <void *><uintptr_t>_stream_handle(stream)
    if cu_seqlens is None:
        cu_seqlens = _whole_sequence(q)
    device = _build(&p, q, k, v, g, beta, out, state, cu_seqlens, state_indices, scale, use_qk_l2norm,
                    DEVICES_CUDA, &ws, workspace, checkpoints, checkpoint_every, initial_state, has_initial_state,
                    max_seqlen, checkpoint_pool)
    convert = _conversion_flags(&p)
    if convert:
        # the engines' int64 metadata or integer mask: converted on the call's stream
        if convert & CONVERT_CU:
            cu_seqlens = _convert(cu_seqlens, False, stream, sp, device)
        if convert & CONVERT_INDICES:
            state_indices = _convert(state_indices, False, stream, sp, device)
        if convert & CONVERT_MASK:
            has_initial_state = _convert(has_initial_state, True, stream, sp, device)
        device = _build(&p, q, k, v, g, beta, out, state, cu_seqlens, state_indices, scale, use_qk_l2norm,
                        DEVICES_CUDA, &ws, workspace, checkpoints, checkpoint_every, initial_state, has_initial_state,
                        max_seqlen, checkpoint_pool)
    if stream is None:
        _stream_of(device, &sp)
    p.batch_invariant = invariant
    return _run(&p, &ws, workspace, stream, device, sp, spine_code, layout_code, state_layout)


cdef object _run(gdn_problem_t *p, gdn_tensor_t *ws, object workspace, object stream, int device, void *sp,
                 int spine_code, int layout_code, str state_layout):
    """prefill()'s call, its problem filled: on the tensors' device, plan once (_plan_call), allocate
    the plan's workspace when none was given, launch; returns the name of the
    spine that ran."""
    cdef int cur = -1
    # the launches go to the current CUDA device: switch only when the tensors live elsewhere
    # (torch's device context manager costs ~2.4 us per call on the H200)
    if cudaGetDevice(&cur) != 0:
        cudaGetLastError()
        cur = -1
    if cur == device:
        return _plan_and_launch(p, ws, workspace, stream, device, sp, spine_code, layout_code, state_layout)
    with _torch.cuda.device(device):
        return _plan_and_launch(p, ws, workspace, stream, device, sp, spine_code, layout_code, state_layout)


cdef object _plan_and_launch(gdn_problem_t *p, gdn_tensor_t *ws, object workspace, object stream, int device,
                             void *sp, int spine_code, int layout_code, str state_layout):
    cdef int rc
    cdef char msg[MSG_CAP]
    cdef plan_t plan
    cdef int64_t ws_bytes
    with nogil:
        rc = _plan_call(p, spine_code, layout_code, 0, &_NO_FORCE, True, &plan, NULL, msg)
    if rc != GDN_OK:
        if rc == GDN_ERR_SPINE:
            _log.warning("gdn_prefill: %s", msg.decode())
        _raise(rc, msg)
    if workspace is None:
        workspace = _own_workspace(_plan_bytes(p, &plan), stream, sp, device)
        _fill(ws, workspace, "workspace")
    ws_bytes = _workspace_size(ws)
    with nogil:
        rc = _execute(p, &plan, ws.data, ws_bytes, <cudaStream_t>sp, msg)
    if rc != GDN_OK:
        _raise(rc, msg)
    name = SPINE_NAMES[plan.chosen]
    if spine_code == GDN_SPINE_AUTO and plan.chosen != GDN_SPINE_WGMMA and _log.isEnabledFor(logging.DEBUG):
        if _spine_guard(p, GDN_SPINE_WGMMA, layout_code, msg) != GDN_OK:
            _log.debug("gdn_prefill: spine=auto ran %s; wgmma rejected: %s", name, msg.decode())
    if _SUMMARY:
        _log.info("gdn_prefill: spine=%s T=%d N=%d Hk=%d Hv=%d state=%s plan=%s grid(spine)=%s build=%s", name,
                  p.q.shape[0], p.cu_seqlens.shape[0] - 1, p.q.shape[1], p.v.shape[1], state_layout,
                  PLAN_NAMES[plan.kind], _launch_grid(p, &plan, _spine_index(&plan)),
                  gdn_variant_name(plan.ids[_spine_index(&plan)]).decode())
    return name


cdef bint _merge_bt(gdn_tensor_t *t) noexcept nogil:
    """View a [B, T, ...] tensor as [B * T, ...] in place when its strides allow it (what torch's
    flatten(0, 1) returns as a view); False, unchanged, when it would need a copy."""
    cdef int i
    cdef int64_t stride
    if t.rank < 2:
        return False
    if t.shape[0] == 1:
        stride = t.stride[1]
    elif t.shape[1] == 1 or t.stride[0] == t.shape[1] * t.stride[1]:
        stride = t.stride[1] if t.shape[1] != 1 else t.stride[0]
    else:
        return False
    t.shape[0] = t.shape[0] * t.shape[1]
    t.stride[0] = stride
    for i in range(1, t.rank - 1):
        t.shape[i] = t.shape[i + 1]
        t.stride[i] = t.stride[i + 1]
    t.rank -= 1
    t.shape[t.rank] = 1
    t.stride[t.rank] = 0
    return True


# chunk_gated_delta_rule's workspaces, one per (device, stream), grown as calls need: calls on one
# stream run in order, so each reuses the bytes of the last (prefill() allocates one per call:
# ~13 us of host time on the H200).  Graph captures allocate their own (the graph's pool).
cdef dict _fla_workspaces = {}


cdef object _stream_workspace(int64_t need, int device, void *sp):
    cdef cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone
    if cudaStreamIsCapturing(<cudaStream_t>sp, &status) != 0:
        cudaGetLastError()
    key = (device, <uintptr_t>sp)
    ws = _fla_workspaces.get(key) if status == cudaStreamCaptureStatusNone else None
    if ws is None or ws.numel() < need:
        ws = _own_workspace(need, None, sp, device)
        if status == cudaStreamCaptureStatusNone:
            _fla_workspaces[key] = ws
    return ws


def _release_fla_workspaces():
    """Drop chunk_gated_delta_rule's cached workspaces (their memory returns to torch's allocator
    once no call in flight uses it)."""
    _fla_workspaces.clear()


def _prefill_fla(q, k, v, g, beta, out, state, initial_state, has_initial_state, cu_seqlens, scale,
                 use_qk_l2norm, spine):
    """chunk_gated_delta_rule's prefill(): q, k, v, out [B, T, H, 128] and g, beta [B, T, H] viewed
    as [B * T, ...] here (no torch view per tensor), the workspace from the per-stream cache; the
    current stream.  Returns the spine that ran, or None, having launched nothing, when a [B, T]
    pair of dims cannot be viewed as one (the layer then flattens with torch, which copies)."""
    cdef gdn_problem_t p
    cdef gdn_tensor_t ws
    cdef int spine_code = 0, layout_code = 0, device
    cdef void *sp = NULL
    if _torch is None:
        _torch_init()
    _codes(spine, "kv", &spine_code, &layout_code)
    device = _build(&p, q, k, v, g, beta, out, state, cu_seqlens, None, scale, use_qk_l2norm, DEVICES_CUDA, NULL,
                    None, None, None, initial_state, has_initial_state)
    if not (_merge_bt(&p.q) and _merge_bt(&p.k) and _merge_bt(&p.v) and _merge_bt(&p.out) and _merge_bt(&p.g)
            and _merge_bt(&p.beta)):
        return None
    _stream_of(device, &sp)
    # the per-stream cache serves any plan of these sizes (gdn_workspace_bytes), so the call is planned once
    workspace = _stream_workspace(gdn_workspace_bytes(p.q.shape[0], p.cu_seqlens.shape[0] - 1, p.v.shape[1]),
                                  device, sp)
    _fill(&ws, workspace, "workspace")
    return _run(&p, &ws, workspace, None, device, sp, spine_code, layout_code, "kv")


def _segment_maps(q, k, v, g, beta, out, *, scale=None, bint use_qk_l2norm=False):
    """gdn_prefill.distributed's passes A and B (its docstring) in two launches on the current
    stream: the affine state map S_end = A S_start + B of one sequence of T tokens, A and B
    [Hv, 128, 128] fp32 ("kv"), each B from a zero state.  Stage 1 and spine_rs's MAPS pass of the
    segmented plan, the sequence one segment of all its chunks and every map formed (maps_all):
    the machinery of the one-GPU segmented plan.  out (the caller's [T, Hv, 128] bf16, which pass C
    writes later) is checked as prefill()'s and not written.  Returns (A, B, None), views of the
    workspace this call allocates; or (None, None, why) where the fused plans' guard rejects the
    call (the caller then runs the passes through prefill(), which serves every input)."""
    cdef gdn_problem_t p
    cdef gdn_tensor_t ws
    cdef plan_t plan
    cdef plan_reasons_t reasons
    cdef plan_force_t force
    cdef int spine_code = 0, layout_code = 0, device, rc
    cdef void *sp = NULL
    cdef char msg[MSG_CAP]
    if _torch is None:
        _torch_init()
    _codes("auto", "kv", &spine_code, &layout_code)
    device = _build(&p, q, k, v, g, beta, out, None, _whole_sequence(q), None, scale, use_qk_l2norm, DEVICES_CUDA,
                    NULL, None, None, None, None, False)
    force = _forced(0, 1, -1, -1, max(_cdiv(p.q.shape[0], GDN_CHUNK), 1))
    rc = _plan_call(&p, spine_code, layout_code, 0, &force, True, &plan, &reasons, msg)
    if plan.fused_rc > 0:
        return None, None, reasons.fused.decode()        # the fused plans' guard rejects the call
    if rc != GDN_OK:
        _raise(rc, msg)
    _stream_of(device, &sp)
    workspace = _own_workspace(_plan_bytes(&p, &plan), None, sp, device)
    _fill(&ws, workspace, "workspace")
    rc = _bind_workspace(&p, ws.data, _workspace_size(&ws), &plan, msg)
    if rc == GDN_OK:
        p.maps_all = 1
        rc = _launch(&p, plan.ids, 2, <cudaStream_t>sp, msg)         # recompute_wu, spine_rs_maps
    if rc != GDN_OK:
        _raise(rc, msg)
    Hv = p.v.shape[1]
    off = <uintptr_t>p.maps.data - <uintptr_t>ws.data
    maps = workspace[off:off + 2 * Hv * GDN_HEAD_DIM_K * GDN_HEAD_DIM_V * 4].view(_torch.float32).view(
        2, Hv, GDN_HEAD_DIM_K, GDN_HEAD_DIM_V)              # segment slot 0: maps[0] = A, maps[1] = B
    return maps[0], maps[1], None


def _compose_maps(maps, states):
    """gdn_prefill.distributed's composition on the GPU, by the one-GPU segmented plan's
    compose_f32 on the current stream: maps [2 R, Hv, 128, 128] fp32 (rows 2 r, 2 r + 1: rank r's
    A_r, B_r, R >= 2; the first rank's A unused), states [R, Hv, 128, 128] fp32, both contiguous
    on one CUDA device: states[1] = B_0, states[j + 1] = A_j states[j] + B_j (states[0] is not
    written).  The R maps are one sequence of R one-chunk segments to the kernel."""
    cdef gdn_problem_t p
    cdef int dm, ds, rc
    cdef void *sp = NULL
    cdef char msg[MSG_CAP]
    if _torch is None:
        _torch_init()
    memset(&p, 0, sizeof(gdn_problem_t))
    dm = _fill(&p.maps, maps, "maps", True)
    ds = _fill(&p.seg_state, states, "states", True)
    if dm < 0 or ds != dm:
        raise _errors.GdnArgumentError(f"maps, states: must be on one CUDA device, got {maps.device} and {states.device}")
    R = states.shape[0] if p.seg_state.rank == 4 else 0
    want = (R, states.shape[1] if R else 0, GDN_HEAD_DIM_K, GDN_HEAD_DIM_V)
    if p.seg_state.rank != 4 or tuple(states.shape) != want or R < 2 or want[1] < 1:
        raise _errors.GdnShapeError(f"states: must be [R >= 2, Hv, {GDN_HEAD_DIM_K}, {GDN_HEAD_DIM_V}], got "
                                    f"{tuple(states.shape)}")
    if tuple(maps.shape) != (2 * R,) + want[1:]:
        raise _errors.GdnShapeError(f"maps: must be {[2 * R, *want[1:]]} (two per state), got {tuple(maps.shape)}")
    if p.maps.dtype != GDN_DTYPE_F32 or p.seg_state.dtype != GDN_DTYPE_F32:
        raise _errors.GdnDtypeError(f"maps, states: must be float32, got {maps.dtype} and {states.dtype}")
    if not _compact(&p.maps) or not _compact(&p.seg_state):
        raise _errors.GdnLayoutError("maps, states: must be contiguous")
    if _v_compose < 0:
        snprintf(msg, MSG_CAP, "build: compose_f32 is not compiled into this build")
        _raise(GDN_ERR_UNKNOWN_VARIANT, msg)
    cu = _torch.arange(0, 2 * R * GDN_CHUNK, R * GDN_CHUNK, dtype=_torch.int32, device=states.device)
    _fill(&p.cu_seqlens, cu, "cu_seqlens", True)
    p.seg_chunks = 1
    _stream_of(dm, &sp)
    rc = _launch(&p, &_v_compose, 1, <cudaStream_t>sp, msg)
    if rc != GDN_OK:
        _raise(rc, msg)


def explain(q, k, v, g, beta, out, state=None, *, cu_seqlens=None, state_indices=None,
            state_layout="kv", scale=None, use_qk_l2norm=False, spine="auto",
            stream=None, workspace=None, checkpoint_every=None, checkpoints=None, initial_state=None,
            has_initial_state=True, max_seqlen=None, check_device=True, checkpoint_pool=None,
            batch_invariant=False):
    """The plan prefill() would run, without launching anything.

    Takes prefill's arguments and applies every rule prefill() applies that does not need the GPU
    itself: the tensors may live on the CPU or be "meta" tensors, but on one device (any device
    each with check_device=False), and a given workspace must fit the plan.  Returns a dict: "spines" maps each spine to "runs" or the
    guard that rejects it; "chosen" the spine "auto" (or the requested one) runs; "plan" the
    plan ("single", "serial", "segmented", "overlap" or "unfused"), why, why the single plan
    runs or not ("single"), and the cost model's predicted times ("predicted_us"; the segmented
    plan also its segments, their length in chunks and its CTAs per pass); "checkpoints" the checkpoint interval and table width, or None;
    "initial_state" where the initial states come from ("zeros", "state (in place)" or
    "initial_state", with ", per sequence" when has_initial_state is a tensor); "conversions" the
    device conversions prefill() makes first (int64 indices to int32, an integer mask to bool);
    "state_dtype" the pools' element type ("float32", "bfloat16", "float16" or
    "float8_e4m3fn"; None without a pool): the spine builds are the type's; "kernels" the builds
    with grid, block and shared-memory bytes, in launch order; "fused_output" is "runs" or the reason the unfused plan runs instead; "overlap" is
    "runs: ..." when stage 1 runs beside the spine (its workers build, "overlap_wu_ctas" CTAs, else
    None) or the reason it does not; "workspace_bytes".
    Raises the same errors prefill() raises.
    """
    cdef gdn_problem_t p, pw
    cdef gdn_tensor_t ws
    cdef plan_t plan
    cdef plan_reasons_t reasons
    cdef int spine_code = 0, layout_code = 0, rc, s, i
    cdef int64_t ws_bytes = 0
    cdef char msg[MSG_CAP]
    if _torch is None:
        _torch_init()
    _codes(spine, state_layout, &spine_code, &layout_code)
    if stream is not None:
        _stream_handle(stream)
    check_device = _flag(check_device, "check_device")
    invariant = _flag(batch_invariant, "batch_invariant")
    if cu_seqlens is None:
        cu_seqlens = _whole_sequence(q, False)
    _build(&p, q, k, v, g, beta, out, state, cu_seqlens, state_indices, scale, use_qk_l2norm,
           DEVICES_ONE if check_device else DEVICES_ANY, &ws, workspace, checkpoints, checkpoint_every,
           initial_state, has_initial_state, max_seqlen, checkpoint_pool)
    conversions = _conversions(&p)
    own_pool = p.checkpoint_pool.rank != 0
    pools = p.state.rank != 0 or p.initial_state.rank != 0 or own_pool
    # prefill()'s planning call, off the device (no device check; without check_device, the SM count
    # of an H100 / H200), with its reasons
    p.batch_invariant = invariant
    rc = _plan_call(&p, spine_code, layout_code, 0 if check_device else GDN_SM_COUNT, &_NO_FORCE, False, &plan,
                    &reasons, msg)
    if rc != GDN_OK:
        if rc == GDN_ERR_SPINE:
            _log.warning("gdn_prefill: %s", msg.decode())
        _raise(rc, msg)
    spines = {}
    for s in (GDN_SPINE_SCALAR, GDN_SPINE_WGMMA):
        spines[SPINE_NAMES[s]] = reasons.spines[s].decode() or "runs"
        if spines[SPINE_NAMES[s]] != "runs":
            _log.debug("gdn_prefill: explain: spine %s rejected: %s", SPINE_NAMES[s], spines[SPINE_NAMES[s]])
    if workspace is not None:
        # prefill()'s workspace rules, on a copy (size for this plan, alignment, no shared bytes)
        ws_bytes = _workspace_size(&ws)
        pw = p
        rc = _bind_workspace(&pw, ws.data, ws_bytes, &plan, msg)
        if rc != GDN_OK:
            _raise(rc, msg)
    T, N, Hv = p.q.shape[0], p.cu_seqlens.shape[0] - 1, p.v.shape[1]
    predicted = {}
    if plan.serial_ns > 0:
        predicted["serial"] = round(plan.serial_ns / 1000.0, 1)
    if plan.segmented_ns > 0:
        predicted["segmented"] = round(plan.segmented_ns / 1000.0, 1)
    if plan.overlap_ns > 0:
        predicted["overlap"] = round(plan.overlap_ns / 1000.0, 1)
    report = dict(name=PLAN_NAMES[plan.kind], predicted_us=predicted, longest_chunks=int(plan.longest) or None,
                  single=reasons.single.decode(), batch_invariant=bool(p.batch_invariant))
    if plan.kind == PLAN_SEGMENTED:
        report.update(segments=int(_cdiv(plan.longest, plan.seg_chunks)), segment_chunks=int(plan.seg_chunks),
                      ctas=int(_launch_grid(&p, &plan, _spine_index(&plan))[0]),
                      maps=f"cut where a segment's last chunks' log-decay sums below {GDN_MAP_CUT_LOG_DECAY} "
                           f"(B from those chunks alone, A dropped: less than e^{GDN_MAP_CUT_LOG_DECAY} of the "
                           "history's size); exact elsewhere; decided on the device from the gates, so the time "
                           "depends on them")
    report["why"] = reasons.why.decode()
    from gdn_prefill import _manifest
    kernels = []
    for i in range(plan.n):
        name = gdn_variant_name(plan.ids[i]).decode()
        kernels.append(dict(name=name, grid=tuple(int(x) for x in _launch_grid(&p, &plan, i)),
                            **_manifest.launch_info(name)))
    return {
        "spines": spines,
        "chosen": SPINE_NAMES[plan.chosen],
        "plan": report,
        "fused_output": "runs" if plan.kind != PLAN_UNFUSED else reasons.fused.decode(),
        "kernels": kernels,
        "workspace_bytes": int(plan.workspace_bytes),
        "chunk_slots": int(_chunk_slots(T, N)),
        "overlap": reasons.overlap.decode(),
        "overlap_wu_ctas": int(plan.wu_ctas) if plan.kind == PLAN_OVERLAP else None,
        "initial_state": ("zeros", "state (in place)", "initial_state", "state (in place), per sequence",
                          "initial_state, per sequence")[p.state_in],
        "conversions": conversions,
        "state_dtype": _dtype_name(p.state.dtype).decode() if pools else None,
        "checkpoints": (f"every {p.checkpoint_chunks * GDN_CHUNK} tokens, up to {p.checkpoints.shape[1]} per "
                        f"sequence, into {'checkpoint_pool' if own_pool else 'the state pool'}"
                        if p.checkpoint_chunks > 0 else None),
    }


def workspace_layout(int64_t T, int64_t N, int64_t Hv, bint fused=True, int seg_chunks=0):
    """{name: (byte offset, shape, dtype name)} of one plan's workspace tensors (gdn_abi.h; fused:
    the fused-output plan's gcum, rq, rk, ready, tu, pqk, order, and with seg_chunks > 0 the
    segmented plan's maps and seg_state besides; else the unfused plan's gcum, rq, rk, ready, w, u,
    vnew, h); shape is the storage's row-major shape: (Hv, T) for gcum, rq and rk, which are stored
    head-major (the kernels index them [t, hv]), the logical shape for the others."""
    cdef gdn_problem_t p
    cdef char *base = <char *>GDN_WORKSPACE_ALIGN_BYTES  # any aligned non-NULL base: offsets only
    _carve(&p, base, T, N, Hv, (PLAN_SEGMENTED if seg_chunks > 0 else PLAN_SERIAL) if fused else PLAN_UNFUSED,
           seg_chunks)
    names = ("gcum", "rq", "rk", "ready", "w", "u", "vnew", "h", "pqk", "tu", "order", "maps", "seg_state", "beta32")
    cdef gdn_tensor_t *ts[14]
    ts[:] = [&p.gcum, &p.rq, &p.rk, &p.ready, &p.w, &p.u, &p.vnew, &p.h, &p.pqk, &p.tu, &p.order, &p.maps,
             &p.seg_state, &p.beta32]
    out = {}
    for i in range(len(names)):
        if ts[i].data == NULL:
            continue                                      # the other plan's
        strides = [ts[i].stride[j] for j in range(ts[i].rank)]
        order = sorted(range(ts[i].rank), key=lambda j: -strides[j])          # storage order
        out[names[i]] = (<uintptr_t>ts[i].data - <uintptr_t>base, tuple(ts[i].shape[j] for j in order),
                         _dtype_name(ts[i].dtype).decode())
    return out
