# Test and benchmark hooks: forced builds, plans and stages.
# (Included by _ext.pyx: one module, one namespace; the order of the includes is the order of
# definition.)

cdef int _check_rs_build(int rs_build) except -1:
    """The benchmark hooks' forced spine_rs_o build: -1 (the rule) or a code of _RS_BUILDS."""
    if rs_build < -1 or rs_build >= NUM_RS_BUILDS:
        raise _errors.GdnArgumentError(f"rs_build: must be -1 (the rule), 0 (solo), 1 (pair) or 2 (dual), got {rs_build}")
    return 0


def _builds(q, k, v, g, beta, out, state=None, *, cu_seqlens, state_indices=None, str state_layout="kv",
            str spine="auto", int warpgroups=0, int fused=-1, int rs_build=-1):
    """Benchmark hook: the variant names of the launches _launch_stages(..., warpgroups, fused,
    rs_build) makes (what explain() lists for the rules, warpgroups 0, fused -1 and rs_build -1)."""
    cdef gdn_problem_t p
    cdef int spine_code = 0, layout_code = 0, chosen = 0, rc, n, i
    cdef int ids[3]
    cdef char msg[MSG_CAP]
    _codes(spine, state_layout, &spine_code, &layout_code)
    _build(&p, q, k, v, g, beta, out, state, cu_seqlens, state_indices, None, False)
    rc = _validate(&p, layout_code, msg)
    if rc == GDN_OK:
        rc = _choose(&p, spine_code, layout_code, &chosen, msg)
    if rc != GDN_OK:
        _raise(rc, msg)
    _check_rs_build(rs_build)
    n = _select_ids(&p, chosen, layout_code, warpgroups, fused, rs_build, _sm_count(), ids)
    return [gdn_variant_name(ids[i]).decode() if ids[i] >= 0 else None for i in range(n)]


def _launch_stages(stages, q, k, v, g, beta, out, state=None, *, cu_seqlens, state_indices=None,
                   str state_layout="kv", scale=None, bint use_qk_l2norm=False, str spine="auto", workspace,
                   int warpgroups=0, int fused=-1, int64_t overlap_split=-1, int rs_build=-1,
                   checkpoint_every=None, checkpoints=None, initial_state=None, has_initial_state=True):
    """Test hook: validate like prefill(), then launch only the named stages on the current stream.

    `stages` is a subset of ("recompute_wu", "spine", "fwd_o"), run in that order,
    so GPU tests can check each stage's workspace output against the fp64 oracle.  The builds
    are the ones prefill() picks; `warpgroups` 1 or 2 forces the unfused plan's wgmma spine
    build of that regime instead (benchmarks of the warpgroups rule; 0: the rule), `rs_build` 0 / 1
    / 2 the fused plan's solo, pair or dual spine_rs_o build (benchmarks of its rule; -1: the rule) and
    `fused` 0 / 1 the unfused or the fused-output plan (-1: the rule; the fused plan has no fwd_o
    stage and writes no h / vnew).
    With both stages of the fused plan, `overlap_split` 0 runs the serial plan, s > 0 the overlap
    plan split at chunk slot s (wherever the rule's deadlock guard allows it, also below its
    minimum of chunk slots), -1 the rule; the other stage sets run serially.
    """
    cdef gdn_problem_t p
    cdef int spine_code = 0, layout_code = 0, chosen = 0, rc, i, n = 0, nplan, sms
    cdef int64_t split = 0
    cdef int all_ids[3]
    cdef int ids[3]
    cdef char msg[MSG_CAP]
    import torch
    _codes(spine, state_layout, &spine_code, &layout_code)
    if warpgroups < 0 or warpgroups > NUM_SPINE_WG:
        raise _errors.GdnArgumentError(f"warpgroups: must be 0 (the rule), 1 or 2, got {warpgroups}")
    if fused < -1 or fused > 1:
        raise _errors.GdnArgumentError(f"fused: must be -1 (the rule), 0 or 1, got {fused}")
    _check_rs_build(rs_build)
    _build(&p, q, k, v, g, beta, out, state, cu_seqlens, state_indices, scale, use_qk_l2norm, DEVICES_ANY, NULL,
           None, checkpoints, checkpoint_every, initial_state, has_initial_state)
    rc = _prepare(&p, spine_code, layout_code, &chosen, msg)
    if rc == GDN_OK and warpgroups != 0 and chosen != GDN_SPINE_WGMMA:
        raise _errors.GdnArgumentError("warpgroups: only the wgmma spine has builds by warpgroups")
    order = ("recompute_wu", "spine", "fwd_o")
    if rc == GDN_OK:
        sms = _sm_count()
        nplan = _select_ids(&p, chosen, layout_code, warpgroups, fused, rs_build, sms, all_ids)
        rc = _bind_workspace(&p, <void *><uintptr_t>workspace.data_ptr(), workspace.numel(), nplan == 2, msg)
    if rc == GDN_OK:
        # only the requested stages must be compiled in
        if fused == 1 and _fused_guard(&p, chosen, layout_code, sms, msg) != GDN_OK:
            raise _errors.GdnSpineError(f"fused: {msg.decode()}")
        for stage in stages:
            if stage not in order:
                raise _errors.GdnArgumentError(f"stages: {stage!r} is not one of {order}")
        for i in range(3):
            if order[i] in stages:
                if i >= nplan:
                    raise _errors.GdnArgumentError(f"stage {order[i]} is not part of the fused-output plan")
                if all_ids[i] < 0:
                    raise _errors.GdnSpineError(f"stage {order[i]} is not compiled into this build")
                ids[n] = all_ids[i]
                n += 1
        stream_ptr = torch.cuda.current_stream().cuda_stream
        split = 0
        if nplan == 2 and n == 2:
            if overlap_split < 0:
                split = _plan_split(&p, n, sms)
            elif overlap_split > 0:
                # a forced split may ignore the rule's GDN_OVERLAP_MIN_SLOTS (a speed threshold that
                # bench_overlap.py measures) but never its deadlock guard
                if not _overlap_fits(p.cu_seqlens.shape[0] - 1, p.v.shape[1], sms):
                    raise _errors.GdnArgumentError("overlap_split: the spine's CTAs would hold more than half of "
                                                   "the SMs, which the second part of stage 1 needs (deadlock guard)")
                if overlap_split >= p.slot_end:
                    raise _errors.GdnArgumentError(f"overlap_split: must be below the {p.slot_end} chunk slots")
                split = overlap_split
        if split > 0:
            rc = _launch_overlap(&p, ids, split, <cudaStream_t><uintptr_t>stream_ptr, msg)
        else:
            rc = _launch(&p, ids, n, <cudaStream_t><uintptr_t>stream_ptr, msg)
    if rc != GDN_OK:
        _raise(rc, msg)
    return SPINE_NAMES[chosen]
