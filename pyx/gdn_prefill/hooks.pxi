# Test and benchmark hooks: forced builds, plans and stages.
# (Included by _ext.pyx: one module, one namespace; the order of the includes is the order of
# definition.)

cdef int _check_rs_build(int rs_build) except -1:
    """The benchmark hooks' forced spine_rs_o build: -1 (the rule) or a code of _RS_BUILDS."""
    if rs_build < -1 or rs_build >= NUM_RS_BUILDS:
        raise _errors.GdnArgumentError(f"rs_build: must be -1 (the rule), 0 (solo), 1 (pair) or 2 (dual), got {rs_build}")
    return 0


cdef plan_force_t _forced(int warpgroups, int fused, int rs_build, int32_t overlap_wu_ctas, int seg_chunks) except *:
    """The hooks' forced choices (-1 / 0 / -1 / -1 / 0: the rules), checked."""
    cdef plan_force_t f = _NO_FORCE
    if warpgroups < 0 or warpgroups > NUM_SPINE_WG:
        raise _errors.GdnArgumentError(f"warpgroups: must be 0 (the rule), 1 or 2, got {warpgroups}")
    if fused < -1 or fused > 2:
        raise _errors.GdnArgumentError(f"fused: must be -1 (the rule), 0 (unfused), 1 (a two-launch fused plan) or 2 "
                                       f"(the single plan), got {fused}")
    if seg_chunks < 0:
        raise _errors.GdnArgumentError(f"seg_chunks: must be 0 (the rule) or a positive number of chunks, got {seg_chunks}")
    _check_rs_build(rs_build)
    f.warpgroups = warpgroups if warpgroups > 0 else -1
    f.fused = fused
    f.rs_build = rs_build
    if overlap_wu_ctas < -1:
        raise _errors.GdnArgumentError(f"overlap_wu_ctas: must be -1 (the rule), 0 (the serial plan) or a number of "
                                       f"CTAs, got {overlap_wu_ctas}")
    f.wu_ctas = overlap_wu_ctas
    if seg_chunks > 0:
        if fused == 0 or fused == 2:
            raise _errors.GdnArgumentError(f"seg_chunks: the segmented plan is a two-launch fused plan (fused={fused} given)")
        if rs_build == RS_PAIR:
            raise _errors.GdnArgumentError("rs_build: the segmented plan's SEGMENT pass is built solo (0) or dual (2), "
                                           "not pair (1)")
        f.seg_chunks = seg_chunks
        f.fused = 1
    return f


cdef tuple _stage_names(const plan_t *plan):
    return tuple(_STAGE_NAMES[plan.stages[i]] for i in range(plan.n))


def _builds(q, k, v, g, beta, out, state=None, *, cu_seqlens, state_indices=None, str state_layout="kv",
            str spine="auto", int warpgroups=0, int fused=-1, int rs_build=-1, int seg_chunks=0, max_seqlen=None,
            bint with_grids=False):
    """Benchmark hook: the variant names of the launches _launch_stages(..., warpgroups, fused,
    rs_build, seg_chunks) makes (what explain() lists for the rules, warpgroups 0, fused -1,
    rs_build -1 and seg_chunks 0); with_grids: (name, grid) pairs, the grids as explain() gives them."""
    cdef gdn_problem_t p
    cdef int spine_code = 0, layout_code = 0, rc, i
    cdef plan_t plan
    cdef plan_force_t force
    cdef char msg[MSG_CAP]
    _codes(spine, state_layout, &spine_code, &layout_code)
    force = _forced(warpgroups, fused, rs_build, -1, seg_chunks)
    _build(&p, q, k, v, g, beta, out, state, cu_seqlens, state_indices, None, False, DEVICES_ANY, NULL, None,
           None, None, None, True, max_seqlen)
    rc = _plan_call(&p, spine_code, layout_code, 0, &force, False, &plan, NULL, msg)
    if rc != GDN_OK and rc != GDN_ERR_UNKNOWN_VARIANT:
        _raise(rc, msg)
    names = [gdn_variant_name(plan.ids[i]).decode() if plan.ids[i] >= 0 else None for i in range(plan.n)]
    if with_grids:
        return [(names[i], _launch_grid(&p, &plan, i)) for i in range(plan.n)]
    return names


