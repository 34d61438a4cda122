"""batch_invariant=True on a Hopper GPU: one 3,000-token sequence gives the same output and final
state, bit for bit, alone and in four kinds of batch (short sequences beside it, where the rules pick
the single plan; one long one, the segmented plan at few heads; many short ones; no max_seqlen), at
2/4 to 16/32, with in-kernel l2norm, dense states and a pool in the vk layout; in the single plan,
which keeps its rule under the flag, with and without the in-kernel l2norm; and with unaligned q
(the unfused plan, whose wgmma build changes with the batch's size)."""
from __future__ import annotations

import pytest
import torch

import gdn_prefill
from conftest import offset_view
from gdn_prefill import reference as ref

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not any(v.startswith("spine_rs_o_") for v in gdn_prefill.compiled_variants()),
                                 reason="fused spine not built")]

X_LEN = 3000
# kind: (the other sequences' lengths, X's position among them, max_seqlen given)
BATCHES = {
    "short": ([200] * 15, 5, True),
    "long": ([20000], 0, True),
    "many": ([128] * 63, 31, True),
    "no_max_seqlen": ([2000] * 3, 2, False),
}
HEADS = [(2, 4), (4, 8), (8, 16), (16, 32)]


def _batch(hk, hv, others, pos, layout, normed=False):
    """X's inputs (fixed seed) among the others' (another seed): tensors on the GPU, X's token rows,
    and the slot of X's state in a pool where every sequence has a slot of its own.  normed: q, k
    unit rows (for calls without the in-kernel l2norm)."""
    x = ref.make_inputs([X_LEN], hk, hv, seed=7, state="dense", state_layout=layout, l2norm_inputs=normed)
    o = ref.make_inputs(others, hk, hv, seed=8, state="dense", state_layout=layout,
                        l2norm_inputs=normed) if others else None
    lens = list(others[:pos]) + [X_LEN] + list(others[pos:])
    cut = sum(others[:pos])
    cat = {}
    for name in ("q", "k", "v", "g", "beta"):
        parts = [x[name]] if o is None else [o[name][:cut], x[name], o[name][cut:]]
        cat[name] = torch.cat(parts).cuda()
    states = [x["state"]] if o is None else [o["state"][:pos], x["state"], o["state"][pos:]]
    n = len(lens)
    # a pool of 2 n slots, the sequences in reverse order from slot n
    pool = torch.zeros((2 * n,) + tuple(x["state"].shape[1:]), dtype=torch.float32)
    idx = torch.arange(2 * n - 1, n - 1, -1, dtype=torch.int32)
    pool[idx.long()] = torch.cat(states)
    cu = torch.tensor([0] + lens, dtype=torch.int32).cumsum(0, dtype=torch.int32)
    return cat, pool.cuda(), idx.cuda(), cu.cuda(), (cut, cut + X_LEN), int(idx[pos]), max(lens)


def _run(hk, hv, others, pos, max_given, layout="kv", unaligned=False, invariant=True, l2norm=True):
    t, pool, idx, cu, (a, b), slot, longest = _batch(hk, hv, others, pos, layout, normed=not l2norm)
    out = torch.full_like(t["v"], float("nan"))
    q = offset_view(t["q"]) if unaligned else t["q"]
    kw = dict(cu_seqlens=cu, state_indices=idx, state_layout=layout, use_qk_l2norm=l2norm,
              max_seqlen=longest if max_given else None, batch_invariant=invariant)
    plan = gdn_prefill.explain(q, t["k"], t["v"], t["g"], t["beta"], out, pool, **kw)["plan"]["name"]
    gdn_prefill.prefill(q, t["k"], t["v"], t["g"], t["beta"], out, pool, **kw)
    torch.cuda.synchronize()
    return out[a:b].clone(), pool[slot].clone(), plan


def _same(x, y):
    view = torch.int16 if x.dtype == torch.bfloat16 else torch.int32
    return torch.equal(x.view(view), y.view(view))


@pytest.mark.parametrize("layout", ["kv", "vk"])
@pytest.mark.parametrize("hk, hv", HEADS)
def test_one_sequence_keeps_its_bits_in_any_batch(hk, hv, layout):
    o0, s0, plan0 = _run(hk, hv, [], 0, True, layout)
    assert plan0 in ("serial", "overlap") and torch.isfinite(o0.float()).all()
    for kind, (others, pos, max_given) in BATCHES.items():
        o, s, plan = _run(hk, hv, others, pos, max_given, layout)
        assert plan in ("serial", "overlap", "single"), (kind, plan)
        assert _same(o, o0), f"{kind}: X's output moved by {(o.float() - o0.float()).abs().max().item():.3g}"
        assert _same(s, s0), f"{kind}: X's final state moved by {(s - s0).abs().max().item():.3g}"


@pytest.mark.parametrize("hk, hv", [(2, 4), (16, 32)])
def test_unaligned_inputs_keep_their_bits_in_the_unfused_plan(hk, hv):
    """q one element off a 16-byte boundary: the unfused plan, whose wgmma spine runs one warpgroup
    per CTA for X alone and two for the many-sequence batch."""
    o0, s0, plan0 = _run(hk, hv, [], 0, True, unaligned=True)
    assert plan0 == "unfused"
    for kind in ("many", "short"):
        others, pos, max_given = BATCHES[kind]
        o, s, plan = _run(hk, hv, others, pos, max_given, unaligned=True)
        assert plan == "unfused"
        assert _same(o, o0) and _same(s, s0), kind


@pytest.mark.parametrize("l2norm", [True, False])
@pytest.mark.parametrize("hk, hv", [(4, 16), (8, 16), (16, 32), (16, 64)])
def test_the_single_plan_gives_the_serial_plans_bits(hk, hv, l2norm):
    """Under the flag the single plan keeps its rule: X among 31 sequences of 512 tokens takes it,
    X alone the serial plan (or the overlap plan: the same arithmetic), and X's output and state are the same bits (its inverse in fp32, its
    sums in stage 1's orders); pre-normed too, where the keys' range check would pick fp16."""
    o0, s0, plan0 = _run(hk, hv, [], 0, True, l2norm=l2norm)
    o1, s1, plan1 = _run(hk, hv, [512] * 31, 5, True, l2norm=l2norm)
    assert plan0 in ("serial", "overlap") and plan1 == "single"
    assert _same(o1, o0), f"output moved by {(o1.float() - o0.float()).abs().max().item():.3g}"
    assert _same(s1, s0), f"state moved by {(s1 - s0).abs().max().item():.3g}"


@pytest.mark.parametrize("l2norm", [True, False])
def test_the_flag_is_the_one_difference(l2norm):
    """The same batch, the single plan with and without the flag: the outputs differ (its fp16
    inverse without it), so the tests above would see a plan that leaked into a sequence's bits."""
    o0, _, plan0 = _run(16, 32, [512] * 31, 5, True, invariant=False, l2norm=l2norm)
    o1, _, plan1 = _run(16, 32, [512] * 31, 5, True, invariant=True, l2norm=l2norm)
    assert [plan0, plan1] == ["single", "single"]
    assert not _same(o0, o1)
