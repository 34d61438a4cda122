# The plan of a call: the one planning call (_plan_call) and every rule it applies: which spine, which
# build, which plan, which launches with which grids, how much workspace, and the reasons explain()
# shows.  Each rule has its home here (the overlap rule's in overlap.pxi, the workspace's carving in
# workspace.pxi); gdn_prefill/grids.py has the grid functions the kernels share; gdn_abi.h the constants.
# (Included by _ext.pyx: one module, one namespace; the order of the includes is the order of
# definition.)

# _chunk_slots, _segment_slots, _rs_ctas, _wgmma_wg1_ctas: gdn_prefill/grids.py's functions, generated
# at build time (grids.c_formulas_pxi, run by setup.py), so the planner and the kernels share each formula
include "plan_formulas.pxi"

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
    if _wgmma_wg1_ctas(N, Hv) > GDN_WGMMA_WG1_MAX_CTAS:
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


cdef int _rs_build(const gdn_problem_t *p, int sms) noexcept nogil:
    """The spine_rs_o build (RS_SOLO, RS_PAIR, RS_DUAL) the fused plan runs for this (validated)
    problem under the rules (_rs_build_for at the overlap rule's workers).  No device query: sms is
    the caller's."""
    return _rs_build_for(p, _plan_wu_ctas(p, sms, NULL), sms)


cdef inline int _rs_build_for(const gdn_problem_t *p, int32_t wu_ctas, int sms) noexcept nogil:
    """The pair rule (its one home): the pair build wherever the overlap plan runs (wu_ctas > 0: stage
    1's workers share the L2 with the spine, and the spine's CTAs must leave half of the SMs to
    them); else the serial plan's build (_rs_serial_build)."""
    if wu_ctas > 0:
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


def _spine_rs_build(int64_t T, int64_t N, int64_t Hv, int sms=GDN_SM_COUNT, overlap=True):
    """Test / benchmark hook: the launcher's choice of spine_rs_o build ("solo", "pair" or "dual")
    for T tokens, N sequences, Hv value heads on `sms` SMs; overlap False: the serial plan's, where
    the overlap plan would run."""
    cdef gdn_problem_t p
    memset(&p, 0, sizeof(gdn_problem_t))
    p.q.shape[0] = T
    p.cu_seqlens.shape[0] = N + 1
    p.v.shape[1] = Hv
    if overlap:
        return _RS_BUILDS[_rs_build(&p, sms)]
    return _RS_BUILDS[_rs_build_for(&p, 0, sms)]


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
        snprintf(why, MSG_CAP, "variant: the %s spine for state_layout '%s' and %s pools (spine_%s%s_%s%s) is not "
                 "compiled into this build", "scalar" if spine == GDN_SPINE_SCALAR else "wgmma",
                 "kv" if state_layout == GDN_STATE_KV else "vk", _dtype_name(_pool_type(p)),
                 "scalar" if spine == GDN_SPINE_SCALAR else "wgmma",
                 "_wg2" if _spine_warpgroups(p, spine) == 2 else "",
                 "kv" if state_layout == GDN_STATE_KV else "vk", _pool_suffix(_state_type(p)))
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
        # the register-state spine loads q and stores out by TMA; its recompute_wu build is the _a16 one
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
# One planning call, _plan_call, serves every caller: gdn_prefill_raw and prefill() (then the
# workspace and the launches read the plan), explain() (then the report reads it, reasons included),
# the segment maps of gdn_prefill.distributed and the test / benchmark hooks (with forced choices).
# It validates and prepares the problem, chooses the spine, and _make_plan applies the rules in
# order; everything after reads the plan_t.  Nothing here reads device memory.
cdef enum:
    PLAN_UNFUSED = 0        # recompute_wu, the spine (h, vnew), fwd_o
    PLAN_SERIAL = 1         # fused: recompute_wu (Tu, P), spine_rs_o (solo or dual)
    PLAN_OVERLAP = 2        # fused: recompute_wu_workers, the spine beside it (overlap.pxi)
    PLAN_SEGMENTED = 3      # fused, each sequence in segments: recompute_wu, spine_rs_maps, compose, spine_rs_o_seg
    PLAN_SINGLE = 4         # single_prefill alone: stage 1 and the spine of a (sequence, head) per CTA, no workspace
    MAX_LAUNCHES = 4

