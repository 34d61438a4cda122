"""The prefill on a Hopper GPU against the fp64 oracle, for every input form of docs/DESIGN.md §2.

Each test draws fresh random inputs, poisons `out` with NaN, runs one spine, and checks
every element: rows of live sequences must be finite and within the bound of the oracle,
rows of padding sequences must be untouched (still NaN).  Bound (bf16 operands, fp32
state): relative Frobenius error <= 1e-2 for o and for the final state.
Errors are recorded for the report (conftest writes them when GDN_TEST_REPORT is set).
"""
from __future__ import annotations

import os

import pytest
import torch

import gdn_prefill
from gdn_prefill import _abi, errors, fla, grids, reference as ref

pytestmark = pytest.mark.gpu

BOUND = 1e-2
SPINES = [s for s in ("scalar", "wgmma")]
REPORT: list[dict] = []


def spine_compiled(spine: str) -> bool:
    return any(v.startswith(f"spine_{spine}_") for v in gdn_prefill.compiled_variants())


# Every plan and build by name: (spine, the stage hook's plan arguments, or None for prefill()
# itself).  "wgmma-4k": the wgmma spine in the unfused plan (spine, then fwd_o) even where
# prefill() would fuse the output into the spine.
PLANS = {
    "scalar": ("scalar", None),
    "wgmma": ("wgmma", None),
    "wgmma-4k": ("wgmma", dict(stages=("recompute_wu", "spine", "fwd_o"), fused=0)),
    "rs-solo": ("wgmma", dict(stages=("recompute_wu", "spine"), fused=1, overlap_wu_ctas=0, rs_build=0)),
    "rs-pair": ("wgmma", dict(stages=("recompute_wu", "spine"), fused=1, overlap_wu_ctas=0, rs_build=1)),
    "rs-dual": ("wgmma", dict(stages=("recompute_wu", "spine"), fused=1, overlap_wu_ctas=0, rs_build=2)),
    "rs-overlap": ("wgmma", dict(stages=("recompute_wu", "spine"), fused=1, overlap_wu_ctas=4)),
    # the segmented plan with segments of 6 chunks (a multiple of every checkpoint interval the
    # tests use: 1, 2 and 3 chunks)
    "rs-seg6": ("wgmma", dict(stages=("recompute_wu", "maps", "compose", "spine"), seg_chunks=6)),
    # the same with the SEGMENT pass's dual build (a CTA per segment and head; forced only)
    "rs-seg6-dual": ("wgmma", dict(stages=("recompute_wu", "maps", "compose", "spine"), seg_chunks=6, rs_build=2)),
    # the single plan: cute_kernels/single.py, stage 1 and the spine in one launch
    "single": ("wgmma", dict(stages=("single",), fused=2)),
}
# the segmented plan with 1 and 3 chunks per segment: short test sequences in many segments, the
# composition's longest walks (test_form_against_oracle, test_initial_state_apart_and_zero_start;
# not in PLANS: the checkpoint tests need segments of a multiple of their interval)
SEG_PLANS = {f"rs-seg{n}": ("wgmma", dict(stages=("recompute_wu", "maps", "compose", "spine"), seg_chunks=n))
             for n in (1, 3)}
# segments of 48 chunks: a long prompt's segments, whose MAPS walk back over more than one round of
# 32 chunks (test_segmented_plan_cut_maps_against_oracle)
LONG_SEG_PLANS = {"rs-seg48": ("wgmma", dict(stages=("recompute_wu", "maps", "compose", "spine"), seg_chunks=48))}
ALL_PLANS = {**PLANS, **SEG_PLANS, **LONG_SEG_PLANS}     # every plan by name (_run_plan, plan_built)


def plan_built(plan_name: str) -> bool:
    """The plan's kernels are in this build (the single plan's kernel is a build of its own)."""
    if plan_name == "single":
        return any(v.startswith("single_prefill_") for v in gdn_prefill.compiled_variants())
    return spine_compiled(ALL_PLANS[plan_name][0].split("-")[0])


def _run_plan(plan_name, inp, state, **extra):
    """One call of plan `plan_name` (PLANS) on inp's tensors with `state` and extra prefill()
    arguments; returns out (poisoned with NaN before the call)."""
    from gdn_prefill import _ext
    spine, hook = ALL_PLANS[plan_name]
    T, N, Hv = inp["q"].shape[0], inp["cu_seqlens"].numel() - 1, inp["v"].shape[1]
    out = torch.full_like(inp["v"], float("nan"))
    args = (inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], out, state)
    kw = dict(cu_seqlens=inp["cu_seqlens"], state_indices=inp["state_indices"], state_layout=inp["state_layout"],
              spine=spine, **extra)
    if hook is None:
        ran = gdn_prefill.prefill(*args, **kw)
    else:
        h = dict(hook)
        nbytes = gdn_prefill.workspace_bytes(T, N, Hv)
        if "seg_chunks" in h:
            nbytes = max(nbytes, _ext._segmented_workspace_bytes(T, N, Hv, h["seg_chunks"]))
        ws = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
        ran = _ext._launch_stages(h.pop("stages"), *args, workspace=ws, **kw, **h)
    assert ran == spine
    torch.cuda.synchronize()
    return out


def run_ours(inp, *, spine, use_qk_l2norm=False, scale=None):
    """Plan `spine` (PLANS: "scalar", "wgmma", "wgmma-4k", ...) on a private copy of the state;
    returns (out, state), out poisoned with NaN before the call."""
    state = None if inp["state"] is None else inp["state"].clone()
    return _run_plan(spine, inp, state, scale=scale, use_qk_l2norm=use_qk_l2norm), state


def oracle(inp, *, use_qk_l2norm=False, scale=None):
    with torch.device("cuda"):
        return ref.chunked(inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], cu_seqlens=inp["cu_seqlens"],
                           state=inp["state"], state_indices=inp["state_indices"],
                           state_layout=inp["state_layout"], scale=scale, use_qk_l2norm=use_qk_l2norm)


def check(name, inp, spine, *, use_qk_l2norm=False, scale=None, bound=BOUND):
    out, state = run_ours(inp, spine=spine, use_qk_l2norm=use_qk_l2norm, scale=scale)
    o_ref, s_ref = oracle(inp, use_qk_l2norm=use_qk_l2norm, scale=scale)
    o = out.double()
    live = ~o_ref.isnan()
    # every element of a live row written and finite; every padding row untouched (NaN)
    assert torch.isfinite(o[live]).all(), f"{name}: non-finite or unwritten output in live rows"
    assert o[~live].isnan().all(), f"{name}: rows of padding sequences were written"
    e_o = ref.rel_err(o, o_ref)
    e_s = None
    if inp["state"] is not None:
        e_s = ref.rel_err(state.double(), s_ref.to(state.device))
        # slots no live sequence uses must come back bit-identical
        if inp["state_indices"] is not None:
            used = set(int(i) for i in inp["state_indices"].tolist() if i >= 0)
            for slot in range(state.shape[0]):
                if slot not in used:
                    assert torch.equal(state[slot], inp["state"][slot]), f"{name}: unused slot {slot} changed"
    REPORT.append(dict(case=name, spine=spine, T=int(inp["q"].shape[0]), err_o=e_o, err_state=e_s))
    assert e_o <= bound, f"{name}/{spine}: o rel err {e_o:.3e} > {bound}"
    if e_s is not None:
        assert e_s <= bound, f"{name}/{spine}: state rel err {e_s:.3e} > {bound}"
    return out, state


