# The opt-in overlap plan: the side stream, its fork / join events, the split rule.
# (Included by _ext.pyx: one module, one namespace; the order of the includes is the order of
# definition.)

# ----------------------------------------------------------------------------- overlap plan
# With few sequences the register-state spine occupies N * Hv * 2 SMs for its whole run and stage 1 leaves
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
# own grid, is the single kernel's (docs/DESIGN.md).

cdef const char *_OVERLAP_OFF = (
    "off by default: its spine waits for a kernel on another stream, which the GPU does not promise to "
    "schedule beside it when other streams or processes hold SMs (a hang under concurrent streams); "
    "GDN_PREFILL_OVERLAP=1 opts in for a process that calls prefill from one stream alone")
OVERLAP_OFF = _OVERLAP_OFF.decode()

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


cdef int64_t _overlap_split(int64_t T, int64_t N, int64_t Hv, int sms, char *why) noexcept nogil:
    """First chunk slot of stage 1's second part, or 0 for the serial plan (and, where why is not
    NULL, the reason): the rule's one home (gdn_abi.h has the constants; tests call
    _overlap_split_rule)."""
    cdef int64_t cb = _chunk_slots(T, N)
    if cb < GDN_OVERLAP_MIN_SLOTS:
        if why != NULL:
            snprintf(why, MSG_CAP, "%lld chunk slots: fewer than GDN_OVERLAP_MIN_SLOTS = %d", <long long>cb,
                     GDN_OVERLAP_MIN_SLOTS)
        return 0
    if not _overlap_fits(N, Hv, sms):
        if why != NULL:
            snprintf(why, MSG_CAP, "the spine's %lld CTAs would hold more than half of the %d SMs that stage 1 "
                     "needs beside it", <long long>_rs_ctas(N, Hv), sms)
        return 0
    return min(cb, GDN_OVERLAP_SPLIT_SLOTS)


cdef int64_t _plan_split(const gdn_problem_t *p, int sms, char *why) noexcept nogil:
    """The split the fused plan runs this (validated) problem with: the rule's where the process
    opted in (GDN_PREFILL_OVERLAP=1); 0 for the serial plan (and the reason, where why is not NULL)."""
    cdef int64_t split = _overlap_split(p.q.shape[0], p.cu_seqlens.shape[0] - 1, p.v.shape[1], sms, why)
    if split > 0 and not _overlap_enabled:
        if why != NULL:
            snprintf(why, MSG_CAP, "%s", _OVERLAP_OFF)
        return 0
    return split


def _overlap_opt_in():
    """Test hook: whether this process opted in to the overlap plan (GDN_PREFILL_OVERLAP=1)."""
    return bool(_overlap_enabled)


def _overlap_fits_rule(int64_t N, int64_t Hv, int sms):
    """Test / benchmark hook: the overlap plan's deadlock guard (_overlap_fits)."""
    return bool(_overlap_fits(N, Hv, sms))


def _overlap_split_rule(int64_t T, int64_t N, int64_t Hv, int sms):
    """Test hook: the launcher's overlap rule (None: the serial plan)."""
    cdef int64_t split = _overlap_split(T, N, Hv, sms, NULL)
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