def _launch_stages(stages, q, k, v, g, beta, out, state=None, *, cu_seqlens, state_indices=None,
                   str state_layout="kv", scale=None, bint use_qk_l2norm=False, str spine="auto", workspace,
                   int warpgroups=0, int fused=-1, int overlap_wu_ctas=-1, int rs_build=-1, int seg_chunks=0,
                   checkpoint_every=None, checkpoints=None, initial_state=None, has_initial_state=True,
                   max_seqlen=None, checkpoint_pool=None):
    """Test hook: validate and plan like prefill(), then launch only the named stages on the current
    stream (a per-sequence has_initial_state must be bool or uint8 here: no conversions).

    `stages` names launches of the plan, run in plan order: the unfused plan's ("recompute_wu",
    "spine", "fwd_o"), the fused plans' ("recompute_wu", "spine"), the segmented plan's
    ("recompute_wu", "maps", "compose", "spine"); so GPU tests can check each stage's workspace
    output against the fp64 oracle, and benchmarks time each.  The plan is prefill()'s unless
    forced: `warpgroups` 1 or 2 the unfused plan's wgmma spine build (0: the rule), `rs_build`
    0 / 1 / 2 the serial plan's solo, pair or dual spine_rs_o build (with seg_chunks: the SEGMENT
    pass's, 0 solo or 2 dual; -1: the rule), `fused` 0 / 1
    the unfused or a fused plan (-1: the rule), `seg_chunks` > 0 the segmented plan with segments of
    that many chunks (0: the rule), `overlap_wu_ctas` 0 the serial plan, c > 0 the overlap plan with
    stage 1's workers build on c CTAs (any count: fewer workers only make the spine wait longer; also
    below the rule's minimum of chunk slots or beside more spine CTAs than its balance allows; -1: the
    rule).  The overlap plan runs only when both of its stages are named.
    `fused` 2 forces the single plan, whose one launch is "single" (cute_kernels/single.py; it reads
    and writes no workspace).
    """
    cdef gdn_problem_t p
    cdef int spine_code = 0, layout_code = 0, rc, i, n = 0, sms
    cdef plan_t plan
    cdef plan_reasons_t reasons
    cdef plan_force_t force
    cdef int ids[MAX_LAUNCHES]
    cdef char msg[MSG_CAP]
    import torch
    _codes(spine, state_layout, &spine_code, &layout_code)
    force = _forced(warpgroups, fused, rs_build, overlap_wu_ctas, seg_chunks)
    _build(&p, q, k, v, g, beta, out, state, cu_seqlens, state_indices, scale, use_qk_l2norm, DEVICES_ANY, NULL,
           None, checkpoints, checkpoint_every, initial_state, has_initial_state, max_seqlen, checkpoint_pool)
    sms = _sm_count()
    if force.seg_chunks > 0 and p.checkpoint_chunks > 0 and force.seg_chunks % p.checkpoint_chunks != 0:
        raise _errors.GdnArgumentError(f"seg_chunks: {force.seg_chunks} is not a multiple of the checkpoint "
                                       f"interval ({p.checkpoint_chunks} chunks)")
    rc = _plan_call(&p, spine_code, layout_code, sms, &force, True, &plan, &reasons, msg)
    if rc == GDN_OK and warpgroups != 0 and plan.chosen != GDN_SPINE_WGMMA:
        raise _errors.GdnArgumentError("warpgroups: only the wgmma spine has builds by warpgroups")
    if force.fused >= 1 and plan.fused_rc > 0:
        # a fused plan forced where its guard rejects the call: its reason, not a missing build
        raise _errors.GdnSpineError(f"fused: {reasons.fused.decode()}")
    if rc == GDN_OK:
        names = _stage_names(&plan)
        for stage in stages:
            if stage not in names:
                raise _errors.GdnArgumentError(f"stages: {stage!r} is not a launch of the {PLAN_NAMES[plan.kind]} "
                                               f"plan {names}")
        for i in range(plan.n):
            if names[i] in stages:
                ids[n] = plan.ids[i]
                n += 1
        rc = _bind_workspace(&p, <void *><uintptr_t>workspace.data_ptr(), workspace.numel(), &plan, msg)
    if rc == GDN_OK:
        stream_ptr = torch.cuda.current_stream().cuda_stream
        if plan.kind == PLAN_OVERLAP and n == 2:
            rc = _launch_overlap(&p, ids, plan.wu_ctas, <cudaStream_t><uintptr_t>stream_ptr, msg)
        else:
            rc = _launch(&p, ids, n, <cudaStream_t><uintptr_t>stream_ptr, msg)
    if rc != GDN_OK:
        _raise(rc, msg)
    return SPINE_NAMES[plan.chosen]


def _segmented_workspace_bytes(int64_t T, int64_t N, int64_t Hv, int seg_chunks):
    """Test / benchmark hook: the workspace of the segmented plan forced to segments of seg_chunks
    chunks (beyond the planner's CTA budget, which gdn_workspace_bytes covers)."""
    if seg_chunks <= 0:
        raise _errors.GdnArgumentError(f"seg_chunks: must be positive, got {seg_chunks}")
    return int(_plan_workspace_bytes(T, N, Hv, PLAN_SEGMENTED, seg_chunks))


def _model_ns(int64_t T, int64_t N, int64_t Hv, int64_t longest_chunks, int seg_chunks, int sms=GDN_SM_COUNT,
              int seg_build=0):
    """Benchmark hook: the planner's cost model, (serial, segmented at seg_chunks, overlap; 0 for none)
    in ns, for a longest sequence of longest_chunks chunks (the serial plan with its rule's build;
    the segmented plan's SEGMENT pass seg_build, 0 solo or 2 dual; the overlap plan where its rule
    applies)."""
    if seg_build != RS_SOLO and seg_build != RS_DUAL:
        raise _errors.GdnArgumentError(f"seg_build: must be 0 (solo) or 2 (dual), got {seg_build}")
    cdef gdn_problem_t p
    memset(&p, 0, sizeof(gdn_problem_t))
    p.q.shape[0] = T
    p.cu_seqlens.shape[0] = N + 1
    p.v.shape[1] = Hv
    serial = _serial_ns(T, N, Hv, longest_chunks, _rs_serial_build(&p, sms), sms)
    seg = _segmented_ns(T, N, Hv, longest_chunks, seg_chunks, sms, seg_build) if seg_chunks > 0 else 0
    wu_ctas = _overlap_wu_ctas(T, N, Hv, sms, NULL)
    overlap = _overlap_ns(T, N, Hv, longest_chunks, wu_ctas, serial) if wu_ctas > 0 else 0
    return int(serial), int(seg), int(overlap)