def spine_params(four_kernel=False, fused=False):
    """The spines; four_kernel: also "wgmma-4k", the wgmma spine with the output not fused, the
    segmented plan at 1 and 3 chunks per segment ("rs-seg1", "rs-seg3") and the single plan
    ("single"); fused: the single plan too."""
    names = SPINES + (["wgmma-4k", "rs-seg1", "rs-seg3"] if four_kernel else []) + \
        (["single"] if four_kernel or fused else [])
    return [pytest.param(s, marks=pytest.mark.skipif(not plan_built(s), reason=f"{s} not built")) for s in names]


# 24 sequences of mixed length (empty, 1 token, chunk edges, several chunks)
MANY_SEQS = [1, 63, 64, 65, 200, 0, 7, 128, 129, 300, 33, 64, 1, 500, 90, 17, 256, 3, 640, 70, 0, 191, 5, 1000]

FORMS = {
    # name: (T_list, Hk, Hv, make_inputs kwargs, prefill kwargs)
    "gva1_single": ([300], 4, 4, dict(l2norm_inputs=True), {}),
    "gva2_dense_kv": ([130, 64], 2, 4, dict(l2norm_inputs=True, state="dense"), {}),
    "gva4_dense_vk": ([65, 200], 1, 4, dict(l2norm_inputs=True, state="dense", state_layout="vk"), {}),
    "varlen_mix": ([1, 63, 64, 65, 1000, 8192, 0], 2, 4, dict(l2norm_inputs=True, state="dense"), {}),
    "pool_pad_kv": ([70, 1, 129, 64, 5], 2, 4, dict(l2norm_inputs=True, state="pool", pad_every=2), {}),
    "pool_pad_vk": ([70, 1, 129, 64, 5], 2, 4,
                    dict(l2norm_inputs=True, state="pool", pad_every=3, state_layout="vk"), {}),
    "packed_strided": ([100, 156], 2, 4, dict(l2norm_inputs=True, packed=True, state="dense"), {}),
    "l2norm_in_kernel": ([129, 64], 2, 4, dict(state="dense"), dict(use_qk_l2norm=True)),
    "custom_scale": ([77], 2, 2, dict(l2norm_inputs=True, state="dense"), dict(scale=0.3)),
    "beta_bf16": ([150], 2, 4, dict(l2norm_inputs=True, beta_dtype=torch.bfloat16, state="dense"), {}),
    "no_state_many_seqs": ([3, 64, 17, 128, 1, 90, 33, 64], 2, 4, dict(l2norm_inputs=True), {}),
    # the chunk-slot search (slots.chunk_of_slot) at its edges: 32 sequences (one round; the last
    # candidate's end is lane 32's, which does not exist), 33 (two rounds) and 1100 (three)
    "search_32_seqs": ([(37 * i) % 150 for i in range(32)], 1, 2, dict(l2norm_inputs=True, state="dense"), {}),
    "search_33_seqs": ([(53 * i) % 140 + 1 for i in range(33)], 1, 2, dict(l2norm_inputs=True), {}),
    "search_1100_seqs": ([(7 * i) % 5 for i in range(1100)], 1, 2, dict(l2norm_inputs=True, state="dense"), {}),
    # many sequences x heads: N * Hv * 4 = 1536 > 2 * 132 CTAs, so spine="wgmma" runs the
    # 2-warpgroup build (spine_wgmma_wg2_*); every other form above runs the 1-warpgroup build
    "many_seqs_wg2_dense_kv": (MANY_SEQS, 4, 16, dict(l2norm_inputs=True, state="dense"), {}),
    "many_seqs_wg2_pool_vk": (MANY_SEQS, 4, 16,
                              dict(l2norm_inputs=True, state="pool", pad_every=5, state_layout="vk"), {}),
}
WG2_FORMS = [f for f in FORMS if f.startswith("many_seqs_wg2")]


@pytest.mark.parametrize("spine", spine_params(four_kernel=True))
@pytest.mark.parametrize("form", list(FORMS))
def test_form_against_oracle(form, spine):
    T_list, Hk, Hv, mk, kw = FORMS[form]
    seed = int.from_bytes(os.urandom(4), "little")  # fresh inputs every run
    inp = ref.make_inputs(T_list, Hk, Hv, seed=seed, device="cuda", **mk)
    check(f"{form}(seed={seed})", inp, spine, **kw)


def spine_build(inp, spine):
    """The spine variant prefill(spine=...) runs for these inputs (explain's choice)."""
    plan = gdn_prefill.explain(inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], torch.empty_like(inp["v"]),
                               inp["state"], cu_seqlens=inp["cu_seqlens"], state_indices=inp["state_indices"],
                               state_layout=inp["state_layout"], spine=spine)
    return plan["kernels"][1]["name"]


def four_kernel_spine_build(inp):
    """The wgmma spine build the unfused plan ("wgmma-4k") runs for these inputs."""
    from gdn_prefill import _ext
    return _ext._builds(inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], torch.empty_like(inp["v"]),
                        inp["state"], cu_seqlens=inp["cu_seqlens"], state_indices=inp["state_indices"],
                        state_layout=inp["state_layout"], spine="wgmma", fused=0)[1]


@pytest.mark.parametrize("form", WG2_FORMS)
def test_wg2_forms_run_the_two_warpgroup_build(form):
    """The many-sequence forms really exercise spine_wgmma_wg2_* in the unfused plan (the
    "wgmma-4k" rows) and the small ones WG=1; prefill() runs the fused plan's spine_rs_o for both
    (the build _ext._spine_rs_build names)."""
    from gdn_prefill import _ext
    if not spine_compiled("wgmma"):
        pytest.skip("wgmma spine not built")
    T_list, Hk, Hv, mk, _ = FORMS[form]
    inp = ref.make_inputs(T_list, Hk, Hv, seed=0, device="cuda", **mk)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    build = _ext._spine_rs_build(sum(T_list), len(T_list), Hv, sms)
    assert spine_build(inp, "wgmma") == f"spine_rs_o_{'' if build == 'solo' else build + '_'}{inp['state_layout']}"
    assert four_kernel_spine_build(inp) == f"spine_wgmma_wg2_{inp['state_layout']}"
    T_list, Hk, Hv, mk, _ = FORMS["varlen_mix"]
    small = ref.make_inputs(T_list, Hk, Hv, seed=0, device="cuda", **mk)
    # 7 sequences, 4 heads: the overlap plan runs the pair build (the serial plan's would be solo)
    assert _ext._spine_rs_build(sum(T_list), len(T_list), Hv, sms) == "pair"
    assert _ext._spine_rs_build(sum(T_list), len(T_list), Hv, sms, overlap=False) == "solo"
    assert spine_build(small, "wgmma") == "spine_rs_o_pair_kv"
    assert four_kernel_spine_build(small) == "spine_wgmma_kv"


def _odd_strides(inp, names=("q", "k", "v")):
    """Tensors re-laid with token strides that are not multiples of 8 elements (2-byte aligned only)."""
    for name in names:
        x = inp[name]
        T, H, D = x.shape
        buf = torch.empty(T * (H * D + 3), dtype=x.dtype, device=x.device)
        view = buf.view(T, H * D + 3)[:, :H * D].view(T, H, D)
        view.copy_(x)
        inp[name] = view
    return inp


