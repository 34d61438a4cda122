"""The unfused plan's wgmma spine builds (1 or 2 warpgroups per CTA), the rule that picks one
per call, and the fused plan's spine builds and theirs.

Four-kernel plan (here: `out` rows off the 16-byte grid): WG=1 (spine_wgmma_<layout>) while the
1-warpgroup grid N * Hv * 4 has at most GDN_WGMMA_WG1_MAX_CTAS (132) CTAs, WG=2
(spine_wgmma_wg2_<layout>) above; `spine="wgmma"` means either build.  Fused plan (every tensor
16-byte aligned): spine_rs_o, its pair build (spine_rs_o_pair_<layout>, N * Hv clusters of a head's
2 CTAs of 192 threads) wherever the overlap plan runs, else the solo build (spine_rs_o_<layout>,
N * Hv * 2 CTAs) or the dual build (spine_rs_o_dual_<layout>, (N + 1) * Hv CTAs of 384 threads),
whichever the wave model of gdn_abi.h (GDN_RS_SOLO_WAVE_NS, GDN_RS_DUAL_WAVE_NS) finds cheaper.
CPU only: explain() runs the launcher's own choice without launching (on 132 SMs).
"""
from __future__ import annotations

import pytest
import torch

import gdn_prefill
from gdn_prefill import _abi, _ext, grids

D = 128


def problem(n_seq, Hk, Hv, seq_len=64, state=True, fused=False):
    """Empty CPU tensors for n_seq sequences of seq_len tokens (explain reads no values); unless
    fused, `out` starts 2 bytes past a 16-byte boundary, so the unfused plan runs."""
    T = n_seq * seq_len
    bf = torch.bfloat16
    q = torch.empty(T, Hk, D, dtype=bf)
    v = torch.empty(T, Hv, D, dtype=bf)
    out = torch.empty_like(v) if fused else torch.empty(T * Hv * D + 1, dtype=bf)[1:].view(T, Hv, D)
    args = (q, torch.empty_like(q), v, torch.empty(T, Hv), torch.empty(T, Hv), out)
    st = torch.empty(n_seq, Hv, D, D) if state else None
    cu = torch.arange(0, T + 1, seq_len, dtype=torch.int32)
    return args, st, cu


def spine_launch(plan_):
    (k,) = [k for k in plan_["kernels"] if k["name"].startswith("spine_")]
    return k


def test_sm_count_comes_from_the_header():
    assert _abi.CONSTANTS["GDN_SM_COUNT"] == grids.SM_COUNT == 132
    assert grids.WGMMA_SPINE_WG1_MAX_CTAS == _abi.CONSTANTS["GDN_WGMMA_WG1_MAX_CTAS"] == 132
    assert "GDN_WGMMA_SPINE_WARPGROUPS" not in _abi.CONSTANTS


@pytest.mark.parametrize("layout", ["kv", "vk"])
@pytest.mark.parametrize("spine", ["auto", "wgmma"])
def test_many_sequences_times_heads_pick_the_two_warpgroup_build(layout, spine):
    """N = 16, Hv = 32: 2048 one-warpgroup CTAs > 132 -> spine_wgmma_wg2, grid z = 128 / 64 = 2."""
    args, st, cu = problem(16, 16, 32)
    p = gdn_prefill.explain(*args, st, cu_seqlens=cu, state_layout=layout, spine=spine)
    assert p["chosen"] == "wgmma"
    k = spine_launch(p)
    assert k["name"] == f"spine_wgmma_wg2_{layout}"
    assert k["grid"] == (16, 32, 2) == grids.grid_spine_wgmma(16 * 64, 16, 32, 2)
    assert k["block"] == 256
    assert k["cluster"] == 2     # the 2 CTAs of a (sequence, head) share W/K by TMA multicast


@pytest.mark.parametrize("layout", ["kv", "vk"])
def test_one_sequence_picks_the_one_warpgroup_build(layout):
    """N = 1, Hv = 32: 128 CTAs -> spine_wgmma (latency), grid z = 128 / 32 = 4."""
    args, st, cu = problem(1, 16, 32, seq_len=4096)
    p = gdn_prefill.explain(*args, st, cu_seqlens=cu, state_layout=layout)
    assert p["chosen"] == "wgmma"
    k = spine_launch(p)
    assert k["name"] == f"spine_wgmma_{layout}"
    assert k["grid"] == (1, 32, 4) == grids.grid_spine_wgmma(4096, 1, 32)
    assert k["block"] == 128
    assert k["cluster"] == 1     # latency build: no cluster lockstep


_MIN_SLOTS = _abi.CONSTANTS["GDN_OVERLAP_MIN_SLOTS"]     # one sequence of 64 (n - 1) tokens: n slots