PLAN_NAMES = ("unfused", "serial", "overlap", "segmented", "single")
cdef const char *_PLAN_CNAMES[5]
_PLAN_CNAMES[:] = [b"unfused", b"serial", b"overlap", b"segmented", b"single"]

# a launch's stage (the names _launch_stages takes) and its grid (the gdn_prefill.grids function
# that the kernel's launch function calls too: _launch_grid)
cdef enum:
    STAGE_WU = 0            # recompute_wu
    STAGE_SPINE = 1         # the spine: the unfused plan's, spine_rs_o, the SEGMENT pass
    STAGE_FWD_O = 2
    STAGE_MAPS = 3          # the segmented plan's MAPS pass
    STAGE_COMPOSE = 4
    STAGE_SINGLE = 5        # the single plan's one kernel
    GRID_WU = 0             # grid_recompute_wu
    GRID_SPINE_SCALAR = 1   # grid_spine_scalar
    GRID_SPINE_WGMMA = 2    # grid_spine_wgmma at the plan's warpgroups
    GRID_SPINE_RS = 3       # grid_spine_rs (dual: the plan's rs_build)
    GRID_SEGMENTS = 4       # grid_spine_rs_segments at the plan's seg_chunks (SEGMENT: its rs_build)
    GRID_COMPOSE = 5        # grid_compose
    GRID_FWD_O = 6          # grid_fwd_o
    GRID_SINGLE = 7         # grid_single
    GRID_WU_WORKERS = 8     # grid_recompute_wu_workers at the plan's wu_ctas

_STAGE_NAMES = ("recompute_wu", "spine", "fwd_o", "maps", "compose", "single")


cdef struct plan_t:
    int chosen              # the spine (GDN_SPINE_*)
    int kind                # PLAN_*
    int n                   # launches, ids[0 .. n)
    int ids[MAX_LAUNCHES]   # their builds (launch-table ids)
    int stages[MAX_LAUNCHES]    # their stages (STAGE_*)
    int grids[MAX_LAUNCHES]     # their grids (GRID_*)
    int rs_build            # the fused plans' spine_rs_o build (RS_*; the segmented plan: its SEGMENT pass's)
    int warpgroups          # the unfused plan's wgmma spine build
    int32_t wu_ctas         # PLAN_OVERLAP: the workers build's CTAs (the SMs the spine leaves)
    int32_t seg_chunks      # PLAN_SEGMENTED: chunks per segment
    int64_t longest         # chunks of the longest sequence the cost model assumed
    int64_t serial_ns       # the cost model's prediction for the serial plan (0: not modelled)
    int64_t segmented_ns    # ... for the segmented plan at seg_model_chunks (0: not feasible)
    int64_t overlap_ns      # ... for the overlap plan (0: its rule does not apply)
    int32_t seg_model_chunks    # the segment length segmented_ns prices (kept where the serial plan wins)
    int fused_rc            # the fused plans' guard (_fused_guard): GDN_OK, its status, -1 not reached
    int64_t workspace_bytes # the plan's workspace (_plan_workspace_bytes)
    int invariant           # 1: planned under batch_invariant=True (_INVARIANT)


cdef struct plan_reasons_t:
    # what explain() shows, filled by _plan_call when asked (prefill and the raw entry never ask)
    char spines[NUM_SPINES][MSG_CAP]    # per GDN_SPINE_*: why _spine_guard rejects it ("" : it runs)
    char fused[MSG_CAP]     # why the fused plans do not run ("" : they do)
    char single[MSG_CAP]    # the single plan: "runs" or why not
    char overlap[MSG_CAP]   # the overlap plan: "runs: ..." or why not
    char why[MSG_CAP]       # why this plan


cdef struct plan_force_t:
    # test / benchmark hooks: -1 everywhere is the rules (prefill, explain)
    int warpgroups          # 1 or 2: the unfused plan's wgmma spine build
    int fused               # 0 / 1 / 2: the unfused plan / a two-launch fused plan / the single plan
    int rs_build            # RS_*: the serial plan's spine_rs_o build, or the SEGMENT pass's (solo, dual)
    int32_t wu_ctas         # 0: no overlap; > 0: the overlap plan with this many workers CTAs
    int32_t seg_chunks      # 0: not segmented; > 0: the segmented plan with these segments
    int invariant           # 1: the problem's batch_invariant (_INVARIANT)