@pytest.mark.parametrize("odd", [("q", "k", "v"), ("q", "v")], ids=["qkv", "qv"])
def test_unaligned_strides(odd):
    """Token strides off the 16-byte grid take the any-stride stage builds; with k odd too,
    'auto' must pick the scalar spine (TMA cannot read k) and say why."""
    inp = _odd_strides(ref.make_inputs([100, 37, 1], 2, 4, seed=int.from_bytes(os.urandom(4), "little"),
                                       device="cuda", state="dense", l2norm_inputs=True), odd)
    plan = gdn_prefill.explain(inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], torch.empty_like(inp["v"]),
                               inp["state"], cu_seqlens=inp["cu_seqlens"])
    assert not plan["kernels"][0]["name"].endswith("_a16") and not plan["kernels"][2]["name"].endswith("_a16")
    if "k" in odd:
        assert plan["chosen"] == "scalar" and "not a multiple of 8" in plan["spines"]["wgmma"]
    check(f"odd_strides_{''.join(odd)}", inp, plan["chosen"])


def stage_params():
    """(spine, warpgroups, fused): the scalar spine, and each wgmma build forced on the same
    problem, in the unfused plan and with the output fused into the spine."""
    out = []
    for spine, wg, fused in (("scalar", 0, 0), ("wgmma", 1, 0), ("wgmma", 2, 0), ("wgmma", 0, 1)):
        built = spine_compiled(spine) and (wg != 2 or "spine_wgmma_wg2_kv" in gdn_prefill.compiled_variants())
        built = built and (not fused or "spine_rs_o_kv" in gdn_prefill.compiled_variants())
        name = (f"{spine}-wg{wg}" if wg else spine) + ("-fused" if fused else "")
        out.append(pytest.param(spine, wg, fused, id=name,
                                marks=pytest.mark.skipif(not built, reason=f"{name} not built")))
    return out


@pytest.mark.parametrize("spine, warpgroups, fused", stage_params())
def test_stages_against_oracle_intermediates(spine, warpgroups, fused):
    """recompute_wu, the spine and fwd_o each checked on their own outputs
    (the wgmma spine in both builds: `warpgroups` forces one through the test hook).  The
    fused plan has no fwd_o and writes no w, u, vnew, h: its recompute_wu's in-chunk attention
    (pqk) and Tu = (I + A)^-1 (tu) are checked instead, and o and the state as for the
    others."""
    inp = ref.make_inputs([1, 65, 130, 64], 2, 4, seed=int.from_bytes(os.urandom(4), "little"), device="cuda",
                          state="pool", pad_every=0, l2norm_inputs=False)
    T, N, Hv = inp["q"].shape[0], 4, 4
    ws = torch.full((gdn_prefill.workspace_bytes(T, N, Hv),), 0xFF, dtype=torch.uint8, device="cuda")
    layout = gdn_prefill.workspace_layout(T, N, Hv, fused=bool(fused))
    dt = {"int32": torch.int32, "float32": torch.float32, "bfloat16": torch.bfloat16}

    def view(name):
        off, shape, dtype = layout[name]
        n = 1
        for s in shape:
            n *= s
        return ws[off:off + n * dt[dtype].itemsize].view(dt[dtype]).view(shape)

    out = torch.full((T, Hv, 128), float("nan"), dtype=torch.bfloat16, device="cuda")
    state = inp["state"].clone()
    from gdn_prefill import _ext
    stages = ("recompute_wu", "spine") + (() if fused else ("fwd_o",))
    _ext._launch_stages(stages, inp["q"], inp["k"], inp["v"],
                        inp["g"], inp["beta"], out, state, cu_seqlens=inp["cu_seqlens"],
                        state_indices=inp["state_indices"], use_qk_l2norm=True, spine=spine, workspace=ws,
                        warpgroups=warpgroups, fused=fused)
    torch.cuda.synchronize()
    with torch.device("cuda"):
        mid = ref.chunked_intermediates(inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"],
                                        cu_seqlens=inp["cu_seqlens"], state=inp["state"],
                                        state_indices=inp["state_indices"], use_qk_l2norm=True)
    valid = ~mid["h"].isnan().flatten(1).any(1)          # the chunk slots of live chunks (grids.first_slot)
    errs = {}
    checked = ("pqk", "tu") if fused else ("w", "u", "vnew", "h")
    for name, bound in (("gcum", 1e-5), ("rq", 1e-5), ("rk", 1e-5)) + tuple((n, 1e-2) for n in checked):
        mine = view(name).double()
        if name in ("gcum", "rq", "rk"):
            mine = mine.t()                              # stored head-major: (Hv, T)
        want = mid[name]
        if name == "h":
            mine, want = mine[valid], want[valid]
        errs[name] = ref.rel_err(mine, want)
    errs["o"] = ref.rel_err(out.double(), mid["o"])
    errs["state"] = ref.rel_err(state.double(), mid["new_state"])
    REPORT.append(dict(case=(f"stages_wg{warpgroups}" if warpgroups else "stages") + ("_fused" if fused else ""),
                       spine=spine,
                       **{f"err_{k}": v for k, v in errs.items()}))
    bad = {k: v for k, v in errs.items() if not v <= (1e-5 if k in ("gcum", "rq", "rk") else BOUND)}
    assert not bad, f"stage errors over bound: {bad} (all: {errs})"


@pytest.mark.parametrize("many", [False, True], ids=["few_seqs", "many_seqs_wg2"])
@pytest.mark.parametrize("spine", spine_params(fused=True))
def test_deterministic_bitwise(spine, many):
    if many:
        inp = ref.make_inputs(MANY_SEQS, 4, 16, seed=7, device="cuda", state="dense", l2norm_inputs=True)
    else:
        inp = ref.make_inputs([500, 300], 2, 4, seed=7, device="cuda", state="dense", l2norm_inputs=True)
    outs = [run_ours(inp, spine=spine) for _ in range(10)]
    for o, s in outs[1:]:
        assert torch.equal(o.view(torch.int16), outs[0][0].view(torch.int16))
        assert torch.equal(s, outs[0][1])


GRAPH_CASES = {
    "pool_3_seqs": [200, 64, 1],
    # 2 sequences, 52 chunk slots: the overlap plan is captured (stage 1's workers, the spine as their
    # programmatic dependent)
    "overlap_2_seqs": [3000, 200],
}


@pytest.mark.parametrize("case", list(GRAPH_CASES))
@pytest.mark.parametrize("spine", spine_params())
def test_cuda_graph_replay_with_new_values(spine, case):
    """Captured once, replayed on new input values: no host sync anywhere in a call."""
    lens = GRAPH_CASES[case]
    inp = ref.make_inputs(lens, 2, 4, seed=1, device="cuda", state="pool", l2norm_inputs=True)
    T, Hv = inp["v"].shape[0], 4
    out = torch.empty(T, Hv, 128, dtype=torch.bfloat16, device="cuda")
    state = inp["state"].clone()
    ws = torch.empty(gdn_prefill.workspace_bytes(T, len(lens), Hv), dtype=torch.uint8, device="cuda")
    args = (inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], out, state)
    kw = dict(cu_seqlens=inp["cu_seqlens"], state_indices=inp["state_indices"], spine=spine, workspace=ws)
    if case.startswith("overlap") and spine == "wgmma":
        assert gdn_prefill.explain(*args, **kw)["plan"]["name"] == "overlap"
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        gdn_prefill.prefill(*args, **kw)  # warm-up: the modules load outside the capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        gdn_prefill.prefill(*args, **kw)
    for seed in (11, 12):
        new = ref.make_inputs(lens, 2, 4, seed=seed, device="cuda", state="pool", l2norm_inputs=True)
        for name in ("q", "k", "v", "g", "beta", "state_indices"):
            inp[name].copy_(new[name])
        state.copy_(new["state"])
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        o_ref, s_ref = oracle(new)
        assert ref.rel_err(out.double(), o_ref) <= BOUND
        assert ref.rel_err(state.double(), s_ref) <= BOUND


