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


# ----------------------------------------------------------------------------- the plan of a call
# One home for every choice a call makes: _make_plan fills a plan_t once per call, from the
# validated problem, the chosen spine and the SM count, and everything after reads it (the
# workspace size and carving, the launches, explain()).  Nothing here reads device memory.
cdef enum:
    PLAN_UNFUSED = 0        # recompute_wu, the spine (h, vnew), fwd_o
    PLAN_SERIAL = 1         # fused: recompute_wu (Tu, P), spine_rs_o (solo or dual)
    PLAN_OVERLAP = 2        # fused, stage 1 split around the spine (opt-in, GDN_PREFILL_OVERLAP=1)
    PLAN_SEGMENTED = 3      # fused, each sequence in segments: recompute_wu, spine_rs_maps, compose, spine_rs_o_seg
    PLAN_SINGLE = 4         # fused_prefill alone: stage 1 and the spine of a (sequence, head) per CTA, no workspace
    MAX_LAUNCHES = 4

PLAN_NAMES = ("unfused", "serial", "overlap", "segmented", "single")


cdef struct plan_t:
    int chosen              # the spine (GDN_SPINE_*)
    int kind                # PLAN_*
    int n                   # launches, ids[0 .. n)
    int ids[MAX_LAUNCHES]   # their builds (launch-table ids)
    int rs_build            # the fused plans' spine_rs_o build (RS_*)
    int warpgroups          # the unfused plan's wgmma spine build
    int64_t split           # PLAN_OVERLAP: stage 1's second part starts at this chunk slot
    int32_t seg_chunks      # PLAN_SEGMENTED: chunks per segment
    int64_t longest         # chunks of the longest sequence the cost model assumed
    int64_t serial_ns       # the cost model's prediction for the serial plan (0: not modelled)
    int64_t segmented_ns    # ... for the segmented plan at seg_model_chunks (0: not feasible)
    int32_t seg_model_chunks    # the segment length segmented_ns prices (kept where the serial plan wins)


cdef struct plan_force_t:
    # test / benchmark hooks: -1 everywhere is the rules (prefill, explain)
    int warpgroups          # 1 or 2: the unfused plan's wgmma spine build
    int fused               # 0 / 1 / 2: the unfused plan / a two-launch fused plan / the single plan
    int rs_build            # RS_*: the serial plan's spine_rs_o build
    int64_t split           # 0: no overlap; > 0: the overlap plan split there
    int32_t seg_chunks      # 0: not segmented; > 0: the segmented plan with these segments


cdef plan_force_t _NO_FORCE
_NO_FORCE.warpgroups = -1
_NO_FORCE.fused = -1
_NO_FORCE.rs_build = -1
_NO_FORCE.split = -1
_NO_FORCE.seg_chunks = -1


cdef inline int64_t _cdiv(int64_t a, int64_t b) noexcept nogil:
    return (a + b - 1) // b


cdef int64_t _stage1_ns(int64_t T, int64_t N, int64_t Hv, int sms) noexcept nogil:
    """The cost model's stage 1 (recompute_wu) and a call's fixed cost: its chunk-heads at
    GDN_MODEL_WU_SM_NS of one SM each, spread over the SMs."""
    return GDN_MODEL_LAUNCH_NS + (_cdiv(T, GDN_CHUNK) + N) * Hv * GDN_MODEL_WU_SM_NS // max(sms, 1)


cdef int64_t _serial_ns(int64_t T, int64_t N, int64_t Hv, int64_t longest, int rs_build, int sms) noexcept nogil:
    """The cost model's serial fused plan: stage 1, then the spine's waves of CTAs, each as long as
    the longest sequence's chain (solo: GDN_MODEL_CHAIN_NS a chunk; dual: GDN_RS_DUAL_WAVE_NS)."""
    cdef int64_t ctas, chunk_ns
    if rs_build == RS_DUAL:
        ctas, chunk_ns = N * Hv, GDN_RS_DUAL_WAVE_NS
    else:
        ctas, chunk_ns = _rs_ctas(N, Hv), GDN_MODEL_CHAIN_NS
    return _stage1_ns(T, N, Hv, sms) + _cdiv(ctas, max(sms, 1)) * longest * chunk_ns