cdef plan_force_t _NO_FORCE
_NO_FORCE.warpgroups = -1
_NO_FORCE.fused = -1
_NO_FORCE.rs_build = -1
_NO_FORCE.wu_ctas = -1
_NO_FORCE.seg_chunks = -1
_NO_FORCE.invariant = 0

# batch_invariant (gdn_problem_t; prefill(batch_invariant=True)): a sequence's arithmetic must not depend
# on the rest of its batch, so neither may its rounding.  The serial plan's builds (solo, pair, dual) and
# the overlap plan compute the same bits (test_fused_spine_builds_agree_bit_for_bit); the single kernel
# computes them too when batch_invariant is 1 (its fp32 inverse; its sums in stage 1's orders), so its
# rule stays.  The segmented plan, a split that depends on the batch's shape, rounds differently: it
# never runs.  Where the fused plans do not run, the unfused plan runs as it would.
cdef plan_force_t _INVARIANT
_INVARIANT = _NO_FORCE
_INVARIANT.invariant = 1            # no segments (_make_plan); the rest by the rules
# GDN_PREFILL_BATCH_INVARIANT=1 (read once, at import): every call of the process is batch-invariant,
# for call sites that cannot pass the flag (FlashInfer's signature, as SGLang calls it; transformers)
cdef bint _invariant_env = os.environ.get("GDN_PREFILL_BATCH_INVARIANT", "0") == "1"


cdef inline int64_t _cdiv(int64_t a, int64_t b) noexcept nogil:
    return (a + b - 1) // b


cdef inline int64_t _stage1_work_ns(int64_t T, int64_t N, int64_t Hv, int64_t sms) noexcept nogil:
    """The cost model's stage 1 work: its chunk-heads at GDN_MODEL_WU_SM_NS of one SM each, spread
    over `sms` SMs (the device's, or the overlap plan's workers')."""
    return (_cdiv(T, GDN_CHUNK) + N) * Hv * GDN_MODEL_WU_SM_NS // max(sms, 1)


cdef int64_t _stage1_ns(int64_t T, int64_t N, int64_t Hv, int sms) noexcept nogil:
    """The cost model's stage 1 (recompute_wu) and a call's fixed cost: its work over the SMs."""
    return GDN_MODEL_LAUNCH_NS + _stage1_work_ns(T, N, Hv, sms)


cdef int64_t _serial_ns(int64_t T, int64_t N, int64_t Hv, int64_t longest, int rs_build, int sms) noexcept nogil:
    """The cost model's serial fused plan: stage 1, then the spine's waves of CTAs, each as long as
    the longest sequence's chain (solo: GDN_MODEL_CHAIN_NS a chunk; dual: GDN_RS_DUAL_WAVE_NS)."""
    cdef int64_t ctas, chunk_ns
    if rs_build == RS_DUAL:
        ctas, chunk_ns = N * Hv, GDN_RS_DUAL_WAVE_NS
    else:
        ctas, chunk_ns = _rs_ctas(N, Hv), GDN_MODEL_CHAIN_NS
    return _stage1_ns(T, N, Hv, sms) + _cdiv(ctas, max(sms, 1)) * longest * chunk_ns


cdef int64_t _overlap_ns(int64_t T, int64_t N, int64_t Hv, int64_t longest, int32_t wu_ctas,
                         int64_t serial_ns) noexcept nogil:
    """The cost model's overlap plan: the longest sequence's chain beside stage 1's workers
    (GDN_MODEL_OVERLAP_CHAIN_PCT of the serial chain: their traffic slows it), or stage 1 on the
    workers' wu_ctas SMs where that takes longer, and its fixed cost (GDN_MODEL_OVERLAP_NS); never
    more than the serial plan's serial_ns (measured: level at 33 chunk slots, faster from 65; on
    short prompts the serial model's fixed cost is the smaller, and the two must compare alike
    against the segmented plan)."""
    cdef int64_t chain = longest * GDN_MODEL_CHAIN_NS * GDN_MODEL_OVERLAP_CHAIN_PCT // 100
    return min(max(chain, _stage1_work_ns(T, N, Hv, wu_ctas)) + GDN_MODEL_OVERLAP_NS, serial_ns)