@pytest.mark.parametrize("spine", spine_params())
def test_long_sequence_state_error(spine):
    """T = 65536 in one sequence: the final state's error against the oracle (reported)."""
    inp = ref.make_inputs([65536], 1, 2, seed=int.from_bytes(os.urandom(4), "little"), device="cuda",
                          state="dense", l2norm_inputs=True)
    check("long_T65536", inp, spine)


def test_fla_comparison_when_available():
    """If fla-core is importable: on the same inputs our error is no worse than FLA's."""
    fla = pytest.importorskip("fla.ops.gated_delta_rule")
    inp = ref.make_inputs([4096], 2, 4, seed=int.from_bytes(os.urandom(4), "little"), device="cuda",
                          state="dense", l2norm_inputs=True)
    out, state = run_ours(inp, spine="scalar")
    o_ref, s_ref = oracle(inp)
    o_fla, s_fla = fla.chunk_gated_delta_rule(inp["q"][None], inp["k"][None], inp["v"][None], inp["g"][None],
                                              inp["beta"][None], initial_state=inp["state"].clone(),
                                              output_final_state=True, cu_seqlens=None)
    torch.cuda.synchronize()
    ours = (ref.rel_err(out.double(), o_ref), ref.rel_err(state.double(), s_ref))
    theirs = (ref.rel_err(o_fla[0].double(), o_ref), ref.rel_err(s_fla.double(), s_ref))
    REPORT.append(dict(case="vs_fla_T4096", spine="scalar", err_o=ours[0], err_state=ours[1],
                       fla_err_o=theirs[0], fla_err_state=theirs[1]))
    assert ours[0] <= max(theirs[0] * 1.1, 1e-3) and ours[1] <= max(theirs[1] * 1.1, 1e-3), (ours, theirs)


def test_fla_shaped_api_matches_prefill():
    """chunk_gated_delta_rule([B, T, H, D]) is prefill over the flattened batch."""
    B, T, Hk, Hv = 2, 100, 2, 4
    inp = ref.make_inputs([T] * B, Hk, Hv, seed=3, device="cuda", state="dense", l2norm_inputs=True)
    o, s = gdn_prefill.chunk_gated_delta_rule(
        inp["q"].view(B, T, Hk, 128), inp["k"].view(B, T, Hk, 128), inp["v"].view(B, T, Hv, 128),
        inp["g"].view(B, T, Hv), inp["beta"].view(B, T, Hv), initial_state=inp["state"],
        output_final_state=True)
    o_ref, s_ref = oracle(inp)
    assert o.shape == (B, T, Hv, 128) and s.shape == (B, Hv, 128, 128)
    assert ref.rel_err(o.reshape(B * T, Hv, 128).double(), o_ref) <= BOUND
    assert ref.rel_err(s.double(), s_ref) <= BOUND


@pytest.mark.skipif(not any(v.startswith("spine_rs_o") for v in gdn_prefill.compiled_variants()),
                    reason="the fused-output builds are not compiled in")
def test_each_plan_runs_in_its_own_workspace():
    """A workspace of the fused plan's size (explain()["workspace_bytes"], a fifth of the unfused
    plan's at long T) serves a fused call bit for bit as the larger one does; the unfused plan
    (spine="scalar") refuses it before any launch, naming the workspace, outputs untouched."""
    inp = ref.make_inputs([700, 65, 300], 2, 4, seed=21, device="cuda", state="dense", l2norm_inputs=True)
    T, N, Hv = inp["q"].shape[0], 3, 4
    args = (inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"])
    info = gdn_prefill.explain(*args, torch.empty_like(inp["v"]), inp["state"], cu_seqlens=inp["cu_seqlens"])
    assert info["fused_output"] == "runs"
    small = info["workspace_bytes"]
    assert small == gdn_prefill.workspace_bytes(T, N, Hv, fused=True) < gdn_prefill.workspace_bytes(T, N, Hv)
    results = []
    for nbytes in (small, gdn_prefill.workspace_bytes(T, N, Hv)):
        ws = torch.full((nbytes,), 0xA5, dtype=torch.uint8, device="cuda")
        out, state = torch.empty_like(inp["v"]), inp["state"].clone()
        gdn_prefill.prefill(*args, out, state, cu_seqlens=inp["cu_seqlens"], workspace=ws)
        results.append((out, state))
    torch.cuda.synchronize()
    assert torch.equal(results[0][0].view(torch.int16), results[1][0].view(torch.int16))
    assert torch.equal(results[0][1], results[1][1])
    out, state = torch.zeros_like(inp["v"]), inp["state"].clone()
    with pytest.raises(errors.GdnArgumentError, match="workspace: .* needed by the unfused plan"):
        gdn_prefill.prefill(*args, out, state, cu_seqlens=inp["cu_seqlens"], spine="scalar",
                            workspace=torch.empty(small, dtype=torch.uint8, device="cuda"))
    torch.cuda.synchronize()
    assert not out.any() and torch.equal(state, inp["state"])


_BUILD_FORMS = {
    "pool_pad_vk": FORMS["pool_pad_vk"][:4],
    "varlen_mix": FORMS["varlen_mix"][:4],
    # 42 sequences, even: the dual build runs the longest as every other sequence and its Hv spare
    # blocks exit
    "even_42": ([200] * 38 + [0, 1, 255, 64], 2, 4, dict(l2norm_inputs=True, state="dense")),
    # 130 mixed lengths (stage 1's ranked order, beyond the 32 a warp once ranked), equal ones included
    "mixed_130": ([(37 * i) % 700 for i in range(130)], 2, 4, dict(l2norm_inputs=True, state="dense")),
    # one past the ranked order's cap: the longest first, the rest in index order
    "beyond_order_cap": ([3] * grids.ORDER_MAX_SEQS + [900], 2, 2, dict(l2norm_inputs=True, state="dense")),
    # 41 sequences, one long one last: the dual build runs it one chain per CTA (2 Hv blocks)
    "skewed_41": ([64] * 40 + [3000], 2, 4, dict(l2norm_inputs=True, state="dense")),
}


@pytest.mark.parametrize("T_list, overlap_wu_ctas", [
    ([(53 * i) % 257 for i in range(300)], 0),                     # serial plan, ties and empty sequences
    ([(53 * i) % 257 for i in range(grids.ORDER_MAX_SEQS)], 0),    # exactly the cap
    ([700, 64, 0, 1300, 64, 5, 2100, 130, 700, 1], 3),             # overlap plan (few sequences, Hv = 2)
])
def test_fused_plan_orders_sequences_longest_first(T_list, overlap_wu_ctas):
    """Stage 1's first CTA writes the workspace's `order`: the sequences longest first, equal lengths
    by index (recompute_wu._rank_longest_first), which the register-state spine's grid follows; in the
    overlap plan too (its workers' first worker, before item 0).  Read back after a call."""
    from gdn_prefill import _ext
    Hk, Hv = 1, 2
    inp = ref.make_inputs(T_list, Hk, Hv, seed=5, device="cuda", state="dense", l2norm_inputs=True)
    T, N = inp["q"].shape[0], len(T_list)
    ws = torch.zeros(gdn_prefill.workspace_bytes(T, N, Hv), dtype=torch.uint8, device="cuda")
    out = torch.empty_like(inp["v"])
    _ext._launch_stages(("recompute_wu", "spine"), inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], out,
                        inp["state"].clone(), cu_seqlens=inp["cu_seqlens"], spine="wgmma", workspace=ws, fused=1,
                        overlap_wu_ctas=overlap_wu_ctas)
    torch.cuda.synchronize()
    off, shape, _ = gdn_prefill.workspace_layout(T, N, Hv)["order"]
    got = ws[off:off + 4 * N].view(torch.int32).tolist()
    assert got == sorted(range(N), key=lambda n: (-T_list[n], n))


