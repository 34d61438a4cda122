"""The overlap plan (stage 1's workers build beside the register-state spine, ready flags between them)
on a Hopper GPU.

Both plans run the same arithmetic on the same chunks, so the overlap plan must reproduce the serial
plan bit for bit at every workers count; a flag read too early (a missing acquire, a spine chunk
that does not wait, a worker that publishes before its stores land) would show as a difference.
This file forces it through the stage hook, with the rule's workers and with far fewer (one worker CTA for the whole call: the spine
waits on nearly every chunk), and checks the rule on this device.  tests/test_gpu_concurrency.py
runs it under concurrent streams and threads.
"""
from __future__ import annotations

import pytest
import torch

import gdn_prefill
from gdn_prefill import _abi, _ext, grids, reference as ref

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not any(v.startswith("recompute_wu_") and v.endswith("_workers")
                                         for v in gdn_prefill.compiled_variants()),
                                 reason="the overlap plan's workers build not built")]

BOUND = 1e-2


def _run(inp, wu_ctas):
    """The fused plan through the stage hook on wu_ctas workers CTAs (0: serial); returns out, state."""
    T, Hv = inp["v"].shape[0], inp["v"].shape[1]
    N = inp["cu_seqlens"].numel() - 1
    out = torch.full((T, Hv, 128), float("nan"), dtype=torch.bfloat16, device="cuda")
    state = None if inp["state"] is None else inp["state"].clone()
    # a workspace full of garbage: the plan must zero the ready flags itself
    ws = torch.full((gdn_prefill.workspace_bytes(T, N, Hv),), 0x5A, dtype=torch.uint8, device="cuda")
    _ext._launch_stages(("recompute_wu", "spine"), inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], out,
                        state, cu_seqlens=inp["cu_seqlens"], state_indices=inp["state_indices"],
                        state_layout=inp["state_layout"], spine="wgmma", workspace=ws, fused=1,
                        overlap_wu_ctas=wu_ctas)
    torch.cuda.synchronize()
    return out, state


CASES = {
    # the B=1 shape (Hk/Hv = 16/32): 64 spine CTAs, the rule's workers on the other SMs
    "b1_8k_16_32": ([8192], 16, 32, dict(l2norm_inputs=True, state="dense")),
    # few sequences with partial chunks, a padded pool in the vk layout
    "varlen_pool_vk": ([1500, 63, 700, 1], 2, 4,
                       dict(l2norm_inputs=True, state="pool", pad_every=3, state_layout="vk")),
    # an empty first sequence: slot 0 maps to no chunk, and the spine's first wait is on it
    "empty_first": ([0, 900, 2000], 2, 4, dict(l2norm_inputs=True, state="dense")),
}


@pytest.mark.parametrize("case", list(CASES))
def test_overlap_matches_serial_bitwise(case):
    lens, hk, hv, kw = CASES[case]
    inp = ref.make_inputs(lens, hk, hv, seed=3, device="cuda", **kw)
    T, N = inp["q"].shape[0], len(lens)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    plan = gdn_prefill.explain(inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"],
                               torch.empty_like(inp["v"]), inp["state"], cu_seqlens=inp["cu_seqlens"],
                               state_indices=inp["state_indices"], state_layout=inp["state_layout"])
    # prefill() runs the plan wherever the rule gives workers, on the rule's
    assert plan["overlap_wu_ctas"] == _ext._overlap_rule(T, N, hv, sms)
    assert (plan["plan"]["name"] == "overlap") == (plan["overlap_wu_ctas"] is not None) or \
        plan["plan"]["name"] in ("segmented", "single")
    o0, s0 = _run(inp, 0)
    with torch.device("cuda"):
        o_ref, s_ref = ref.chunked(inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], cu_seqlens=inp["cu_seqlens"],
                                   state=inp["state"], state_indices=inp["state_indices"],
                                   state_layout=inp["state_layout"])
    live = ~o_ref.isnan()
    assert ref.rel_err(o0.double()[live], o_ref.to(o0.device)[live]) <= BOUND
    rule = _ext._overlap_rule(T, N, hv, sms) or sms - 2 * N * hv
    for wu_ctas in (1, 3, rule):
        for _ in range(3):
            o, s = _run(inp, wu_ctas)
            assert torch.equal(o.view(torch.int16), o0.view(torch.int16)), f"{case}: out differs at {wu_ctas} CTAs"
            if s0 is not None:
                assert torch.equal(s, s0), f"{case}: state differs at {wu_ctas} CTAs"


def test_overlap_rule_on_this_device():
    """The rule on this device's SM count (tests/test_overlap_rule.py: the edges, on the CPU), and
    explain() naming the workers build where the rule runs it; a forced count below zero is refused."""
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for T, N, Hv in [(8192, 1, 32), (8192, 2, 32), (1024, 1, 32), (4096, 2, 16)]:
        cs, fits = grids.chunk_slots(T, N), 4 * N * Hv <= sms
        want = sms - 2 * N * Hv if fits and cs >= _abi.CONSTANTS["GDN_OVERLAP_MIN_SLOTS"] else None
        assert _ext._overlap_rule(T, N, Hv, sms) == want, (T, N, Hv)
    inp = ref.make_inputs([256], 2, 4, seed=1, device="cuda", l2norm_inputs=True)   # 5 slots: the rule is serial
    o0, _ = _run(inp, 0)
    o2, _ = _run(inp, 2)
    assert torch.equal(o0.view(torch.int16), o2.view(torch.int16))
    with pytest.raises(gdn_prefill.GdnArgumentError, match="overlap_wu_ctas"):
        _run(inp, -2)


def test_overlap_in_a_cuda_graph():
    """The overlap plan captured once (the memset, the workers, the spine as their programmatic
    dependent) and replayed on new values: each replay's bits are the serial plan's on those values."""
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    lens, hk, hv = [3000, 200], 2, 4
    sets = [ref.make_inputs(lens, hk, hv, seed=s, device="cuda", l2norm_inputs=True, state="dense") for s in (1, 2)]
    want = [_run(x, 0) for x in sets]
    x = {k: (v.clone() if torch.is_tensor(v) else v) for k, v in sets[0].items()}
    T, N = x["q"].shape[0], len(lens)
    out = torch.empty(T, hv, 128, dtype=torch.bfloat16, device="cuda")
    state = x["state"].clone()
    ws = torch.empty(gdn_prefill.workspace_bytes(T, N, hv), dtype=torch.uint8, device="cuda")
    wu_ctas = sms - 2 * N * hv

    def call():
        _ext._launch_stages(("recompute_wu", "spine"), x["q"], x["k"], x["v"], x["g"], x["beta"], out, state,
                            cu_seqlens=x["cu_seqlens"], spine="wgmma", workspace=ws, fused=1, overlap_wu_ctas=wu_ctas)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        call()                                   # warm-up: the modules load outside the capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        call()
    for s, (o_want, s_want) in zip(sets, want):
        for name in ("q", "k", "v", "g", "beta"):
            x[name].copy_(s[name])
        state.copy_(s["state"])
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out.view(torch.int16), o_want.view(torch.int16))
        assert torch.equal(state, s_want)