cdef int64_t _segmented_ns(int64_t T, int64_t N, int64_t Hv, int64_t longest, int64_t sc, int sms) noexcept nogil:
    """The cost model's segmented plan with segments of sc chunks, for a longest sequence of
    `longest` chunks: stage 1; the MAPS pass (dual CTAs, GDN_MODEL_MAPS_NS a chunk) over one
    segment, in waves of CTAs; the composition's nseg - 2 steps; the SEGMENT pass (solo chains,
    GDN_MODEL_SEG_CHAIN_NS a chunk) over one segment, in waves; each pass's fixed cost.  CTAs: one
    sequence's exactly (2 nseg - 1 and 2 nseg per head), several sequences' by the grid's bound.
    The passes add up (run 152's timeline: each launch starts its work as the one before ends)."""
    cdef int64_t nseg = _cdiv(longest, sc)
    cdef int64_t seg = min(sc, longest)
    cdef int64_t maps_ctas, seg_ctas
    if N == 1:
        maps_ctas = (2 * nseg - 1) * Hv
        seg_ctas = 2 * nseg * Hv
    else:
        maps_ctas = seg_ctas = plan_segment_slots(T, N, sc) * 2 * Hv
    return (_stage1_ns(T, N, Hv, sms)
            + GDN_MODEL_PASS_NS + _cdiv(maps_ctas, max(sms, 1)) * seg * GDN_MODEL_MAPS_NS
            + max(nseg - 2, 0) * GDN_MODEL_COMPOSE_NS
            + GDN_MODEL_PASS_NS + _cdiv(seg_ctas, max(sms, 1)) * seg * GDN_MODEL_SEG_CHAIN_NS)


cdef int32_t _choose_segments(const gdn_problem_t *p, int64_t longest, int sms, int64_t *best_ns) noexcept nogil:
    """The segment length (chunks) the segmented plan would run with, the one of least predicted
    time (best_ns), or 0 when no segmentation fits: a multiple of the checkpoint interval (a
    segment then starts on a checkpoint), 2 to GDN_SEG_MAX_SEGMENTS segments of the longest
    sequence, and at most GDN_SEG_MAX_CTAS CTAs in a pass (the workspace bound of gdn_workspace_bytes)."""
    cdef int64_t T = p.q.shape[0], N = p.cu_seqlens.shape[0] - 1, Hv = p.v.shape[1]
    cdef int64_t nseg, sc, unit = max(<int64_t>p.checkpoint_chunks, 1), t
    cdef int32_t best = 0
    best_ns[0] = 0
    for nseg in range(2, min(longest, <int64_t>GDN_SEG_MAX_SEGMENTS) + 1):
        sc = _cdiv(_cdiv(longest, nseg), unit) * unit
        if _cdiv(longest, sc) < 2 or sc > 0x7fffffff:
            continue
        if plan_segment_slots(T, N, sc) * Hv * 2 > GDN_SEG_MAX_CTAS:
            continue                       # the workspace bound (gdn_workspace_bytes): at most this many CTAs
        t = _segmented_ns(T, N, Hv, longest, sc, sms)
        if best == 0 or t < best_ns[0]:
            best, best_ns[0] = <int32_t>sc, t
    return best