@pytest.mark.parametrize("layout", ["kv", "vk"])
@pytest.mark.parametrize("n_seq, Hv, seq_len, build", [
    (1, 32, 64, "solo"), (2, 33, 64, "solo"), (16, 32, 64, "dual"), (1, 1, 64, "solo"), (33, 4, 64, "dual"),
    (66, 1, 64, "solo"), (67, 1, 64, "dual"),
    # 192 heads: 2 dual waves (2 x 2.2 us per chunk) cost more than 3 solo waves (3 x 1.4 us)
    (6, 32, 64, "solo"), (8, 32, 64, "dual"), (12, 32, 64, "dual"),
    # the overlap plan (pair) from GDN_OVERLAP_MIN_SLOTS chunk slots on, where the spine holds at most
    # half of the 132 SMs
    (1, 32, 64 * (_MIN_SLOTS - 2), "solo"), (1, 32, 64 * (_MIN_SLOTS - 1), "pair"), (1, 32, 4096, "pair"),
    (2, 32, 4096, "solo"), (3, 4, 4096, "pair")])
def test_fused_plan_runs_the_register_state_spine_in_every_regime(n_seq, Hv, seq_len, build, layout):
    """Aligned tensors: spine_rs_o whatever N * Hv.  Solo: one CTA per (sequence, head, 64 state
    columns), the 2 CTAs of a head adjacent in the 1-D grid; a warpgroup, a TMA warp and a store
    warp (192 threads).  The pair build (a cluster of the head's 2 CTAs) wherever the overlap plan
    runs (explain() says "runs" for it exactly then); the dual build (one CTA per head: two
    consumer warpgroups and an I/O warpgroup, 384 threads) once the solo grid exceeds 132 CTAs."""
    args, st, cu = problem(n_seq, 1, Hv, seq_len=seq_len, state=True, fused=True)
    p = gdn_prefill.explain(*args, st, cu_seqlens=cu, state_layout=layout, spine="wgmma")
    assert p["fused_output"] == "runs"
    k = spine_launch(p)
    T = n_seq * seq_len
    assert _ext._spine_rs_build(T, n_seq, Hv) == build
    assert k["name"] == (f"spine_rs_o_{layout}" if build == "solo" else f"spine_rs_o_{build}_{layout}")
    assert (build == "pair") == p["overlap"].startswith("runs")
    dual = build == "dual"
    assert k["grid"] == ((n_seq + 1) * Hv if dual else n_seq * Hv * 2, 1, 1) == grids.grid_spine_rs(T, n_seq, Hv, dual)
    assert k["block"] == (384 if dual else 192) and k["cluster"] == (2 if build == "pair" else 1)
    assert grids.RS_SPINE_VBLOCK == _abi.CONSTANTS["GDN_RS_SPINE_VBLOCK"] == 64
    assert grids.RS_SPINE_DUAL_WG == _abi.CONSTANTS["GDN_RS_SPINE_DUAL_WG"] == 2


def test_scalar_spine_is_unaffected():
    args, st, cu = problem(16, 16, 32)
    k = spine_launch(gdn_prefill.explain(*args, st, cu_seqlens=cu, spine="scalar"))
    assert k["name"] == "spine_scalar_kv" and k["grid"] == grids.grid_spine_scalar(16 * 64, 16, 32)


@pytest.mark.parametrize("n_seq, Hv, wg", [(33, 1, 1), (34, 1, 2), (1, 32, 1), (2, 32, 2), (16, 2, 1), (17, 2, 2),
                                           (1, 33, 1), (1, 34, 2)])
