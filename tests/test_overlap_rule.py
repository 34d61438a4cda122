"""The overlap plan's rule (CPU): when stage 1's workers build runs beside the register-state spine,
on how many CTAs, and what explain() says.

The launcher's C rule (its one home, called through _ext._overlap_rule) against the rule as
gdn_abi.h states it, on a grid and at the edges of its balance (the spine's CTAs may hold at most
half of the SMs) and of GDN_OVERLAP_MIN_SLOTS.  tests/test_gpu_overlap.py runs the plan itself.
"""
from __future__ import annotations

import itertools

import pytest
import torch

import gdn_prefill
from gdn_prefill import _abi, _ext, grids

MIN = _abi.CONSTANTS["GDN_OVERLAP_MIN_SLOTS"]


def test_rule_as_the_header_states_it():
    Ts = [1, 64 * (MIN - 2), 64 * (MIN - 1), 64 * MIN, 1000, 8192, 65536]
    for T, N, Hv, sms in itertools.product(Ts, [1, 2, 3], [4, 16, 32, 33, 64], [16, 114, 128, 132]):
        fits = 2 * N * Hv * 2 <= sms
        want = sms - N * Hv * 2 if fits and grids.chunk_slots(T, N) >= MIN else None
        assert _ext._overlap_rule(T, N, Hv, sms) == want, (T, N, Hv, sms)
        assert _ext._overlap_fits_rule(N, Hv, sms) == fits


def test_rule_edges():
    # one sequence of 64 (MIN - 1) tokens: MIN slots (the slot count includes one per sequence)
    assert _ext._overlap_rule(64 * (MIN - 1), 1, 4, 132) == 132 - 8
    assert _ext._overlap_rule(64 * (MIN - 2), 1, 4, 132) is None
    # the balance: N * Hv * 2 spine CTAs <= SMs / 2; the workers take the other SMs
    assert _ext._overlap_rule(8192, 1, 32, 132) == 68
    assert _ext._overlap_rule(8192, 1, 33, 132) == 66     # 66 spine CTAs
    assert _ext._overlap_rule(8192, 1, 34, 132) is None   # 68 CTAs
    assert _ext._overlap_rule(8192, 1, 32, 114) is None   # an H100 PCIe: 64 CTAs > 57
    assert _ext._overlap_rule(8192, 2, 32, 132) is None


def _meta_problem(lens, hk, hv):
    T = sum(lens)
    m = dict(device="meta")
    q = torch.empty(T, hk, 128, dtype=torch.bfloat16, **m)
    v = torch.empty(T, hv, 128, dtype=torch.bfloat16, **m)
    g = torch.empty(T, hv, dtype=torch.float32, **m)
    cu = torch.tensor([0] + list(itertools.accumulate(lens)), dtype=torch.int32).to("meta")
    return (q, q.clone(), v, g, g.clone(), v.clone()), dict(cu_seqlens=cu, check_device=False)


@pytest.mark.skipif(not any(v.startswith("spine_rs_o_") for v in gdn_prefill.compiled_variants()),
                    reason="register-state spine not built")
def test_explain_reports_the_overlap():
    args, kw = _meta_problem([8192], 16, 32)
    p = gdn_prefill.explain(*args, **kw)
    assert p["fused_output"] == "runs"
    # one sequence at 16/32: the spine's 64 CTAs leave 68 SMs to the workers
    assert p["plan"]["name"] == "overlap" and p["overlap_wu_ctas"] == 68
    assert p["overlap"].startswith("runs: recompute_wu_workers on 68 CTAs"), p["overlap"]
    assert p["kernels"][0]["name"].endswith("_workers") and p["kernels"][1]["name"].startswith("spine_rs_o_pair_")
    args, kw = _meta_problem([4096] * 8, 16, 32)
    p = gdn_prefill.explain(*args, **kw)
    assert p["overlap_wu_ctas"] is None and "512 CTAs" in p["overlap"], p["overlap"]
    args, kw = _meta_problem([64], 16, 32)
    p = gdn_prefill.explain(*args, **kw)
    assert p["overlap_wu_ctas"] is None and "chunk slots" in p["overlap"], p["overlap"]
    args, kw = _meta_problem([8192], 16, 32)
    p = gdn_prefill.explain(*args, spine="scalar", **kw)
    assert p["overlap_wu_ctas"] is None and "fused-output" in p["overlap"], p["overlap"]


def test_workspace_has_one_ready_flag_per_slot_and_head():
    layout = gdn_prefill.workspace_layout(8192, 1, 32)
    off, shape, dtype = layout["ready"]
    assert shape == (grids.chunk_slots(8192, 1), 32) and dtype == "int32"
    assert off + 4 * shape[0] * shape[1] <= gdn_prefill.workspace_bytes(8192, 1, 32)


def test_chain_rate_beside_the_workers(repo_script):
    """Measured 1x8K medians of the earlier split plan's two stage-1 builds: the part beside the spine
    ended at 194.9 us, the spine (from 13.7) at 214.4; the other's at 175.7, the spine (from 12.5) at
    217.7: 1.60 and 1.69 us per chunk beside it; a spine that ends with stage 1 waited for it (no rate)."""
    rate = repo_script("tools/overlap_parts.py").chain_rate_beside
    main = rate(dict(spine_start=13.7, wu_end=194.9, spine_end=214.4), 128, 1.34)
    new = rate(dict(spine_start=12.5, wu_end=175.7, spine_end=217.7), 128, 1.34)
    assert round(main, 2) == 1.60 and round(new, 2) == 1.69
    assert rate(dict(spine_start=10.8, wu_end=219.6, spine_end=220.5), 128, 1.34) is None