cdef inline int _segment_subs(int seg_build) noexcept nogil:
    """The SEGMENT pass's CTAs per (segment slot, head): the solo build's two halves, the dual build's
    one CTA (grids.grid_spine_rs_segments' subs; the MAPS pass has two, its A and B)."""
    return 1 if seg_build == RS_DUAL else 2


cdef int64_t _segmented_ns(int64_t T, int64_t N, int64_t Hv, int64_t longest, int64_t sc, int sms,
                           int seg_build=RS_SOLO) noexcept nogil:
    """The cost model's segmented plan with segments of sc chunks, for a longest sequence of
    `longest` chunks: stage 1; the MAPS pass (dual CTAs, GDN_MODEL_MAPS_NS a chunk) over one
    segment, in waves of CTAs; the composition's nseg - 2 steps; the SEGMENT pass (solo chains,
    GDN_MODEL_SEG_CHAIN_NS a chunk; seg_build RS_DUAL: a CTA per segment and head, a wave
    GDN_RS_DUAL_WAVE_NS a chunk, as the serial plan's dual build) over one segment, in waves; each
    pass's fixed cost.  CTAs: one sequence's (MAPS 2 nseg - 3 per head, those that work: the last
    segment's two return at once; SEGMENT 2 nseg, dual nseg), several sequences' by the grid's
    bound.  Every map is priced whole: the cut (spine_rs._map_cut) depends on the gates, which the
    planner cannot see.  The passes add up (measured timelines: each launch starts its work as the
    one before ends)."""
    cdef int64_t nseg = _cdiv(longest, sc)
    cdef int64_t seg = min(sc, longest)
    cdef int64_t maps_ctas, seg_ctas
    cdef int64_t seg_chunk_ns = GDN_RS_DUAL_WAVE_NS if seg_build == RS_DUAL else GDN_MODEL_SEG_CHAIN_NS
    if N == 1:
        maps_ctas = max(2 * nseg - 3, 1) * Hv
        seg_ctas = nseg * Hv * _segment_subs(seg_build)
    else:
        maps_ctas = _segment_slots(T, N, sc) * Hv * 2
        seg_ctas = maps_ctas // 2 * _segment_subs(seg_build)
    return (_stage1_ns(T, N, Hv, sms)
            + GDN_MODEL_PASS_NS + _cdiv(maps_ctas, max(sms, 1)) * seg * GDN_MODEL_MAPS_NS
            + max(nseg - 2, 0) * GDN_MODEL_COMPOSE_NS
            + GDN_MODEL_PASS_NS + _cdiv(seg_ctas, max(sms, 1)) * seg * seg_chunk_ns)


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
        if _segment_slots(T, N, sc) * Hv * 2 > GDN_SEG_MAX_CTAS:
            continue                       # the workspace bound (gdn_workspace_bytes): at most this many CTAs
        t = _segmented_ns(T, N, Hv, longest, sc, sms)
        if best == 0 or t < best_ns[0]:
            best, best_ns[0] = <int32_t>sc, t
    return best


cdef bint _segmented_builds(const gdn_problem_t *p, int state_layout) noexcept nogil:
    cdef int sdt = _state_type(p)
    return (_v_spine_maps[sdt][state_layout] >= 0 and _v_spine_seg[sdt][state_layout][RS_SOLO] >= 0
            and _v_compose >= 0)


cdef int _single_rule(const gdn_problem_t *p, int sms, char *why) noexcept nogil:
    """1 where the single plan runs (the rule's one home; gdn_abi.h GDN_SINGLE_LAT_PCT has it and its
    measurements), else 0 and the reason in `why` (NULL: no reason is formatted, as on prefill()'s
    path, where the rule fails on most calls).  From the shapes and max_seqlen only: the lengths
    themselves are device values."""
    cdef int64_t T = p.q.shape[0], Hv = p.v.shape[1]
    cdef int64_t longest = _cdiv(p.max_seqlen, GDN_CHUNK), total = _cdiv(T, GDN_CHUNK)
    if p.max_seqlen <= 0:
        if why != NULL:
            snprintf(why, MSG_CAP, "max_seqlen is not given: the longest sequence is unknown to the host")
        return 0
    if longest * sms * GDN_SINGLE_LAT_PCT > total * Hv * 100:
        if why != NULL:
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


