"""The overlap plan (stage 1 split around the register-state spine, ready flags between them) on a Hopper GPU.

Both plans run the same kernels on the same chunks in the same arithmetic order, so the overlap
plan must reproduce the serial plan bit for bit at every split point; a flag read too early
(a missing acquire, a spine chunk that does not wait) would show as a difference.
The plan is opt-in (GDN_PREFILL_OVERLAP=1: its spine waits for another stream's kernel, which
concurrent streams can starve); this file forces splits through the stage hook and checks the
rule and its deadlock guard.  tests/test_gpu_concurrency.py runs the default plan under
concurrent streams and threads.
"""
from __future__ import annotations

import pytest
import torch

import gdn_prefill
from gdn_prefill import _abi, _ext, grids, reference as ref

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not any(v.startswith("spine_rs_o_") for v in gdn_prefill.compiled_variants()),
                                 reason="register-state spine not built")]

BOUND = 1e-2


def _run(inp, overlap_split):
    """The fused plan through the stage hook with the given split (0: serial); returns out, state."""
    T, Hv = inp["v"].shape[0], inp["v"].shape[1]
    N = inp["cu_seqlens"].numel() - 1
    out = torch.full((T, Hv, 128), float("nan"), dtype=torch.bfloat16, device="cuda")
    state = None if inp["state"] is None else inp["state"].clone()
    # a workspace full of garbage: the plan must zero the ready flags itself
    ws = torch.full((gdn_prefill.workspace_bytes(T, N, Hv),), 0x5A, dtype=torch.uint8, device="cuda")
    _ext._launch_stages(("recompute_wu", "spine"), inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], out, state,
                        cu_seqlens=inp["cu_seqlens"], state_indices=inp["state_indices"],
                        state_layout=inp["state_layout"], spine="wgmma", workspace=ws, fused=1,
                        overlap_split=overlap_split)
    torch.cuda.synchronize()
    return out, state


CASES = {
    # the B=1 shape (Hk/Hv = 16/32): 64 spine CTAs, the rule splits at slot GDN_OVERLAP_SPLIT_SLOTS of 129
    "b1_8k_16_32": ([8192], 16, 32, dict(l2norm_inputs=True, state="dense")),
    # few sequences with partial chunks, a padded pool in the vk layout
    "varlen_pool_vk": ([1500, 63, 700, 1], 2, 4,
                       dict(l2norm_inputs=True, state="pool", pad_every=3, state_layout="vk")),
}


@pytest.mark.parametrize("case", list(CASES))
def test_overlap_matches_serial_bitwise(case):
    lens, hk, hv, kw = CASES[case]
    inp = ref.make_inputs(lens, hk, hv, seed=3, device="cuda", **kw)
    T, N = inp["q"].shape[0], len(lens)
    plan = gdn_prefill.explain(inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"],
                               torch.empty_like(inp["v"]), inp["state"], cu_seqlens=inp["cu_seqlens"],
                               state_indices=inp["state_indices"], state_layout=inp["state_layout"])
    # the plan is opt-in (GDN_PREFILL_OVERLAP=1): by default explain() says why it does not run
    assert plan["overlap_split"] is None and plan["overlap"] == _ext.OVERLAP_OFF, plan["overlap"]
    rule = _ext._overlap_split_rule(T, N, hv, torch.cuda.get_device_properties(0).multi_processor_count)
    assert rule is not None
    o0, s0 = _run(inp, 0)
    with torch.device("cuda"):
        o_ref, s_ref = ref.chunked(inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], cu_seqlens=inp["cu_seqlens"],
                                   state=inp["state"], state_indices=inp["state_indices"],
                                   state_layout=inp["state_layout"])
    live = ~o_ref.isnan()
    assert ref.rel_err(o0.double()[live], o_ref.to(o0.device)[live]) <= BOUND
    cb = plan["chunk_slots"]
    for split in (1, rule, cb - 1):
        o, s = _run(inp, split)
        assert torch.equal(o.view(torch.int16), o0.view(torch.int16)), f"{case}: out differs at split {split}"
        if s0 is not None:
            assert torch.equal(s, s0), f"{case}: state differs at split {split}"


def test_overlap_rule_and_guard():
    """The rule on this device's SM count (tests/test_overlap_rule.py: the edges, on the CPU); a
    forced split where the rule's deadlock guard
    forbids the overlap, or past the slots, is refused before any launch (one below the rule's
    minimum of chunk slots runs, and matches the serial plan)."""
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for T, N, Hv in [(8192, 1, 32), (8192, 2, 32), (1024, 1, 32), (4096, 2, 16)]:
        cs, fits = grids.chunk_slots(T, N), 4 * N * Hv <= sms
        want = min(cs, _abi.CONSTANTS["GDN_OVERLAP_SPLIT_SLOTS"]) \
            if fits and cs >= _abi.CONSTANTS["GDN_OVERLAP_MIN_SLOTS"] else None
        assert _ext._overlap_split_rule(T, N, Hv, sms) == want, (T, N, Hv)
    inp = ref.make_inputs([64, 64], 2, 34, seed=1, device="cuda", l2norm_inputs=True)  # 136 spine CTAs
    with pytest.raises(gdn_prefill.GdnArgumentError, match="overlap_split.*deadlock"):
        _run(inp, 1)
    inp = ref.make_inputs([256], 2, 4, seed=1, device="cuda", l2norm_inputs=True)   # 5 slots: the rule is serial
    o0, _ = _run(inp, 0)
    o2, _ = _run(inp, 2)
    assert torch.equal(o0.view(torch.int16), o2.view(torch.int16))
    inp = ref.make_inputs([4096], 2, 4, seed=1, device="cuda", l2norm_inputs=True)
    with pytest.raises(gdn_prefill.GdnArgumentError, match="overlap_split"):
        _run(inp, 65)

