# The overlap plan: stage 1's workers build beside the spine, its rule and its launches.
# (Included by _ext.pyx: one module, one namespace; the order of the includes is the order of
# definition.)

# ----------------------------------------------------------------------------- overlap plan
# With few sequences the register-state spine occupies N * Hv * 2 SMs for its whole run and stage 1 leaves
# them idle meanwhile (1x8K: 64 of 132 SMs for 151 us).  The overlap plan runs stage 1 as the workers
# build (recompute_wu_workers: one CTA of WORKER_GROUPS chunk workers on each SM the spine leaves, every
# (slot, head) of the call, each published in the workspace's `ready` flags) and the spine right behind
# it on the same stream as its programmatic dependent; the spine's loader acquires a slot's flag
# before it reads the slot.
#
# Why this cannot hang: the spine's CTAs are scheduled only once every workers CTA has issued
# launch_dependents, its first statement, i.e. each has started and holds its SM until it is done; a
# worker waits on nothing.  So every flag the spine waits for is owed by a CTA that is running,
# whatever other streams, processes (MPS), graphs or profilers hold.  A serialised launch (no PDL)
# starts the spine after the workers have ended.  (The plan it replaces ran the spine on a side stream
# beside a kernel it waited for, which the GPU does not promise to schedule: opt-in, issue 32.)
#
# It runs wherever its rule holds: measured against the serial plan, it is level at 33 chunk slots
# and faster from 65 on (docs/PERFORMANCE.md, the overlap plan).


cdef int _sm_count() noexcept nogil:
    """SMs of the current device (GDN_SM_COUNT if it cannot be queried)."""
    cdef int dev = 0, sms = 0
    if cudaGetDevice(&dev) != 0 or cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != 0:
        cudaGetLastError()
        return GDN_SM_COUNT
    return sms


cdef bint _overlap_fits(int64_t N, int64_t Hv, int sms) noexcept nogil:
    """The overlap plan's balance: the spine's CTAs (one per SM) leave at least half of the SMs to
    stage 1's workers."""
    return 2 * _rs_ctas(N, Hv) <= sms


cdef int32_t _overlap_wu_ctas(int64_t T, int64_t N, int64_t Hv, int sms, char *why) noexcept nogil:
    """The workers build's CTAs, one on each SM the spine leaves, or 0 for the serial plan (and,
    where why is not NULL, the reason): the rule's one home (gdn_abi.h has the constant; tests call
    _overlap_rule)."""
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
    return <int32_t>(sms - _rs_ctas(N, Hv))


cdef int32_t _plan_wu_ctas(const gdn_problem_t *p, int sms, char *why) noexcept nogil:
    """The workers CTAs the fused plan runs this (validated) problem with, the rule's; 0 for the
    serial plan (and the reason, where why is not NULL)."""
    return _overlap_wu_ctas(p.q.shape[0], p.cu_seqlens.shape[0] - 1, p.v.shape[1], sms, why)


def _overlap_fits_rule(int64_t N, int64_t Hv, int sms):
    """Test / benchmark hook: the overlap plan's balance (_overlap_fits)."""
    return bool(_overlap_fits(N, Hv, sms))


def _overlap_rule(int64_t T, int64_t N, int64_t Hv, int sms):
    """Test hook: the launcher's overlap rule, the workers CTAs (None: the serial plan)."""
    cdef int32_t ctas = _overlap_wu_ctas(T, N, Hv, sms, NULL)
    return int(ctas) if ctas > 0 else None


cdef const char *_OVERLAP_STEPS[3]
_OVERLAP_STEPS[:] = [b"zeroing the ready flags", b"launching recompute_wu_workers", b"launching the spine"]


cdef int _launch_overlap(gdn_problem_t *p, const int *ids, int32_t wu_ctas, cudaStream_t stream,
                         char *msg) noexcept nogil:
    """The overlap plan's launches on the caller's stream: the ready flags zeroed, the workers build
    (ids[0]) on wu_ctas CTAs over every chunk slot, then the spine (ids[1]), which waits for each
    (slot, head)'s flag.  The spine is launched last: if an earlier step fails it is never launched, so
    nothing waits for a flag that will not come."""
    cdef int rc, step = 0
    if _dry_run:
        return GDN_OK
    rc = _load_modules(msg)
    if rc != GDN_OK:
        return rc
    p.overlap = 1               # every slot published, every slot awaited
    p.wu_ctas = wu_ctas
    rc = cudaMemsetAsync(p.ready.data, 0, p.ready.shape[0] * p.ready.shape[1] * 4, stream)
    if rc == 0:
        step = 1
        rc = gdn_launch_variant(ids[0], p, stream)
    if rc == 0:
        step = 2
        rc = gdn_launch_variant(ids[1], p, stream)
    if rc != 0:
        snprintf(msg, MSG_CAP, "CUDA error in the overlap plan (%s): %s", _OVERLAP_STEPS[step],
                 cudaGetErrorString(<cudaError_t>rc))
        return GDN_ERR_LAUNCH
    return GDN_OK