cdef int _plan_call(gdn_problem_t *p, int spine, int state_layout, int sms, const plan_force_t *force,
                    bint on_device, plan_t *plan, plan_reasons_t *reasons, char *msg) noexcept nogil:
    """THE planning call: the plan of one call into `plan`, GDN_OK or the status and message of
    the first rule the problem breaks.  In order: validate (_validate); prepare the problem for the
    kernels in place (_derive: flags, logical views); on_device: the current device must be a
    Hopper; the spine (_choose); then the plan (_make_plan) for `sms` SMs (0: the current device's,
    _sm_count).  force: the rules (&_NO_FORCE) or the hooks' forced choices (the problem's
    batch_invariant overrides both, GDN_PREFILL_BATCH_INVARIANT=1 the rules: _INVARIANT).  reasons: NULL, or
    what explain() shows (each spine's guard, and _make_plan's reasons).  Nothing here reads
    device memory, takes the GIL or launches."""
    cdef int chosen = 0, rc, s
    memset(plan, 0, sizeof(plan_t))
    plan.fused_rc = -1
    rc = _validate(p, state_layout, msg)
    if rc != GDN_OK:
        return rc
    _derive(p, state_layout)
    if on_device and _device_major() != 9:
        snprintf(msg, MSG_CAP, "device: the current CUDA device is not compute capability 9.x (Hopper); "
                 "the kernels are compiled for sm_90a")
        return GDN_ERR_ARGUMENT
    if reasons != NULL:
        memset(reasons, 0, sizeof(plan_reasons_t))
        for s in range(GDN_SPINE_SCALAR, GDN_SPINE_WGMMA + 1):
            if _spine_guard(p, s, state_layout, reasons.spines[s]) == GDN_OK:
                reasons.spines[s][0] = 0
    rc = _choose(p, spine, state_layout, &chosen, msg)
    if rc != GDN_OK:
        return rc
    if p.batch_invariant or (_invariant_env and force == &_NO_FORCE):
        force = &_INVARIANT
        p.batch_invariant = 1               # the single kernel reads it (its fp32 inverse)
    return _make_plan(p, chosen, state_layout, sms if sms > 0 else _sm_count(), force, plan, reasons, msg)


cdef inline void _add_launch(plan_t *plan, int vid, int stage, int grid) noexcept nogil:
    plan.ids[plan.n] = vid
    plan.stages[plan.n] = stage
    plan.grids[plan.n] = grid
    plan.n += 1


