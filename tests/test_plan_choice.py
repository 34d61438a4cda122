"""The planner (pyx/gdn_prefill/plan.pxi _make_plan) through explain() on meta tensors: which plan
runs, why, with what segments, and that everything it may pick fits the workspace a caller sizes by
workspace_bytes().  No GPU: explain() plans with the H100 / H200 SM count (132)."""
from __future__ import annotations

import pytest
import torch

import gdn_prefill
from gdn_prefill import _abi, _ext, grids
from gdn_prefill.bench import cases as bench_cases


def problem(T, hk, hv, n=1, **kw):
    q = torch.empty(T, hk, 128, dtype=torch.bfloat16, device="meta")
    v = torch.empty(T, hv, 128, dtype=torch.bfloat16, device="meta")
    g = torch.empty(T, hv, device="meta")
    st = torch.empty(n, hv, 128, 128, device="meta")
    cu = torch.empty(n + 1, dtype=torch.int32, device="meta") if n > 1 else None
    return gdn_prefill.explain(q, torch.empty_like(q), v, g, torch.empty_like(g), torch.empty_like(v), st,
                               cu_seqlens=cu, **kw)


@pytest.mark.parametrize("T, hk, hv", [(8192, 2, 4), (32768, 2, 4), (8192, 4, 8), (32768, 4, 8)])
def test_one_long_sequence_at_few_heads_runs_segmented(T, hk, hv):
    """Where the serial plan leaves most SMs idle: the segmented plan, its four launches, its
    segments within the CTA budget, and the model's times (the segmented one the smaller)."""
    e = problem(T, hk, hv)
    p = e["plan"]
    assert p["name"] == "segmented", p
    assert [k["name"] for k in e["kernels"]] == ["recompute_wu_bf16_betaf32_a16_pqk", "spine_rs_maps_kv",
                                                 "compose_f32", "spine_rs_o_seg_kv"]
    chunks = -(-T // 64)
    assert p["longest_chunks"] == chunks and p["segments"] == -(-chunks // p["segment_chunks"]) >= 2
    assert p["ctas"] == grids.grid_spine_rs_segments(T, 1, hv, p["segment_chunks"])[0] <= 264
    assert f"below {grids.MAP_CUT_LOG_DECAY} " in p["maps"]                    # the maps' cut, said
    assert f"less than e^{grids.MAP_CUT_LOG_DECAY} " in p["maps"]               # and what it drops
    assert e["kernels"][1]["grid"][0] == e["kernels"][3]["grid"][0] == p["ctas"]
    assert p["predicted_us"]["segmented"] < min(p["predicted_us"]["serial"], p["predicted_us"].get("overlap", 1e9))
    serial, seg, overlap = _ext._model_ns(T, 1, hv, chunks, p["segment_chunks"])
    assert (round(serial / 1e3, 1), round(seg / 1e3, 1)) == (p["predicted_us"]["serial"], p["predicted_us"]["segmented"])
    assert round(overlap / 1e3, 1) == p["predicted_us"].get("overlap", 0.0)
    # the call's workspace is within what workspace_bytes() promises for any plan of these sizes
    assert e["workspace_bytes"] <= gdn_prefill.workspace_bytes(T, 1, hv)


@pytest.mark.parametrize("T", [1024, 8192, 65536])
def test_many_heads_keep_the_serial_plan(T):
    """At 16/32 every segmented pass needs 4 CTAs per head and segment and stage 1 runs first: the
    model predicts the serial plan faster (or no segmentation fits), and says so; from
    GDN_OVERLAP_MIN_SLOTS chunk slots on the overlap plan, which the segments must beat instead."""
    p = problem(T, 16, 32)["plan"]
    kind = "serial" if T < 2048 else "overlap"
    assert p["name"] == kind, p
    assert f"{kind} plan is predicted faster" in p["why"] or "no segmentation" in p["why"], p
    if "predicted faster" in p["why"]:        # it names the segment length the model priced
        assert "segments of 0 chunks" not in p["why"] and "segments of " in p["why"], p


def test_several_sequences_need_max_seqlen():
    """With several sequences the lengths are device values: without max_seqlen nothing is split,
    and explain() says how to allow it; with it, the planner plans for that longest sequence."""
    e = problem(4 * 8192, 2, 4, n=4)
    assert e["plan"]["name"] == "overlap" and "max_seqlen" in e["plan"]["why"]   # not split: overlapped
    assert e["plan"]["longest_chunks"] is None
    p = problem(4 * 8192, 2, 4, n=4, max_seqlen=4 * 8192 - 3)["plan"]
    assert p["longest_chunks"] == -(-(4 * 8192 - 3) // 64)
    if p["name"] == "segmented":
        assert p["ctas"] <= 264


def test_segments_start_on_checkpoints():
    """With checkpoints every c tokens, every segment length is a multiple of c / 64 chunks."""
    pool = torch.empty(8, 4, 128, 128, device="meta")
    T = 32768
    q = torch.empty(T, 2, 128, dtype=torch.bfloat16, device="meta")
    v = torch.empty(T, 4, 128, dtype=torch.bfloat16, device="meta")
    g = torch.empty(T, 4, device="meta")
    for every in (1024, 3 * 64):
        e = gdn_prefill.explain(q, torch.empty_like(q), v, g, torch.empty_like(g), torch.empty_like(v), pool,
                                state_indices=torch.empty(1, dtype=torch.int32, device="meta"),
                                checkpoint_every=every, checkpoints=torch.empty(1, 40, dtype=torch.int32, device="meta"))
        p = e["plan"]
        assert p["name"] == "segmented" and p["segment_chunks"] % (every // 64) == 0, (every, p)


def test_segment_slots_match_the_kernels_bound():
    """grids.segment_slots bounds every segment of any lengths (the grid of both segmented passes)."""
    import random
    rnd = random.Random(5)
    for _ in range(2000):
        lens = [rnd.choice([0, 1, 64, 65, rnd.randint(0, 5000)]) for _ in range(rnd.randint(1, 5))]
        sc = rnd.randint(1, 40)
        cu = [0]
        for n in lens:
            cu.append(cu[-1] + n)
        T = cu[-1] + rnd.randint(0, 70)
        last = max(grids.first_segment_slot(cu[n], n, sc) + max(-(-(-(-lens[n] // 64)) // sc), 1)
                   for n in range(len(lens)))
        assert last <= grids.segment_slots(T, len(lens), sc)


# the single plan (cute_kernels/single.py; its rule: gdn_abi.h GDN_SINGLE_LAT_PCT, plan.pxi _single_rule)
SINGLE = "single_prefill_betaf32_kv"
LAT_PCT = _abi.CONSTANTS["GDN_SINGLE_LAT_PCT"]
MIX14 = [5000, 3000, 2000, 1500, 1200, 1000, 800, 600, 400, 300, 200, 200, 100, 84]
VARLEN16 = bench_cases.varlen_lengths()          # the benchmarks' varlen16 row, the one measured


def _needs_single():
    if SINGLE not in gdn_prefill.compiled_variants():
        pytest.skip(f"{SINGLE} not in this build")


def _single_runs(T, hv, max_seqlen, sms=132):
    """The rule as docs/PERFORMANCE.md states it: the longest sequence alone, at LAT_PCT % of a
    chunk's cost on a full SM, no longer than the batch's chunk-heads spread over the SMs."""
    return -(-max_seqlen // 64) * sms * LAT_PCT <= -(-T // 64) * hv * 100


@pytest.mark.parametrize("lens, hk, hv", [
    ([2048] * 4, 16, 32), ([512] * 8, 16, 32), ([4096] * 8, 16, 32), ([2048] * 32, 16, 32), ([8192] * 8, 16, 32),
    ([512] * 16, 4, 8), ([1024] * 16, 4, 8), ([512] * 32, 4, 8), ([2048] * 32, 4, 8),
    ([2048, 2048, 2048, 1500, 700, 100], 16, 32), (MIX14, 16, 32), (VARLEN16, 16, 32)])
def test_batches_that_fill_the_sms_run_single(lens, hk, hv):
    """Where the longest sequence alone takes no longer than the batch's work spread over the 132 SMs
    (one length or mixed, max_seqlen given): one launch of the single kernel, its grid (Hv, N), no
    workspace, and the reason named."""
    _needs_single()
    n, T, L = len(lens), sum(lens), max(lens)
    assert _single_runs(T, hv, L)
    e = problem(T, hk, hv, n=n, max_seqlen=L)
    p = e["plan"]
    assert p["name"] == "single" and p["single"] == "runs", p
    assert [(k["name"], k["grid"]) for k in e["kernels"]] == [(SINGLE, grids.grid_single(T, n, hv))]
    assert grids.grid_single(T, n, hv) == (hv, n, 1)
    assert e["workspace_bytes"] == 0 and e["overlap"] == "the single plan runs instead"
    assert f"({-(-L // 64)} chunks, max_seqlen)" in p["why"] and f"{-(-T // 64) * hv} chunk-heads" in p["why"], p
    # the same batch without max_seqlen: the serial plan, and why
    p = problem(T, hk, hv, n=n)["plan"]
    assert p["name"] != "single" and "max_seqlen is not given" in p["single"], p


@pytest.mark.parametrize("lens, hv, sms, runs", [
    ([8192], 32, 132, False),                       # one sequence: 2x slower than the serial plan
    ([4096] * 2, 32, 132, False),                   # half a wave: 1.4x slower
    ([2048] * 8, 8, 132, False),                    # 64 CTAs: 1.4x slower
    ([1024] * 4, 32, 132, True),                    # 128 CTAs: 0.84x
    ([8192, 1024, 1024, 512, 512, 256, 256, 128, 128, 64], 32, 132, False),   # a long tail: 1.7x slower
    ([2048, 2048, 2048, 1500, 700, 100], 16, 132, False),                     # 96 CTAs: 1.1x slower
    ([2048] * 4, 32, 114, True),                    # an H100 PCIe: 128 CTAs on 114 SMs
    ([2048] * 4, 32, 190, False),                   # 128 CTAs on 190 SMs
    (MIX14, 32, 132, True),                         # 0.80x (engine style), 0.73x pre-normed
    (VARLEN16, 32, 132, True),                      # 0.70x, 0.64x
    (MIX14, 16, 132, False),                        # the same mix at 8/16: 1.13x slower
    ([2048], 128, 132, True),                       # one sequence of 128 heads fills the SMs
    ([2048], 64, 132, False),
])
def test_single_rule_bounds(lens, hv, sms, runs):
    """The rule itself (_ext._single_plan_rule, the C rule prefill() applies) on the measured rows
    (graph mode, single against the serial plan) and at its edge, on devices of other SM counts."""
    n, T, L = len(lens), sum(lens), max(lens)
    assert _single_runs(T, hv, L, sms) == runs
    got = _ext._single_plan_rule(T, n, hv, L, sms)
    assert (got is None) == runs, got
    if not runs:
        assert f"its longest sequence ({-(-L // 64)} chunks)" in got and f"the {sms} SMs" in got, got
    assert "max_seqlen is not given" in _ext._single_plan_rule(T, n, hv, 0, sms)
    # the edge: one chunk per CTA, the fewest CTAs that fill LAT_PCT % of the SMs
    edge = -(-LAT_PCT * sms // 100)
    assert _ext._single_plan_rule(edge * 64, edge, 1, 64, sms) is None
    assert _ext._single_plan_rule((edge - 1) * 64, edge - 1, 1, 64, sms) is not None


def test_single_plan_stays_within_the_other_plans():
    """Where the fused plans do not run (misaligned q: the unfused plan), neither does the single
    plan, and explain() says so; the state pools of every type and both layouts have builds; the
    workspace any plan needs is within workspace_bytes()."""
    _needs_single()
    n, L, hk, hv = 4, 2048, 16, 32
    T = n * L
    base = torch.empty(T * hk * 128 + 1, dtype=torch.bfloat16, device="meta")
    q = base[1:].view(T, hk, 128)
    v = torch.empty(T, hv, 128, dtype=torch.bfloat16, device="meta")
    g = torch.empty(T, hv, device="meta")
    cu = torch.empty(n + 1, dtype=torch.int32, device="meta")
    st = torch.empty(n, hv, 128, 128, device="meta")
    e = gdn_prefill.explain(q, torch.empty_like(q), v, g, torch.empty_like(g), torch.empty_like(v), st,
                            cu_seqlens=cu, max_seqlen=L)
    assert e["plan"]["name"] != "single" and "fused plan" in e["plan"]["single"], e["plan"]
    for layout in ("kv", "vk"):
        for sdt in (torch.float32, torch.bfloat16, torch.float16, torch.float8_e4m3fn):
            e = problem(T, hk, hv, n=n, max_seqlen=L, state_layout=layout) if sdt == torch.float32 else \
                gdn_prefill.explain(torch.empty(T, hk, 128, dtype=torch.bfloat16, device="meta"),
                                    torch.empty(T, hk, 128, dtype=torch.bfloat16, device="meta"), v, g,
                                    torch.empty(T, hv, dtype=torch.bfloat16, device="meta"), torch.empty_like(v),
                                    torch.empty(n, hv, 128, 128, dtype=sdt, device="meta"), cu_seqlens=cu,
                                    max_seqlen=L, state_layout=layout)
            want = f"single_prefill_beta{'f32' if sdt == torch.float32 else 'bf16'}_{layout}" + \
                {torch.float32: "", torch.bfloat16: "_sbf16", torch.float16: "_sf16", torch.float8_e4m3fn: "_sf8e4m3"}[sdt]
            assert [k["name"] for k in e["kernels"]] == [want], e["kernels"]
            assert e["workspace_bytes"] == 0 <= gdn_prefill.workspace_bytes(T, n, hv)


def test_single_plan_takes_an_empty_workspace():
    """The single plan needs no workspace: explain()'s workspace_bytes is 0, and a workspace of
    that size (empty) is accepted where the two-launch plan of the same tensors rejects it with
    the sizes named."""
    _needs_single()
    n, L, hk, hv = 4, 2048, 16, 32
    empty = torch.empty(0, dtype=torch.uint8, device="meta")
    e = problem(n * L, hk, hv, n=n, max_seqlen=L, workspace=empty)
    assert e["plan"]["name"] == "single" and e["workspace_bytes"] == 0
    with pytest.raises(gdn_prefill.GdnArgumentError, match="workspace: 0 bytes given"):
        problem(n * L, hk, hv, n=n, workspace=empty)


# The Qwen3.5 family's head counts (value-to-key ratios 4, 3 and 1), engine style on an H100
# (benchmarks/results/2026-12-06/batch_invariant_h100.md; the overlap plan's rows:
# benchmarks/results/2026-12-07/overlap_default_h100.md; 1x32768 at 8/24, where the overlap plan
# beat the segmented one on an H200 before the map cut, 718 against 779 us: final_h200.md there): the
# plan the rules pick, and the serial plan's time over the picked plan's.  On these rows the plan they
# pick was the faster wherever it is not the serial plan itself, but for 8/24 at 1x32768 since the cut
# (on an H100 the segments won on every draw, maps_cut_h100.md; the H200's own rows are owed).
QWEN35 = [
    ("16x512", 16, 64, "single", 1.36), ("8x4K", 16, 64, "single", 1.29), ("varlen16", 16, 64, "single", 1.29),
    ("1x32768", 16, 64, "serial", None), ("16x512", 16, 48, "single", 1.34), ("1x32768", 16, 48, "serial", None),
    ("16x512", 8, 32, "single", 1.32), ("1x32768", 8, 32, "overlap", 1.16),
    ("8x4K", 8, 24, "single", 1.14), ("1x8K", 8, 24, "overlap", 1.05), ("1x32768", 8, 24, "overlap", 1.09),
    ("16x512", 4, 16, "single", 1.33), ("8x4K", 4, 16, "single", 1.34),
    ("1x8K", 4, 16, "segmented", 1.24), ("1x32768", 4, 16, "segmented", 1.42),
    ("16x512", 2, 8, "single", 1.32), ("8x4K", 2, 8, "serial", None), ("varlen16", 2, 8, "serial", None),
    ("1x32768", 2, 8, "segmented", 2.36),
    ("8x4K", 16, 16, "single", 1.61), ("1x8K", 16, 16, "segmented", 1.17), ("1x32768", 16, 16, "segmented", 1.32),
]


@pytest.mark.parametrize("shape, hk, hv, want, serial_over_picked", QWEN35)
def test_qwen35_rows_pick_the_measured_faster_plan(shape, hk, hv, want, serial_over_picked):
    if want == "single":
        _needs_single()
    lens = bench_cases.parse_shape(shape)
    e = problem(sum(lens), hk, hv, n=len(lens), max_seqlen=max(lens), use_qk_l2norm=True)
    assert e["plan"]["name"] == want, e["plan"]
    assert (serial_over_picked is None) == (want == "serial")
    assert serial_over_picked is None or serial_over_picked >= 1.0


def test_segments_must_beat_the_overlap_plan():
    """Where the overlap rule applies the segmented plan must beat the overlap plan's prediction, not
    the serial one's: one 32K prompt at 8/24 (measured on an H200 before the map cut: overlap 718 us,
    the segmented plan 779, serial 781; benchmarks/results/2026-12-07/final_h200.md) runs the overlap
    plan, which the model prices as the chain slowed beside the workers, never above the serial plan.
    The model prices every map whole (the cut depends on the gates): 728 against the overlap plan's
    720 here, where an H100 since the cut measured 575 / 726 / 739 us (fast / mixed / slow gates)
    against 755-762 (maps_cut_h100.md).  The rule stands until the H200 measures it."""
    p = problem(32768, 8, 24)["plan"]
    us = p["predicted_us"]
    assert p["name"] == "overlap" and us["overlap"] < us["segmented"] < us["serial"], p
    assert "overlap plan is predicted faster" in p["why"], p
    c = _abi.CONSTANTS
    for T, hv in ((32768, 24), (8192, 32), (2048, 16), (65536, 32)):
        chunks = -(-T // 64)
        serial, _, overlap = _ext._model_ns(T, 1, hv, chunks, 0)
        wu = _ext._overlap_rule(T, 1, hv, c["GDN_SM_COUNT"])
        chain = chunks * c["GDN_MODEL_CHAIN_NS"] * c["GDN_MODEL_OVERLAP_CHAIN_PCT"] // 100
        stage1 = (chunks + 1) * hv * c["GDN_MODEL_WU_SM_NS"] // wu
        assert overlap == min(max(chain, stage1) + c["GDN_MODEL_OVERLAP_NS"], serial), (T, hv)
    # at 4/16 the segmented plan stays (measured 493 us against the overlap plan's 705)
    assert problem(32768, 4, 16)["plan"]["name"] == "segmented"


def test_segmented_model_counts_the_maps_that_work():
    """One sequence in nseg segments: the MAPS pass's CTAs that work are 2 nseg - 3 per head (segment
    0 has no A; the last segment's two return at once), so 8/24 in 4 segments is one wave of 120
    CTAs on 132 SMs, not two of 168 (measured on slow gates, no map cut: 738.9 us;
    benchmarks/results/2026-12-07/maps_cut_h100.md).  The model's formula, restated."""
    c = _abi.CONSTANTS
    sms = c["GDN_SM_COUNT"]
    for T, hv, nseg in ((32768, 24, 4), (32768, 16, 4), (65536, 32, 8), (8192, 8, 2)):
        chunks = -(-T // 64)
        sc = chunks // nseg
        serial, seg, _ = _ext._model_ns(T, 1, hv, chunks, sc, sms)
        stage1 = c["GDN_MODEL_LAUNCH_NS"] + (chunks + 1) * hv * c["GDN_MODEL_WU_SM_NS"] // sms
        maps = -(-(2 * nseg - 3) * hv // sms) * sc * c["GDN_MODEL_MAPS_NS"]
        segs = -(-2 * nseg * hv // sms) * sc * c["GDN_MODEL_SEG_CHAIN_NS"]
        assert seg == (stage1 + 2 * c["GDN_MODEL_PASS_NS"] + maps + max(nseg - 2, 0) * c["GDN_MODEL_COMPOSE_NS"]
                       + segs), (T, hv, nseg)
        # the dual SEGMENT build (forced only): one CTA per segment and head, a wave of them a chunk in
        # the serial plan's dual wave time
        _, dual, _ = _ext._model_ns(T, 1, hv, chunks, sc, sms, 2)
        segs_dual = -(-nseg * hv // sms) * sc * c["GDN_RS_DUAL_WAVE_NS"]
        assert dual == seg - segs + segs_dual, (T, hv, nseg)
    with pytest.raises(gdn_prefill.GdnArgumentError, match="seg_build: must be 0"):
        _ext._model_ns(32768, 1, 16, 512, 128, sms, 1)