@pytest.mark.skipif(not all(f"spine_rs_o_{b}kv" in gdn_prefill.compiled_variants() for b in ("", "pair_", "dual_")),
                    reason="the register-state spine's three builds are not compiled in")
@pytest.mark.parametrize("form", list(_BUILD_FORMS))
def test_register_state_spine_builds_agree_bit_for_bit(form):
    """spine_rs_o's solo, pair and dual builds (forced through the stage hook, serial plan) compute
    each 64 state columns the same way in a different place (a CTA, a cluster's CTA, a warpgroup of
    one CTA, the dual build's longest sequence one chain per CTA where it is the critical path):
    the output and the final state are the same bits, partial chunks, empty sequences and padding
    entries of a pool included."""
    from gdn_prefill import _ext
    T_list, Hk, Hv, mk = _BUILD_FORMS[form]
    inp = ref.make_inputs(T_list, Hk, Hv, seed=3, device="cuda", **mk)
    T, N = inp["q"].shape[0], len(T_list)
    ws = torch.empty(gdn_prefill.workspace_bytes(T, N, Hv), dtype=torch.uint8, device="cuda")
    results = []
    for rs_build in (0, 1, 2):
        out, state = torch.full_like(inp["v"], float("nan")), inp["state"].clone()
        _ext._launch_stages(("recompute_wu", "spine"), inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], out,
                            state, cu_seqlens=inp["cu_seqlens"], state_indices=inp["state_indices"],
                            state_layout=inp["state_layout"], spine="wgmma", workspace=ws, fused=1,
                            overlap_wu_ctas=0, rs_build=rs_build)
        results.append((out, state))
    torch.cuda.synchronize()
    for out, state in results[1:]:
        assert torch.equal(out.view(torch.int16), results[0][0].view(torch.int16))
        assert torch.equal(state, results[0][1])
    o_ref, s_ref = oracle(inp)
    assert ref.rel_err(results[2][0].double(), o_ref) <= BOUND
    assert ref.rel_err(results[2][1].double(), s_ref) <= BOUND


@pytest.mark.parametrize("seg_chunks", [1, 3])
@pytest.mark.parametrize("form", ["pool_pad_vk", "varlen_mix", "skewed_41"])
def test_segment_pass_builds_agree_bit_for_bit(form, seg_chunks):
    """The segmented plan's SEGMENT pass, solo (a CTA per 64 columns) and dual (a CTA per segment
    and head, forced): each 64 columns the same chain from the same composed state, so the output
    and the final state are the same bits, partial chunks, empty sequences and a pool's padding
    entries included."""
    from gdn_prefill import _ext
    T_list, Hk, Hv, mk = _BUILD_FORMS[form]
    inp = ref.make_inputs(T_list, Hk, Hv, seed=4, device="cuda", **mk)
    T, N = inp["q"].shape[0], len(T_list)
    ws = torch.empty(_ext._segmented_workspace_bytes(T, N, Hv, seg_chunks), dtype=torch.uint8, device="cuda")
    results = []
    for rs_build in (0, 2):
        out, state = torch.full_like(inp["v"], float("nan")), inp["state"].clone()
        _ext._launch_stages(("recompute_wu", "maps", "compose", "spine"), inp["q"], inp["k"], inp["v"], inp["g"],
                            inp["beta"], out, state, cu_seqlens=inp["cu_seqlens"], state_indices=inp["state_indices"],
                            state_layout=inp["state_layout"], spine="wgmma", workspace=ws, seg_chunks=seg_chunks,
                            rs_build=rs_build)
        torch.cuda.synchronize()
        results.append((out, state))
    (o0, s0), (o2, s2) = results
    assert torch.equal(o2.view(torch.int16), o0.view(torch.int16))
    assert torch.equal(s2, s0)
    o_ref, s_ref = oracle(inp)
    assert ref.rel_err(o2.double(), o_ref) <= BOUND
    assert ref.rel_err(s2.double(), s_ref) <= BOUND


@pytest.mark.parametrize("every", [64, 192])
@pytest.mark.parametrize("layout", ["kv", "vk"])
@pytest.mark.parametrize("plan_name", list(PLANS))
def test_checkpoints_against_oracle(plan_name, layout, every):
    """State checkpoints into pool slots: lengths just below, at and above the boundaries, shorter
    than the interval, empty, a padding entry, -1 table entries (every third) and a spare column;
    each checkpoint slot within the bound of the oracle's prefix state, the outputs and final
    states as without checkpoints (bit for bit), every other slot untouched (the padding entry's
    checkpoint slots included)."""
    if not plan_built(plan_name):
        pytest.skip(f"{plan_name} not built")
    lens = [127, 128, 129, 63, 0, 1000, 200, 385]
    inp = ref.make_inputs(lens, 2, 4, seed=5, device="cuda", l2norm_inputs=True, state="pool", pad_every=7,
                          state_layout=layout, extra_slots=40)
    P = inp["state"].shape[0]
    table = ref.checkpoint_table(inp["cu_seqlens"], inp["state_indices"], P, every, skip_every=3, extra_cols=1,
                                 device="cuda")

    def run(with_ck):
        state = inp["state"].clone()
        extra = dict(checkpoint_every=every, checkpoints=table) if with_ck else {}
        return _run_plan(plan_name, inp, state, **extra), state

    out0, state0 = run(False)
    out, state = run(True)
    assert torch.equal(out.view(torch.int16), out0.view(torch.int16))
    live = [s for s in inp["state_indices"].tolist() if s >= 0]
    for s in live:
        assert torch.equal(state[s], state0[s]), s
    with torch.device("cuda"):
        _, s_ref = ref.chunked(inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], cu_seqlens=inp["cu_seqlens"],
                               state=inp["state"], state_indices=inp["state_indices"], state_layout=layout,
                               checkpoint_every=every, checkpoints=table)
    written = set()
    for n, slot in enumerate(inp["state_indices"].tolist()):
        if slot < 0:
            continue
        for j, c in enumerate(table[n].tolist()):
            if c >= 0 and (j + 1) * every <= lens[n]:
                written.add(c)
                err = ref.rel_err(state[c].double(), s_ref[c].to(state.device))
                assert err <= BOUND, (plan_name, n, j, err)
    assert written, "the case writes no checkpoint"
    for s in range(P):
        if s not in written and s not in live:
            assert torch.equal(state[s], inp["state"][s]), f"slot {s} changed"