cdef int _make_plan(const gdn_problem_t *p, int chosen, int state_layout, int sms, const plan_force_t *force,
                    plan_t *plan, plan_reasons_t *reasons, char *msg) noexcept nogil:
    """The plan of one validated call (chosen: its spine), into `plan`; the builds must be compiled
    in.  The rules, in order: the fused plans where _fused_guard allows (else the unfused plan);
    among them first the single plan where its rule applies (_single_rule); else the segmented plan
    where the cost model predicts it faster than the serial one, or than the overlap one where its
    rule applies (longest sequence: the call's tokens, max_seqlen when given); else the overlap plan
    where its rule applies (_plan_wu_ctas); else the serial plan (solo or dual: _rs_serial_build).  Each plan's launches,
    in order, with their builds, stages and grids, and its workspace.  reasons (may be NULL): why,
    as explain() shows it."""
    cdef int64_t T = p.q.shape[0], N = p.cu_seqlens.shape[0] - 1, Hv = p.v.shape[1]
    cdef int a16 = 1 if _aligned16(p) else 0
    cdef int bbf16 = 1 if p.beta.dtype == GDN_DTYPE_BF16 else 0
    cdef int sdt = _state_type(p)
    cdef int i, fused, single_ok
    cdef int32_t wu_ctas = 0
    cdef int64_t seg_ns = 0, model_longest
    cdef bint forced = force.seg_chunks >= 0 or force.wu_ctas >= 0 or force.rs_build >= 0
    cdef char scratch[MSG_CAP]
    cdef char *fused_why = scratch
    cdef char *single_why = NULL       # formatted only for explain(): the rule fails on most calls
    cdef char *overlap_why = NULL
    if reasons != NULL:
        fused_why, single_why, overlap_why = &reasons.fused[0], &reasons.single[0], &reasons.overlap[0]
    memset(plan, 0, sizeof(plan_t))
    plan.chosen = chosen
    plan.invariant = force.invariant
    # the longest sequence: the call's tokens for one sequence; for several, the caller's max_seqlen
    # (the lengths are on the device), and without it no segmented plan (0)
    if N == 1:
        plan.longest = _cdiv(T, GDN_CHUNK)
    elif p.max_seqlen > 0:
        plan.longest = _cdiv(min(p.max_seqlen, T), GDN_CHUNK)
    plan.fused_rc = _fused_guard(p, chosen, state_layout, sms, fused_why)
    fused = force.fused if force.fused >= 0 else (1 if plan.fused_rc == GDN_OK else 0)
    if not fused:
        plan.kind = PLAN_UNFUSED
        plan.warpgroups = force.warpgroups if force.warpgroups > 0 else _spine_warpgroups(p, chosen)
        _add_launch(plan, _v_wu[bbf16][a16], STAGE_WU, GRID_WU)
        _add_launch(plan, _spine_variant(p, chosen, state_layout, plan.warpgroups), STAGE_SPINE,
                    GRID_SPINE_WGMMA if chosen == GDN_SPINE_WGMMA else GRID_SPINE_SCALAR)
        _add_launch(plan, _v_fwd_o[a16], STAGE_FWD_O, GRID_FWD_O)
        if reasons != NULL:
            snprintf(reasons.single, MSG_CAP, "a fused plan: it does not run where the fused plans do not")
            snprintf(reasons.overlap, MSG_CAP, "only the fused-output plan overlaps stage 1 with the spine")
            snprintf(reasons.why, MSG_CAP, "the fused plans do not run: %.480s", reasons.fused)
    else:
        plan.rs_build = _rs_serial_build(p, sms)
        model_longest = plan.longest if plan.longest > 0 else _cdiv(T, GDN_CHUNK)
        plan.serial_ns = _serial_ns(T, N, Hv, model_longest, plan.rs_build, sms)
        # the overlap plan where its rule applies: the plan a segmentation must beat, in its place
        wu_ctas = force.wu_ctas if force.wu_ctas >= 0 else _plan_wu_ctas(p, sms, overlap_why)
        if wu_ctas > 0:
            plan.overlap_ns = _overlap_ns(T, N, Hv, model_longest, wu_ctas, plan.serial_ns)
        if _single_variant(p, state_layout) < 0:
            single_ok = 0
            if single_why != NULL:
                snprintf(single_why, MSG_CAP, "its build is not compiled into this build")
        else:
            single_ok = _single_rule(p, sms, single_why)
        if force.fused == 2 or (force.fused < 0 and not forced and single_ok):
            plan.kind = PLAN_SINGLE
            _add_launch(plan, _single_variant(p, state_layout) if a16 and chosen == GDN_SPINE_WGMMA else -1,
                        STAGE_SINGLE, GRID_SINGLE)
        else:
            if force.seg_chunks > 0:
                plan.seg_chunks = force.seg_chunks
                plan.segmented_ns = _segmented_ns(T, N, Hv, plan.longest, force.seg_chunks, sms,
                                                  RS_DUAL if force.rs_build == RS_DUAL else RS_SOLO)
                plan.seg_model_chunks = force.seg_chunks
            elif not forced and not force.invariant and plan.longest > 1 and _segmented_builds(p, state_layout):
                plan.seg_chunks = _choose_segments(p, plan.longest, sms, &seg_ns)
                plan.segmented_ns = seg_ns
                plan.seg_model_chunks = plan.seg_chunks
                if plan.seg_chunks > 0 and seg_ns >= (plan.overlap_ns if plan.overlap_ns > 0 else plan.serial_ns):
                    plan.seg_chunks = 0
            _add_launch(plan, _v_wu_pqk[bbf16] if a16 else -1, STAGE_WU, GRID_WU)
            if plan.seg_chunks > 0:
                plan.kind = PLAN_SEGMENTED
                _add_launch(plan, _v_spine_maps[sdt][state_layout], STAGE_MAPS, GRID_SEGMENTS)
                _add_launch(plan, _v_compose, STAGE_COMPOSE, GRID_COMPOSE)
                # the SEGMENT pass: solo, or dual where forced (a build under measurement: PERFORMANCE.md)
                plan.rs_build = force.rs_build if force.rs_build >= 0 else RS_SOLO
                _add_launch(plan, _v_spine_seg[sdt][state_layout][plan.rs_build], STAGE_SPINE, GRID_SEGMENTS)
            else:
                plan.wu_ctas = wu_ctas
                plan.kind = PLAN_OVERLAP if plan.wu_ctas > 0 else PLAN_SERIAL
                if plan.kind == PLAN_OVERLAP:
                    # stage 1 as the workers build, the spine's programmatic dependent (overlap.pxi)
                    plan.ids[0] = _v_wu_workers[bbf16] if a16 else -1
                    plan.grids[0] = GRID_WU_WORKERS
                plan.rs_build = force.rs_build if force.rs_build >= 0 else _rs_build_for(p, plan.wu_ctas, sms)
                _add_launch(plan, _v_spine_o[sdt][state_layout][plan.rs_build] if a16 and chosen == GDN_SPINE_WGMMA
                            else -1, STAGE_SPINE, GRID_SPINE_RS)
        if reasons != NULL:
            _fused_reasons(p, plan, state_layout, sms, single_ok, reasons)
    plan.workspace_bytes = _plan_workspace_bytes(T, N, Hv, plan.kind, plan.seg_chunks)
    for i in range(plan.n):
        if plan.ids[i] < 0:
            snprintf(msg, MSG_CAP, "build: launch %d of the %s plan's %d is not compiled into this build", i + 1,
                     _PLAN_CNAMES[plan.kind], plan.n)
            return GDN_ERR_UNKNOWN_VARIANT
    return GDN_OK


