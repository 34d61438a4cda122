# The planning rules: which spine, which build, which plan (the one home of each rule; plan.py has the grids).
# (Included by _ext.pyx: one module, one namespace; the order of the includes is the order of
# definition.)

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

    The rule's one home (docs/PERFORMANCE.md has the measurements; tests call _spine_wgmma_warpgroups):
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
    return _v_spine[_state_type(p)][spine][state_layout][warpgroups - 1]


cdef inline int64_t _rs_ctas(int64_t N, int64_t Hv) noexcept nogil:
    """CTAs of the solo and pair builds' grid (one per SM while it runs): the C copy of
    gdn_prefill.plan.grid_spine_rs, read by the build rule, the overlap guard and explain()."""
    return N * Hv * (GDN_HEAD_DIM_V // GDN_RS_SPINE_VBLOCK)


cdef int _rs_build(const gdn_problem_t *p, int sms) noexcept nogil:
    """The spine_rs_o build (RS_SOLO, RS_PAIR, RS_DUAL) the fused plan runs for this (validated)
    problem (the rule's one home).  The pair wherever the opt-in overlap plan runs (stage 1's
    second part shares the L2 with the spine, and the spine's CTAs must leave half of the SMs to
    it); else _rs_serial_build.  No device query: sms is the caller's."""
    if _plan_split(p, 2, sms) > 0:
        return RS_PAIR
    return _rs_serial_build(p, sms)


cdef int _rs_serial_build(const gdn_problem_t *p, int sms) noexcept nogil:
    """The serial plan's build: the dual (two chains per SM, one CTA per head) where its waves of
    chunks cost less than the solo build's (one chain per SM, twice the CTAs): ceil(N Hv / sms)
    dual waves at GDN_RS_DUAL_WAVE_NS against ceil(2 N Hv / sms) solo waves at GDN_RS_SOLO_WAVE_NS
    (docs/PERFORMANCE.md has the measurements), else the solo."""
    cdef int64_t heads = (p.cu_seqlens.shape[0] - 1) * p.v.shape[1]
    if sms > 0 and ((heads + sms - 1) // sms * GDN_RS_DUAL_WAVE_NS
                    < (_rs_ctas(p.cu_seqlens.shape[0] - 1, p.v.shape[1]) + sms - 1) // sms * GDN_RS_SOLO_WAVE_NS):
        return RS_DUAL
    return RS_SOLO


def _spine_rs_build(int64_t T, int64_t N, int64_t Hv, int sms=GDN_SM_COUNT, overlap=None):
    """Test / benchmark hook: the launcher's choice of spine_rs_o build ("solo", "pair" or "dual")
    for T tokens, N sequences, Hv value heads on `sms` SMs; overlap None: as this process plans
    (GDN_PREFILL_OVERLAP), True / False: as if it had opted in or not."""
    cdef gdn_problem_t p
    memset(&p, 0, sizeof(gdn_problem_t))
    p.q.shape[0] = T
    p.cu_seqlens.shape[0] = N + 1
    p.v.shape[1] = Hv
    if overlap is None:
        return _RS_BUILDS[_rs_build(&p, sms)]
    if overlap and _overlap_split(T, N, Hv, sms) > 0:
        return _RS_BUILDS[RS_PAIR]
    return _RS_BUILDS[_rs_serial_build(&p, sms)]


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
    if _v_spine_o[_state_type(p)][state_layout][_rs_build(p, sms)] < 0 or _v_wu_pqk[1 if p.beta.dtype == GDN_DTYPE_BF16 else 0] < 0:
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