@pytest.mark.parametrize("layout", ["kv", "vk"])
@pytest.mark.parametrize("plan_name", list(PLANS) + list(SEG_PLANS))
def test_initial_state_apart_and_zero_start(plan_name, layout):
    """The initial state read from initial_state (state only written, or not bound) gives the
    in-place run's bits; initial_state is never written; has_initial_state=False starts every
    sequence from zero, whatever its slot held; slots no live sequence uses stay as they were; an
    empty sequence's final state is its initial one (zeros from a zero start)."""
    if not plan_built(plan_name):
        pytest.skip(f"{plan_name} not built")
    inp = ref.make_inputs([130, 64, 0, 700, 65], 2, 4, seed=9, device="cuda", l2norm_inputs=True, state="pool",
                          pad_every=4, state_layout=layout)
    live = [s for s in inp["state_indices"].tolist() if s >= 0]
    in_place = inp["state"].clone()
    out0 = _run_plan(plan_name, inp, in_place)
    # read apart: the pool written holds NaN before the call (never read), the initial states elsewhere
    init = inp["state"].clone()
    apart = torch.full_like(inp["state"], float("nan"))
    out1 = _run_plan(plan_name, inp, apart, initial_state=init)
    assert torch.equal(out1.view(torch.int16), out0.view(torch.int16))
    assert torch.equal(init, inp["state"])
    for s in range(apart.shape[0]):
        assert torch.equal(apart[s], in_place[s]) if s in live else apart[s].isnan().all(), s
    # read only: no state bound, the same outputs
    out2 = _run_plan(plan_name, inp, None, initial_state=init)
    assert torch.equal(out2.view(torch.int16), out0.view(torch.int16))
    # zero start: the slots' contents ignored; equal to a run on a zeroed pool in place
    zeroed = inp["state"].clone()
    zeroed[live] = 0.0
    out3 = _run_plan(plan_name, inp, zeroed)
    garbage = inp["state"].clone()
    out4 = _run_plan(plan_name, inp, garbage, has_initial_state=False)
    assert torch.equal(out4.view(torch.int16), out3.view(torch.int16))
    assert torch.equal(garbage, zeroed)


def test_fla_layer_paths_match_prefill_bit_for_bit():
    """chunk_gated_delta_rule's paths against prefill() in place: an initial state read where it is
    (left untouched) with the final state in a new tensor; no initial state (zeros) with and
    without a final state; [B, T] dims that are no view of [B * T] (the layer's torch flatten); a
    second, larger call on the same stream (its cached workspace grown); an initial state the
    kernels cannot read in place (a strided view: the layer's copy)."""
    B, T, Hk, Hv = 2, 300, 2, 4
    inp = ref.make_inputs([T] * B, Hk, Hv, seed=4, device="cuda", state="dense", l2norm_inputs=True)
    q4, k4 = inp["q"].view(B, T, Hk, 128), inp["k"].view(B, T, Hk, 128)
    v4, g3, b3 = inp["v"].view(B, T, Hv, 128), inp["g"].view(B, T, Hv), inp["beta"].view(B, T, Hv)

    def ours(state):
        out, st = torch.empty_like(inp["v"]), None if state is None else state.clone()
        gdn_prefill.prefill(inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], out, st,
                            cu_seqlens=inp["cu_seqlens"])
        return out.view(B, T, Hv, 128), st

    def same(x, y):
        return torch.equal(x.contiguous().view(torch.int32 if x.dtype == torch.float32 else torch.int16),
                           y.contiguous().view(torch.int32 if y.dtype == torch.float32 else torch.int16))

    o_ref, s_ref = ours(inp["state"])
    init = inp["state"].clone()
    o, s = gdn_prefill.chunk_gated_delta_rule(q4, k4, v4, g3, b3, initial_state=init, output_final_state=True)
    assert same(o, o_ref) and same(s, s_ref) and torch.equal(init, inp["state"])
    o, s = gdn_prefill.chunk_gated_delta_rule(q4, k4, v4, g3, b3, initial_state=init)
    assert same(o, o_ref) and s is None
    o0_ref, s0_ref = ours(torch.zeros_like(inp["state"]))
    o, s = gdn_prefill.chunk_gated_delta_rule(q4, k4, v4, g3, b3, output_final_state=True)
    assert same(o, o0_ref) and same(s, s0_ref)
    o, s = gdn_prefill.chunk_gated_delta_rule(q4, k4, v4, g3, b3)
    assert same(o, o0_ref) and s is None
    # [B, T] not mergeable: q as the transpose of a [T, B, ...] buffer
    qt = q4.transpose(0, 1).contiguous().transpose(0, 1)
    o, s = gdn_prefill.chunk_gated_delta_rule(qt, k4, v4, g3, b3, initial_state=init, output_final_state=True)
    assert same(o, o_ref) and same(s, s_ref)
    # an initial state with a strided last dim: read through the layer's contiguous copy
    wide = torch.zeros(B, Hv, 128, 256, device="cuda")
    wide[..., ::2] = init
    o, s = gdn_prefill.chunk_gated_delta_rule(q4, k4, v4, g3, b3, initial_state=wide[..., ::2],
                                              output_final_state=True)
    assert same(o, o_ref) and same(s, s_ref)
    # a larger call on the same stream: the cached workspace grows
    big = ref.make_inputs([4096, 4096], Hk, Hv, seed=5, device="cuda", state="dense", l2norm_inputs=True)
    o, s = gdn_prefill.chunk_gated_delta_rule(
        big["q"].view(2, 4096, Hk, 128), big["k"].view(2, 4096, Hk, 128), big["v"].view(2, 4096, Hv, 128),
        big["g"].view(2, 4096, Hv), big["beta"].view(2, 4096, Hv), initial_state=big["state"], output_final_state=True)
    o_big, s_big = oracle(big)
    assert ref.rel_err(o.reshape(-1, Hv, 128).double(), o_big) <= BOUND
    assert ref.rel_err(s.double(), s_big) <= BOUND
    fla.release_workspaces()


# the pool types besides fp32 (reference.POOL_DTYPES: the kernels' rounding and its bound)
LOW_POOLS = [p for p in ref.POOL_DTYPES if p != "fp32"]


def pool_built(plan_name, pool):
    """The plan's kernels are in this build for pools of type `pool`."""
    sfx = {"bf16": "_sbf16", "fp16": "_sf16", "fp8e4m3": "_sf8e4m3"}[pool]
    return plan_built(plan_name) and f"spine_rs_o_kv{sfx}" in gdn_prefill.compiled_variants()


def _same_pool_bits(x, y):
    return x.dtype == y.dtype and torch.equal(x.contiguous().view(torch.uint8), y.contiguous().view(torch.uint8))