def test_threshold_edges(n_seq, Hv, wg):
    """The 1-warpgroup grid has 4 * N * Hv CTAs: up to 132 stays WG=1, 136 and up go WG=2."""
    args, st, cu = problem(n_seq, 1, Hv, seq_len=1, state=False)
    k = spine_launch(gdn_prefill.explain(*args, st, cu_seqlens=cu, spine="wgmma"))
    assert k["name"] == ("spine_wgmma_wg2_kv" if wg == 2 else "spine_wgmma_kv")
    assert k["grid"] == (n_seq, Hv, 4 // wg)


def test_launcher_rule_matches_plan():
    """_ext's C rule (what launches): 2 warpgroups once the 1-warpgroup grid, N * Hv * (V / VBLOCK)
    CTAs, exceeds GDN_WGMMA_WG1_MAX_CTAS."""
    for n in list(range(1, 70)) + [128, 1000, 4096]:
        for hv in (1, 2, 3, 4, 8, 16, 32, 48, 64, 128):
            want = 2 if n * hv * (128 // grids.WGMMA_SPINE_VBLOCK) > grids.WGMMA_SPINE_WG1_MAX_CTAS else 1
            assert _ext._spine_wgmma_warpgroups(n, hv) == want, (n, hv)


def test_build_rule_as_the_header_states_it():
    """The launcher's build rule (_rs_build, its one home, through _ext._spine_rs_build) on a grid
    of T, N, Hv and SM counts: the pair exactly where the overlap plan runs (its rule applies), else
    the dual where its waves (N * Hv
    CTAs) at GDN_RS_DUAL_WAVE_NS cost less than the solo build's (2 N * Hv CTAs) at
    GDN_RS_SOLO_WAVE_NS, else solo."""
    for sms in (132, 114, 78):
        for T in (64, 960, 4096, 65536):
            for N in list(range(1, 140)) + [1000, 4096]:
                for Hv in (1, 2, 4, 8, 16, 32, 64):
                    dual = -(-N * Hv // sms) * _abi.CONSTANTS["GDN_RS_DUAL_WAVE_NS"] < \
                        -(-2 * N * Hv // sms) * _abi.CONSTANTS["GDN_RS_SOLO_WAVE_NS"]
                    serial = "dual" if dual else "solo"
                    want = "pair" if _ext._overlap_rule(T, N, Hv, sms) is not None else serial
                    assert _ext._spine_rs_build(T, N, Hv, sms) == want, (T, N, Hv, sms)
                    assert _ext._spine_rs_build(T, N, Hv, sms, overlap=False) == serial, (T, N, Hv, sms)


@pytest.mark.parametrize("lengths, solo_style", [
    ([16384] + [1024] * 15, True),      # measured: split 362.8 us, all dual 536.0
    ([32768] + [2048] * 15, True),      # 715.7 against 1058.7
    ([8192] + [512] * 31, False),       # split 289.3, all dual 278.8: the CTAs' fixed cost
    ([4096] * 8, False),                # balanced: all dual 298.5, solo 368.3
    ([100] * 3 + [0] * 5, True),        # a few CTAs: the longest's solo chain is the whole call
])
def test_dual_lead_rule_on_measured_batches(lengths, solo_style):
    """The dual build's own choice for its longest sequence (grids.dual_lead_solo, the Python copy of
    spine_rs._lead_solo) picks what was measured faster on the H200 (Hv = 32, 132 SMs); with
    2 Hv >= the SMs it never splits."""
    assert grids.dual_lead_solo(lengths, 32, 132) is solo_style
    assert grids.dual_lead_solo(lengths, 66, 132) is False


@pytest.mark.parametrize("n_seq, Hv", [(1, 32), (16, 32)])
def test_build_hook_forces_each_build(n_seq, Hv):
    """The benchmark hook (_builds / _launch_stages with rs_build=0, 1 or 2) names the forced build,
    rs_build=-1 the rule's; other values are refused before anything runs."""
    args, st, cu = problem(n_seq, 1, Hv, state=True, fused=True)
    build = _ext._spine_rs_build(n_seq * 64, n_seq, Hv)
    rule = "spine_rs_o_kv" if build == "solo" else f"spine_rs_o_{build}_kv"
    assert _ext._builds(*args, st, cu_seqlens=cu, spine="wgmma", fused=1)[1] == rule
    for code, name in enumerate(("spine_rs_o_kv", "spine_rs_o_pair_kv", "spine_rs_o_dual_kv")):
        assert _ext._builds(*args, st, cu_seqlens=cu, spine="wgmma", fused=1, rs_build=code)[1] == name
    for bad in (3, -2):
        with pytest.raises(gdn_prefill.GdnArgumentError, match="rs_build: must be"):
            _ext._launch_stages(("spine",), *args, st, cu_seqlens=cu, spine="wgmma", workspace=None, rs_build=bad)


@pytest.mark.parametrize("layout", ["kv", "vk"])
def test_segment_pass_build_hook(layout):
    """The segmented plan's SEGMENT pass: solo by the rule (a CTA per segment slot, head and 64
    columns), dual where the hook forces rs_build=2 (a CTA per segment slot and head, both halves:
    half the grid, as grids.grid_spine_rs_segments gives the kernel); the MAPS pass's grid stays; pair
    has no SEGMENT build and is refused by name."""
    args, st, cu = problem(1, 2, 8, seq_len=8192, fused=True)
    T, sc = 8192, 32
    kw = dict(cu_seqlens=cu, spine="wgmma", state_layout=layout, seg_chunks=sc, with_grids=True)
    solo = _ext._builds(*args, st, **kw)
    dual = _ext._builds(*args, st, rs_build=2, **kw)
    slots_heads = grids.segment_slots(T, 1, sc) * 8
    assert [n for n, _ in solo] == [n for n, _ in dual][:3] + [f"spine_rs_o_seg_{layout}"]
    assert dual[3][0] == f"spine_rs_o_seg_dual_{layout}"
    assert solo[1][1] == dual[1][1] == (2 * slots_heads, 1, 1)            # MAPS: A and B
    assert solo[3][1] == (2 * slots_heads, 1, 1) and dual[3][1] == (slots_heads, 1, 1)
    assert _ext._builds(*args, st, rs_build=0, **kw) == solo
    with pytest.raises(gdn_prefill.GdnArgumentError, match=r"rs_build: the segmented plan's SEGMENT pass is built solo \(0\) or dual \(2\)"):
        _ext._builds(*args, st, rs_build=1, **kw)