cdef void _fused_reasons(const gdn_problem_t *p, const plan_t *plan, int state_layout, int sms, int single_ok,
                         plan_reasons_t *r) noexcept nogil:
    """explain()'s reasons for a fused plan (single, overlap, why), from the decisions _make_plan
    made (its `single_ok`: the single plan's rule; r.overlap: the overlap rule's reason)."""
    cdef int64_t T = p.q.shape[0], N = p.cu_seqlens.shape[0] - 1, Hv = p.v.shape[1]
    cdef int64_t nseg
    cdef char serial_why[MSG_CAP]
    cdef bint priced = False            # the why names the plan that runs and its predicted time
    # the plan a segmentation had to beat: the overlap plan where its rule applies, else the serial plan
    cdef const char *base = _PLAN_CNAMES[PLAN_OVERLAP if plan.overlap_ns > 0 else PLAN_SERIAL]
    cdef int64_t base_ns = plan.overlap_ns if plan.overlap_ns > 0 else plan.serial_ns
    if plan.kind == PLAN_SINGLE:
        snprintf(r.single, MSG_CAP, "runs")
    elif single_ok:
        snprintf(r.single, MSG_CAP, "a forced plan runs instead")
    if plan.kind == PLAN_SINGLE or plan.kind == PLAN_SEGMENTED:
        snprintf(r.overlap, MSG_CAP, "the %s plan runs instead", _PLAN_CNAMES[plan.kind])
    elif plan.kind == PLAN_OVERLAP:
        snprintf(r.overlap, MSG_CAP, "runs: recompute_wu_workers on %d CTAs (the SMs the spine leaves) over the "
                 "%lld chunk slots, the spine beside them as their programmatic dependent, waiting for each slot",
                 <int>plan.wu_ctas, <long long>_chunk_slots(T, N))
    if plan.kind == PLAN_SINGLE:
        snprintf(r.why, MSG_CAP, "the longest sequence (%lld chunks, max_seqlen) alone takes no longer than the "
                 "batch's %lld chunk-heads spread over the %d SMs, so one kernel per (sequence, head) keeps them "
                 "busy and beats the serial plan's two launches (gdn_abi.h GDN_SINGLE_LAT_PCT)%s",
                 <long long>_cdiv(p.max_seqlen, GDN_CHUNK), <long long>(_cdiv(T, GDN_CHUNK) * Hv), sms,
                 "; batch_invariant=True: its inverse in fp32, the serial plan's bits" if plan.invariant else "")
    elif plan.kind == PLAN_SEGMENTED:
        nseg = _cdiv(plan.longest, plan.seg_chunks)
        snprintf(r.why, MSG_CAP, "the longest sequence (%lld chunks) in %lld segments of %d chunks runs its chains "
                 "side by side on %lld CTAs: predicted %.1f us against the %s plan's %.1f us",
                 <long long>plan.longest, <long long>nseg, <int>plan.seg_chunks,
                 <long long>(_segment_slots(T, N, plan.seg_chunks) * Hv * _segment_subs(plan.rs_build)),
                 plan.segmented_ns / 1000.0,
                 base, base_ns / 1000.0)
    elif plan.invariant:
        snprintf(r.why, MSG_CAP, "batch_invariant=True%s: the serial plan, whose builds, overlap plan and the "
                 "single kernel (its inverse in fp32) give a sequence the same bits in any batch; the segmented plan, "
                 "a split by the batch's shape, rounds differently and does not run",
                 " (GDN_PREFILL_BATCH_INVARIANT=1)" if _invariant_env else "")
    elif plan.longest == 0:
        snprintf(r.why, MSG_CAP, "several sequences and no max_seqlen: their lengths are device values, so no "
                 "sequence is split (pass max_seqlen to let the planner segment long ones)")
    elif plan.segmented_ns > 0:
        snprintf(r.why, MSG_CAP, "the %s plan is predicted faster (%.1f us) than the best segmented one "
                 "(%.1f us, segments of %d chunks)", base, base_ns / 1000.0, plan.segmented_ns / 1000.0,
                 <int>plan.seg_model_chunks)
        priced = True
    elif not _segmented_builds(p, state_layout):
        snprintf(r.why, MSG_CAP, "the segmented plan's builds are not compiled into this build")
    elif p.checkpoint_chunks > 0:
        snprintf(r.why, MSG_CAP, "no segmentation of the longest sequence (%lld chunks) fits: at most %d CTAs per "
                 "pass, segments a multiple of the checkpoint interval (%d chunks)", <long long>plan.longest,
                 GDN_SEG_MAX_CTAS, <int>p.checkpoint_chunks)
    else:
        snprintf(r.why, MSG_CAP, "no segmentation of the longest sequence (%lld chunks) fits: at most %d CTAs per "
                 "pass", <long long>plan.longest, GDN_SEG_MAX_CTAS)
    if plan.kind == PLAN_OVERLAP and not plan.invariant and not priced:
        # why no segments, and the serial plan's overlapped form (the same arithmetic) where the rule applies
        snprintf(serial_why, MSG_CAP, "%s", r.why)
        snprintf(r.why, MSG_CAP, "%.400s; the overlap plan: stage 1's workers fill the SMs the spine leaves",
                 serial_why)