@pytest.mark.parametrize("pool", LOW_POOLS)
@pytest.mark.parametrize("layout", ["kv", "vk"])
@pytest.mark.parametrize("plan_name", list(PLANS))
def test_low_precision_pool_is_the_fp32_run_rounded_once(plan_name, layout, pool):
    """A bf16, fp16 or fp8 e4m3 pool is read once and written rounded once: with initial states
    representable in the pool's type, the outputs equal the fp32 pool's bit for bit, and the final
    states and checkpoints are the fp32 run's rounded to the pool's type (reference.round_to_pool:
    round to nearest even, fp8 saturating), bit for bit; every other slot untouched.  Also read from
    an initial_state pool of the type with the pool only written (the same outputs and states)."""
    if not pool_built(plan_name, pool):
        pytest.skip(f"{plan_name} not built for {pool} pools")
    dt = ref.POOL_DTYPES[pool][0]
    lens = [130, 64, 0, 700, 65, 300]
    inp = ref.make_inputs(lens, 2, 4, seed=8, device="cuda", l2norm_inputs=True, state="pool", pad_every=5,
                          state_layout=layout, extra_slots=16)
    inp["state"] = ref.round_to_pool(inp["state"], dt).float()
    P = inp["state"].shape[0]
    table = ref.checkpoint_table(inp["cu_seqlens"], inp["state_indices"], P, 128, device="cuda")
    ck = dict(checkpoint_every=128, checkpoints=table)
    s32 = inp["state"].clone()
    out32 = _run_plan(plan_name, inp, s32, **ck)
    low = inp["state"].to(dt)
    out_low = _run_plan(plan_name, inp, low, **ck)
    assert torch.equal(out_low.view(torch.int16), out32.view(torch.int16))
    written = [s for s in inp["state_indices"].tolist() if s >= 0] + [c for c in table.flatten().tolist() if c >= 0]
    for s in range(P):
        want = ref.round_to_pool(s32[s], dt) if s in written else inp["state"][s].to(dt)
        assert _same_pool_bits(low[s], want), s
    apart = torch.zeros_like(low)
    out_apart = _run_plan(plan_name, inp, apart, initial_state=inp["state"].to(dt), **ck)
    assert torch.equal(out_apart.view(torch.int16), out32.view(torch.int16))
    for s in range(P):
        assert _same_pool_bits(apart[s], ref.round_to_pool(s32[s], dt) if s in written else torch.zeros_like(low[s])), s


@pytest.mark.parametrize("pool", LOW_POOLS)
@pytest.mark.parametrize("plan_name", list(PLANS))
def test_low_precision_pool_against_oracle(plan_name, pool):
    """Each pool type against the fp64 oracle started from the pool's own values: the outputs
    within BOUND (the state is fp32 inside the kernels, so the pool's type costs the outputs
    nothing), the final states and checkpoints within BOUND plus the most the pool's one rounding
    can move them (reference.pool_rounding_bound: u = 2^-8 bf16, 2^-11 fp16, 2^-4 fp8 e4m3 relative
    per element, half the smallest subnormal spacing below the normal range)."""
    if not pool_built(plan_name, pool):
        pytest.skip(f"{plan_name} not built for {pool} pools")
    dt = ref.POOL_DTYPES[pool][0]
    lens = [1000, 64, 257, 3000]
    inp = ref.make_inputs(lens, 2, 4, seed=21, device="cuda", l2norm_inputs=True, state="pool", extra_slots=8,
                          state_layout="vk")
    inp["state"] = ref.round_to_pool(inp["state"], dt).float()
    P = inp["state"].shape[0]
    table = ref.checkpoint_table(inp["cu_seqlens"], inp["state_indices"], P, 384, device="cuda")
    with torch.device("cuda"):
        o_ref, s_ref = ref.chunked(inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], cu_seqlens=inp["cu_seqlens"],
                                   state=inp["state"], state_indices=inp["state_indices"], state_layout="vk",
                                   checkpoint_every=384, checkpoints=table)
    s32 = inp["state"].clone()
    _run_plan(plan_name, inp, s32, checkpoint_every=384, checkpoints=table)
    low = inp["state"].to(dt)
    out = _run_plan(plan_name, inp, low, checkpoint_every=384, checkpoints=table)
    e_o = ref.rel_err(out.double(), o_ref)
    e_s = ref.rel_err(low.double(), s_ref)
    e_32 = ref.rel_err(s32.double(), s_ref)
    # ||round(x) - ref|| <= ||round(x) - x|| + ||x - ref||, x the fp32 pool's states (round(x) is the
    # pool's: test_low_precision_pool_is_the_fp32_run_rounded_once)
    scale = torch.linalg.vector_norm(s32.double()).item() / torch.linalg.vector_norm(s_ref.double()).item()
    bound_s = e_32 + ref.pool_rounding_bound(s32, dt) * scale
    REPORT.append(dict(case=f"pool {pool}", spine=plan_name, T=int(inp["q"].shape[0]), err_o=e_o, err_state=e_s))
    assert e_o <= BOUND, f"{plan_name}/{pool}: o rel err {e_o:.3e} > {BOUND}"
    assert e_32 <= BOUND, f"{plan_name}: the fp32 pool's state rel err {e_32:.3e} > {BOUND}"
    assert e_s <= bound_s * (1 + 1e-9), f"{plan_name}/{pool}: state rel err {e_s:.3e} > {bound_s:.3e}"
    # the pool type's whole cost: at most u relative (2^-8, 2^-11, 2^-4) on top of the fp32 pool's error,
    # but for the subnormal range's half spacing
    assert e_s <= BOUND + ref.POOL_DTYPES[pool][1] * scale + ref.POOL_DTYPES[pool][2] * s32.numel() ** 0.5 / \
        torch.linalg.vector_norm(s_ref.double()).item(), (e_s, pool)


@pytest.mark.parametrize("plan_name", list(PLANS))
def test_fp8_pool_saturates_at_448(plan_name):
    """A state beyond fp8 e4m3's range is written as +-448 (saturating, never NaN): initial states
    near the top of the range with no decay and large values drive the fp32 pool's final states and
    checkpoints past 448; the fp8 pool's are those clamped to +-448 and rounded, bit for bit."""
    if not pool_built(plan_name, "fp8e4m3"):
        pytest.skip(f"{plan_name} not built for fp8 pools")
    dt = torch.float8_e4m3fn
    lens = [300, 200]
    inp = ref.make_inputs(lens, 2, 4, seed=5, device="cuda", l2norm_inputs=True, state="pool", extra_slots=6)
    inp["g"].zero_()                                           # no decay: the state keeps what it gets
    inp["v"] = (inp["v"].float() * 600.0).to(torch.bfloat16)   # values far beyond 448
    inp["state"] = ref.round_to_pool(torch.sign(inp["state"]) * 416.0, dt).float()
    P = inp["state"].shape[0]
    table = ref.checkpoint_table(inp["cu_seqlens"], inp["state_indices"], P, 128, device="cuda")
    ck = dict(checkpoint_every=128, checkpoints=table)
    s32 = inp["state"].clone()
    out32 = _run_plan(plan_name, inp, s32, **ck)
    assert torch.isfinite(s32).all() and (s32.abs() > 464.0).any()        # beyond e4m3's rounding range
    low = inp["state"].to(dt)
    out8 = _run_plan(plan_name, inp, low, **ck)
    assert torch.equal(out8.view(torch.int16), out32.view(torch.int16))
    assert not low.float().isnan().any() and low.float().abs().max().item() == 448.0
    written = [s for s in inp["state_indices"].tolist() if s >= 0] + [c for c in table.flatten().tolist() if c >= 0]
    for s in range(P):
        want = ref.round_to_pool(s32[s], dt) if s in written else inp["state"][s].to(dt)
        assert _same_pool_bits(low[s], want), s