cdef inline int64_t plan_segment_slots(int64_t T, int64_t N, int64_t sc) noexcept nogil:
    """The C copy of gdn_prefill.plan.segment_slots."""
    return (T // GDN_CHUNK + N) // sc + N


cdef bint _segmented_builds(const gdn_problem_t *p, int state_layout) noexcept nogil:
    return (_v_spine_maps[_state_type(p)][state_layout] >= 0 and _v_spine_seg[_state_type(p)][state_layout] >= 0
            and _v_compose >= 0)


cdef int _single_rule(const gdn_problem_t *p, int sms, char *why) noexcept nogil:
    """1 where the single plan runs (the rule's one home; gdn_abi.h GDN_SINGLE_LAT_PCT has it and its
    measurements), else 0 and the reason in `why`.  From the shapes and max_seqlen only: the
    lengths themselves are device values."""
    cdef int64_t T = p.q.shape[0], Hv = p.v.shape[1]
    cdef int64_t longest = _cdiv(p.max_seqlen, GDN_CHUNK), total = _cdiv(T, GDN_CHUNK)
    if p.max_seqlen <= 0:
        snprintf(why, MSG_CAP, "max_seqlen is not given: the longest sequence is unknown to the host")
        return 0
    if longest * sms * GDN_SINGLE_LAT_PCT > total * Hv * 100:
        snprintf(why, MSG_CAP, "its longest sequence (%lld chunks) alone outlasts the batch's %lld chunk-heads "
                 "spread over the %d SMs (ceil(max_seqlen / 64) * SMs * %d %% > ceil(T / 64) * Hv)",
                 <long long>longest, <long long>(total * Hv), sms, GDN_SINGLE_LAT_PCT)
        return 0
    return 1


def _single_plan_rule(int64_t T, int64_t N, int64_t Hv, int64_t max_seqlen, int sms=GDN_SM_COUNT):
    """Test hook: None where the single plan's rule runs it for T tokens of N sequences at Hv value
    heads with this max_seqlen (0: not given) on `sms` SMs, else the reason it does not."""
    cdef gdn_problem_t p
    cdef char why[MSG_CAP]
    memset(&p, 0, sizeof(gdn_problem_t))
    p.q.shape[0] = T
    p.cu_seqlens.shape[0] = N + 1
    p.v.shape[1] = Hv
    p.max_seqlen = max_seqlen
    return None if _single_rule(&p, sms, why) else why.decode()


cdef int _make_plan(const gdn_problem_t *p, int chosen, int state_layout, int sms, const plan_force_t *force,
                    plan_t *plan, char *msg) noexcept nogil:
    """The plan of one validated call (chosen: its spine), into `plan`; the builds must be compiled
    in.  The rules, in order: the fused plans where _fused_guard allows (else the unfused plan);
    among them the segmented plan where the cost model predicts it faster than the serial one
    (longest sequence: the call's tokens, max_seqlen when given); else the opt-in overlap plan
    where its rule applies; else the serial plan (solo or dual: _rs_serial_build).  Before them all,
    the single plan where its rule applies (_single_rule)."""
    cdef int64_t T = p.q.shape[0], N = p.cu_seqlens.shape[0] - 1, Hv = p.v.shape[1]
    cdef int a16 = 1 if _aligned16(p) else 0
    cdef int bbf16 = 1 if p.beta.dtype == GDN_DTYPE_BF16 else 0
    cdef int sdt = _state_type(p)
    cdef int i, fused
    cdef int64_t seg_ns = 0
    cdef char why[MSG_CAP]
    memset(plan, 0, sizeof(plan_t))
    plan.chosen = chosen
    # the longest sequence: the call's tokens for one sequence; for several, the caller's max_seqlen
    # (the lengths are on the device), and without it no segmented plan (0)
    if N == 1:
        plan.longest = _cdiv(T, GDN_CHUNK)
    elif p.max_seqlen > 0:
        plan.longest = _cdiv(min(p.max_seqlen, T), GDN_CHUNK)
    fused = force.fused if force.fused >= 0 else (1 if _fused_guard(p, chosen, state_layout, sms, why) == GDN_OK else 0)
    if not fused:
        plan.kind = PLAN_UNFUSED
        plan.warpgroups = force.warpgroups if force.warpgroups > 0 else _spine_warpgroups(p, chosen)
        plan.n = 3
        plan.ids[0] = _v_wu[bbf16][a16]
        plan.ids[1] = _spine_variant(p, chosen, state_layout, plan.warpgroups)
        plan.ids[2] = _v_fwd_o[a16]
    else:
        plan.rs_build = _rs_serial_build(p, sms)
        plan.serial_ns = _serial_ns(T, N, Hv, plan.longest if plan.longest > 0 else _cdiv(T, GDN_CHUNK),
                                    plan.rs_build, sms)
        if force.fused == 2 or (force.fused < 0 and force.seg_chunks < 0 and force.split < 0 and force.rs_build < 0
                                and _single_variant(p, state_layout) >= 0 and _single_rule(p, sms, why)):
            plan.kind = PLAN_SINGLE
            plan.n = 1
            plan.ids[0] = _single_variant(p, state_layout) if a16 and chosen == GDN_SPINE_WGMMA else -1
        else:
            if force.seg_chunks > 0:
                plan.seg_chunks = force.seg_chunks
                plan.segmented_ns = _segmented_ns(T, N, Hv, plan.longest, force.seg_chunks, sms)
                plan.seg_model_chunks = force.seg_chunks
            elif (force.seg_chunks < 0 and force.split < 0 and force.rs_build < 0 and plan.longest > 1
                  and _segmented_builds(p, state_layout)):
                plan.seg_chunks = _choose_segments(p, plan.longest, sms, &seg_ns)
                plan.segmented_ns = seg_ns
                plan.seg_model_chunks = plan.seg_chunks
                if plan.seg_chunks > 0 and seg_ns >= plan.serial_ns:
                    plan.seg_chunks = 0
            plan.ids[0] = _v_wu_pqk[bbf16] if a16 else -1
            if plan.seg_chunks > 0:
                plan.kind = PLAN_SEGMENTED
                plan.n = 4
                plan.ids[1] = _v_spine_maps[sdt][state_layout]
                plan.ids[2] = _v_compose
                plan.ids[3] = _v_spine_seg[sdt][state_layout]
            else:
                plan.split = force.split if force.split >= 0 else _plan_split(p, 2, sms)
                plan.kind = PLAN_OVERLAP if plan.split > 0 else PLAN_SERIAL
                if force.rs_build >= 0:
                    plan.rs_build = force.rs_build
                elif plan.split > 0:
                    plan.rs_build = RS_PAIR
                plan.n = 2
                plan.ids[1] = _v_spine_o[sdt][state_layout][plan.rs_build] if a16 and chosen == GDN_SPINE_WGMMA else -1
    for i in range(plan.n):
        if plan.ids[i] < 0:
            snprintf(msg, MSG_CAP, "build: launch %d of the %s plan's %d is not compiled into this build", i + 1,
                     _PLAN_CNAMES[plan.kind], plan.n)
            return GDN_ERR_UNKNOWN_VARIANT
    return GDN_OK


cdef const char *_PLAN_CNAMES[5]
_PLAN_CNAMES[:] = [b"unfused", b"serial", b"overlap", b"segmented", b"single"]