cdef tuple _launch_grid(const gdn_problem_t *p, const plan_t *plan, int i):
    """The grid of launch i of a planned call: gdn_prefill.grids's function, which the kernel's launch
    function calls too (so the plan and the kernel cannot disagree)."""
    T, N, Hv = p.q.shape[0], p.cu_seqlens.shape[0] - 1, p.v.shape[1]
    g = plan.grids[i]
    if g == GRID_WU:
        return tuple(_grids.grid_recompute_wu(T, N, Hv))
    if g == GRID_SPINE_SCALAR:
        return tuple(_grids.grid_spine_scalar(T, N, Hv))
    if g == GRID_SPINE_WGMMA:
        return tuple(_grids.grid_spine_wgmma(T, N, Hv, plan.warpgroups))
    if g == GRID_SPINE_RS:
        return tuple(_grids.grid_spine_rs(T, N, Hv, plan.rs_build == RS_DUAL))
    if g == GRID_SEGMENTS:
        subs = _segment_subs(plan.rs_build) if plan.stages[i] == STAGE_SPINE else 2     # MAPS: A and B
        return tuple(_grids.grid_spine_rs_segments(T, N, Hv, plan.seg_chunks, subs))
    if g == GRID_COMPOSE:
        return tuple(_grids.grid_compose(N, Hv))
    if g == GRID_FWD_O:
        return tuple(_grids.grid_fwd_o(T, N, Hv))
    if g == GRID_WU_WORKERS:
        return tuple(_grids.grid_recompute_wu_workers(plan.wu_ctas))
    return tuple(_grids.grid_single(T, N, Hv))


cdef inline int _spine_index(const plan_t *plan) noexcept nogil:
    """Which launch of the plan is its spine (the segmented plan's: the SEGMENT pass; the single
    plan's: its one launch)."""
    cdef int i
    for i in range(plan.n):
        if plan.stages[i] == STAGE_SPINE or plan.stages[i] == STAGE_SINGLE:
            return i
    return 0