@pytest.mark.skipif(not plan_built("single"), reason="the single plan's kernel is not built")
def test_prefill_takes_the_single_plan_by_its_rule():
    """prefill() on a batch the single plan's rule takes (max_seqlen given, the longest sequence
    alone no longer than the batch's chunks over this device's SMs: gdn_abi.h GDN_SINGLE_LAT_PCT,
    here the fewest sequences that satisfy it): explain() names the
    plan and its one kernel, the outputs and states are the forced single plan's bit for bit and
    within the oracle's bound, and without max_seqlen the two-launch plan runs, within the bound."""
    from gdn_prefill import _ext
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    hv, L = 8, 128
    pct = _abi.CONSTANTS["GDN_SINGLE_LAT_PCT"]
    n = -(-pct * sms // (100 * hv))               # the rule's edge: n * hv >= pct % of the SMs
    inp = ref.make_inputs([L] * n, 4, hv, seed=11, device="cuda", state="dense", l2norm_inputs=True)
    o_ref, s_ref = oracle(inp)
    args = lambda out, st: (inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], out, st)   # noqa: E731
    kw = dict(cu_seqlens=inp["cu_seqlens"])
    e = gdn_prefill.explain(*args(torch.empty_like(inp["v"]), inp["state"]), max_seqlen=L, **kw)
    assert e["plan"]["name"] == "single" and [k["grid"] for k in e["kernels"]] == [(hv, n, 1)], e["plan"]
    runs = {}
    for name, call in (
            ("rule", lambda o, s: gdn_prefill.prefill(*args(o, s), max_seqlen=L, **kw)),
            ("forced", lambda o, s: _ext._launch_stages(("single",), *args(o, s), spine="wgmma", fused=2,
                                                        workspace=torch.empty(1, dtype=torch.uint8, device="cuda"),
                                                        max_seqlen=L, **kw)),
            ("two-launch", lambda o, s: gdn_prefill.prefill(*args(o, s), **kw))):
        out, st = torch.full_like(inp["v"], float("nan")), inp["state"].clone()
        call(out, st)
        torch.cuda.synchronize()
        assert ref.rel_err(out.double(), o_ref) < BOUND and ref.rel_err(st.double(), s_ref) < BOUND, name
        runs[name] = (out, st)
    assert torch.equal(runs["rule"][0], runs["forced"][0]) and torch.equal(runs["rule"][1], runs["forced"][1])
    assert not torch.equal(runs["rule"][0], runs["two-launch"][0])     # another kernel did run


@pytest.mark.skipif(not plan_built("single"), reason="the single plan's kernel is not built")
@pytest.mark.parametrize("lengths", [
    [0, 3, 64, 64, 65, 130, 200, 333],                  # ascending, ties and an empty sequence: ranked
    [5, 70] * 20 + [400],                               # 41 sequences: ranked, two keys per lane
    [130] * 40,                                         # 40 equal lengths: index order by one vote
    [5, 70] * 32 + [400],                               # 65 sequences, the longest last: index order
    ], ids=["ranked", "ranked-two-keys", "equal-lengths", "beyond-rank-cap"])
def test_single_plan_runs_each_sequence_once_in_any_order(lengths):
    """The single plan's blocks take their sequences longest first (single.py rank_longest_first)
    up to RANK_MAX_SEQS sequences, in index order beyond: either way every live sequence's output
    and pool slot are written once and correctly, padding rows and unused slots stay untouched."""
    assert (len(lengths) <= grids.SINGLE_RANK_MAX_SEQS) == (len(lengths) < 65)
    inp = ref.make_inputs(lengths, 2, 4, seed=23, device="cuda", state="pool", pad_every=5, l2norm_inputs=True)
    check(f"single order {len(lengths)}", inp, "single")


@pytest.mark.parametrize("poison", ["nan", "inf"])
@pytest.mark.parametrize("use_qk_l2norm", [False, True])
@pytest.mark.parametrize("plan_name", [pytest.param(p, marks=pytest.mark.skipif(not plan_built(p), reason="not built"))
                                       for p in [*PLANS, *SEG_PLANS]])
def test_a_sequence_is_isolated_from_its_neighbours_values(plan_name, use_qk_l2norm, poison):
    """A request's output and state do not depend on another request's values in the same call.
    Sequence 0 ends inside a chunk (100 = 64 + 36 tokens), so its last chunk's tiles hold sequence
    1's first 28 rows; sequence 1's q, k, v, g and beta are then made non-finite.  Sequence 0's
    output rows and pool slot must be bit for bit those of the same call with sequence 1 clean
    (a non-finite value times an exact zero is NaN: any product that spans the rows past a
    sequence's end must not carry them)."""
    base = ref.make_inputs([100, 150], 2, 4, seed=29, device="cuda", state="pool", l2norm_inputs=True)
    bad = {k: (v.clone() if torch.is_tensor(v) else v) for k, v in base.items()}
    value = float(poison)
    for name in ("q", "k", "v", "g", "beta"):
        bad[name][100:] = value
    runs = []
    for inp in (base, bad):
        state = inp["state"].clone()
        out = _run_plan(plan_name, inp, state, use_qk_l2norm=use_qk_l2norm)
        runs.append((out[:100].clone(), state[int(inp["state_indices"][0])].clone()))
    (o0, s0), (o1, s1) = runs
    assert torch.isfinite(o0).all() and torch.isfinite(s0).all(), plan_name
    assert torch.equal(o0.view(torch.int16), o1.view(torch.int16)), f"{plan_name}: sequence 0's output changed"
    assert torch.equal(s0.view(torch.int32), s1.view(torch.int32)), f"{plan_name}: sequence 0's state changed"


# per value head, the log-decay of one chunk (64 tokens): the segmented plan's MAPS pass then needs
# the segment's last w chunks (the first w whose sum is below GDN_MAP_CUT_LOG_DECAY):
# w = 1, 2, 32 (the first round's last lane), 33 (the second round's first), 40, and never in a
# segment of 48 chunks (two slow heads and one that does not decay at all)
CUT_CHUNK_DECAY = tuple(grids.MAP_CUT_LOG_DECAY / (w - 0.5) for w in (1, 2, 32, 33, 40, 61)) + (-1e-4 * 64, 0.0)


@pytest.mark.skipif(not plan_built("rs-seg48"), reason="segmented plan not built")
def test_segmented_plan_cut_maps_against_oracle():
    """The segmented plan whose MAPS pass is cut per head (cute_kernels/spine_rs.py, _map_cut): one
    prompt of 150 chunks and 17 tokens in segments of 48 chunks, each value head decaying at its own
    rate (CUT_CHUNK_DECAY), so that the cut falls in the first and the second round of the walk back
    and not at all, in one launch; outputs and final state against the fp64 oracle."""
    inp = ref.make_inputs([150 * 64 + 17], 2, 8, seed=41, device="cuda", state="dense", l2norm_inputs=True)
    rates = torch.tensor(CUT_CHUNK_DECAY, dtype=torch.float32, device="cuda") / 64
    inp["g"] = rates[None, :].expand_as(inp["g"]).contiguous()
    check("cut_maps_per_head", inp, "rs-seg48")
