"""The engines' doors on a Hopper GPU (issue 70): a per-sequence has_initial_state mask in every plan,
int64 indices and integer masks converted on the device (also under CUDA-graph capture),
checkpoints into a pool of their own, FlashInfer's checkpoint buffers, all against the fp64 oracle
or bit for bit against the call they must equal.  (tests/test_doors.py has the rules on the CPU.)
"""
from __future__ import annotations

import pytest
import torch

import gdn_prefill
from gdn_prefill import flashinfer_api, reference as ref
from test_gpu_prefill import BOUND, PLANS, SEG_PLANS, _run_plan, plan_built

pytestmark = pytest.mark.gpu

LENS = [130, 64, 0, 700, 65, 1]


def _bits(x):
    return x.view(torch.int16) if x.dtype == torch.bfloat16 else x.view(torch.int32)


def _inputs(layout, seed=9):
    return ref.make_inputs(LENS, 2, 4, seed=seed, device="cuda", l2norm_inputs=True, state="pool", pad_every=4,
                           state_layout=layout)


@pytest.mark.parametrize("layout", ["kv", "vk"])
@pytest.mark.parametrize("plan_name", list(PLANS) + list(SEG_PLANS))
def test_per_sequence_mask_in_every_plan(plan_name, layout):
    """A false entry starts that sequence from zero whatever its slot holds (NaN here), a true one
    from its slot: the outputs and states equal, bit for bit, the in-place run on a pool whose
    masked slots were zeroed; the same with the initial states read apart (initial_state), with
    an all-true mask (the plain run's bits), and with the mask as uint8."""
    if not plan_built(plan_name):
        pytest.skip(f"{plan_name} not built")
    inp = _inputs(layout)
    idx = inp["state_indices"].tolist()
    mask = torch.tensor([n % 2 == 0 for n in range(len(LENS))], device="cuda")
    zeroed = inp["state"].clone()
    garbage = inp["state"].clone()
    for n, s in enumerate(idx):
        if s >= 0 and not mask[n]:
            zeroed[s] = 0.0
            garbage[s] = float("nan")
    out_ref = _run_plan(plan_name, inp, zeroed)
    out = _run_plan(plan_name, inp, garbage, has_initial_state=mask)
    assert torch.equal(_bits(out), _bits(out_ref))
    assert torch.equal(_bits(garbage), _bits(zeroed))
    # read apart: initial_state read only, state only written
    init = inp["state"].clone()
    for n, s in enumerate(idx):
        if s >= 0 and not mask[n]:
            init[s] = float("nan")
    init_before = init.clone()
    apart = torch.full_like(inp["state"], float("nan"))
    out_apart = _run_plan(plan_name, inp, apart, initial_state=init, has_initial_state=mask.to(torch.uint8))
    assert torch.equal(_bits(out_apart), _bits(out_ref))
    assert torch.equal(_bits(init), _bits(init_before))
    for s in [s for s in idx if s >= 0]:
        assert torch.equal(_bits(apart[s]), _bits(zeroed[s])), s
    # all true: the plain in-place run
    plain = inp["state"].clone()
    out_plain = _run_plan(plan_name, inp, plain)
    every = inp["state"].clone()
    out_every = _run_plan(plan_name, inp, every, has_initial_state=torch.ones(len(LENS), dtype=torch.bool,
                                                                               device="cuda"))
    assert torch.equal(_bits(out_every), _bits(out_plain)) and torch.equal(_bits(every), _bits(plain))


def test_the_mask_against_the_oracle():
    """The masked run within the bound of the oracle on the pool with the masked slots zeroed."""
    inp = _inputs("vk", seed=4)
    mask = torch.tensor([True, False, True, False, False, True], device="cuda")
    pool = inp["state"].clone()
    zeroed = inp["state"].clone()
    for n, s in enumerate(inp["state_indices"].tolist()):
        if s >= 0 and not mask[n]:
            zeroed[s] = 0.0
            pool[s] = 1e30                       # huge, finite: any read of it would show
    out = torch.full_like(inp["v"], float("nan"))
    gdn_prefill.prefill(inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], out, pool,
                        cu_seqlens=inp["cu_seqlens"], state_indices=inp["state_indices"], state_layout="vk",
                        has_initial_state=mask, max_seqlen=max(LENS))
    with torch.device("cuda"):
        o_ref, s_ref = ref.chunked(inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], cu_seqlens=inp["cu_seqlens"],
                                   state=zeroed, state_indices=inp["state_indices"], state_layout="vk")
    live = ~o_ref.isnan()
    assert ref.rel_err(out.double()[live], o_ref[live]) <= BOUND
    for s in [s for s in inp["state_indices"].tolist() if s >= 0]:
        assert ref.rel_err(pool[s].double(), s_ref[s]) <= BOUND, s


@pytest.mark.parametrize("max_seqlen", [None, 700])
def test_int64_metadata_and_integer_masks_give_the_int32_bits(max_seqlen):
    """vLLM / SGLang metadata as built (int64 offsets and slots, an int mask): converted on the device,
    the same bits as int32 offsets and slots with a bool mask."""
    inp = _inputs("vk", seed=5)
    mask = torch.tensor([1, 0, 1, 1, 0, 1], dtype=torch.int32, device="cuda")

    def run(cu, idx, m):
        out = torch.full_like(inp["v"], float("nan"))
        st = inp["state"].clone()
        gdn_prefill.prefill(inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], out, st, cu_seqlens=cu,
                            state_indices=idx, state_layout="vk", has_initial_state=m, use_qk_l2norm=True,
                            max_seqlen=max_seqlen)
        torch.cuda.synchronize()
        return out, st

    o32, s32 = run(inp["cu_seqlens"], inp["state_indices"], mask != 0)
    o64, s64 = run(inp["cu_seqlens"].long(), inp["state_indices"].long(), mask.long())
    oi, si = run(inp["cu_seqlens"], inp["state_indices"].long(), mask)
    for o, s in ((o64, s64), (oi, si)):
        assert torch.equal(_bits(o), _bits(o32)) and torch.equal(_bits(s), _bits(s32))


def test_int64_metadata_and_a_mask_under_graph_capture():
    """Captured once with int64 offsets and slots and an int64 mask (conversions inside the graph),
    replayed on new values of all three: the eager run's bits each time (no host sync)."""
    inp = _inputs("vk", seed=6)
    T, N = inp["v"].shape[0], len(LENS)
    cu = inp["cu_seqlens"].long().clone()
    idx = inp["state_indices"].long().clone()
    mask = torch.ones(N, dtype=torch.int64, device="cuda")
    out = torch.empty_like(inp["v"])
    state = inp["state"].clone()
    ws = torch.empty(gdn_prefill.workspace_bytes(T, N, 4), dtype=torch.uint8, device="cuda")
    args = (inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], out, state)
    kw = dict(cu_seqlens=cu, state_indices=idx, state_layout="vk", has_initial_state=mask, workspace=ws,
              max_seqlen=T)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        gdn_prefill.prefill(*args, **kw)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        gdn_prefill.prefill(*args, **kw)
    for step in range(3):
        m = torch.tensor([(n + step) % 3 != 0 for n in range(N)], device="cuda")
        perm = idx.flip(0) if step % 2 else inp["state_indices"].long()
        mask.copy_(m.long())
        idx.copy_(perm)
        state.copy_(inp["state"])
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        o_e = torch.full_like(out, float("nan"))
        s_e = inp["state"].clone()
        gdn_prefill.prefill(*args[:5], o_e, s_e, cu_seqlens=inp["cu_seqlens"], state_indices=perm.int(),
                            state_layout="vk", has_initial_state=m, max_seqlen=T)
        torch.cuda.synchronize()
        assert torch.equal(_bits(out), _bits(o_e)) and torch.equal(_bits(state), _bits(s_e)), step


@pytest.mark.parametrize("plan_name", list(PLANS))
def test_checkpoints_into_their_own_pool(plan_name):
    """Checkpoints into a checkpoint_pool equal, bit for bit, the same checkpoints written into slots
    of the state pool; the state pool is then touched only at the live slots; the end-of-sequence
    checkpoint (a length that is a multiple of the interval) is the final state."""
    if not plan_built(plan_name):
        pytest.skip(f"{plan_name} not built")
    lens = [128, 129, 63, 0, 384, 200]
    every = 64
    inp = ref.make_inputs(lens, 2, 4, seed=7, device="cuda", l2norm_inputs=True, state="pool", pad_every=5,
                          state_layout="vk", extra_slots=40)
    P = inp["state"].shape[0]
    table = ref.checkpoint_table(inp["cu_seqlens"], inp["state_indices"], P, every, device="cuda")
    one = inp["state"].clone()
    out1 = _run_plan(plan_name, inp, one, checkpoint_every=every, checkpoints=table)
    two = inp["state"].clone()
    ck_pool = torch.full_like(inp["state"], float("nan"))
    out2 = _run_plan(plan_name, inp, two, checkpoint_every=every, checkpoints=table, checkpoint_pool=ck_pool)
    assert torch.equal(_bits(out1), _bits(out2))
    idx = inp["state_indices"].tolist()
    written = set()
    for n, s in enumerate(idx):
        if s < 0:
            continue
        assert torch.equal(_bits(two[s]), _bits(one[s]))
        for j, c in enumerate(table[n].tolist()):
            if c >= 0 and (j + 1) * every <= lens[n]:
                written.add(c)
                assert torch.equal(_bits(ck_pool[c]), _bits(one[c])), (n, j)
                if (j + 1) * every == lens[n]:
                    assert torch.equal(_bits(ck_pool[c]), _bits(one[s])), (n, "the end checkpoint")
    assert any((j + 1) * every == lens[n] for n in range(len(lens)) for j in range(lens[n] // every)
               if idx[n] >= 0), "the case has no end-of-sequence checkpoint"
    for s in range(P):
        if s not in written:
            assert ck_pool[s].isnan().all(), s
        if s not in idx:
            assert torch.equal(_bits(two[s]), _bits(inp["state"][s])), s
    # no state at all: outputs and checkpoints the same
    three = torch.full_like(inp["state"], float("nan"))
    out3 = _run_plan(plan_name, inp, None, initial_state=inp["state"], checkpoint_every=every, checkpoints=table,
                     checkpoint_pool=three)
    assert torch.equal(_bits(out3), _bits(out1))
    for c in written:
        assert torch.equal(_bits(three[c]), _bits(ck_pool[c])), c


@pytest.mark.parametrize("pool", [False, True])
def test_flashinfer_checkpoints_against_the_oracle(pool):
    """FlashInfer's state_checkpoints / checkpoint_cu_starts / checkpoint_every_n_tokens, with its
    meaning: sequence n's checkpoint j (j < len // c) in row cu_starts[n] + j, [V, K] layout, within
    the bound of the oracle's state after token (j + 1) c; rows of no checkpoint untouched."""
    lens = [128, 300, 0, 64, 65, 700]
    every = 64
    inp = ref.make_inputs(lens, 2, 4, seed=8, device="cuda", l2norm_inputs=True, state="pool" if pool else "dense",
                          state_layout="vk")
    counts = [n // every for n in lens]
    starts = torch.tensor([0] + list(torch.tensor(counts).cumsum(0).tolist()), dtype=torch.int64, device="cuda")
    ck = torch.full((sum(counts) + 2, 4, 128, 128), float("nan"), device="cuda")   # two spare rows
    alpha = inp["g"].exp()
    st = inp["state"].clone()
    kw = dict(state_indices=inp["state_indices"], output_state=st) if pool else {}
    out, final = flashinfer_api.chunk_gated_delta_rule(
        inp["q"], inp["k"], inp["v"], alpha, inp["beta"], initial_state=st, output_final_state=True,
        cu_seqlens=inp["cu_seqlens"].long(), state_checkpoints=ck, checkpoint_cu_starts=starts,
        checkpoint_every_n_tokens=every, **kw)
    torch.cuda.synchronize()
    cu = inp["cu_seqlens"].tolist()
    rows = 0
    for n, (a, b) in enumerate(zip(cu, cu[1:])):
        s = int(inp["state_indices"][n]) if pool else n
        for j in range(counts[n]):
            end = a + (j + 1) * every
            sub = {k: inp[k][a:end] for k in ("q", "k", "v", "g", "beta")}
            with torch.device("cuda"):
                _, s_pre = ref.chunked(**sub, state=inp["state"][s:s + 1], state_layout="vk")
            row = int(starts[n]) + j
            assert ref.rel_err(ck[row].double(), s_pre[0]) <= BOUND, (n, j)
            if end == b:
                assert torch.equal(ck[row], final[s]), (n, "end checkpoint = final state")
            rows += 1
    assert rows == sum(counts)
    assert ck[rows:].isnan().all()
    fi = pytest.importorskip("flashinfer.gdn_prefill")
    ck_fi = torch.full_like(ck, float("nan"))
    st_fi = inp["state"].clone()
    kw_fi = dict(state_indices=inp["state_indices"], output_state=st_fi) if pool else dict(
        output_state=torch.empty_like(st_fi))
    fi.chunk_gated_delta_rule(inp["q"], inp["k"], inp["v"], alpha, inp["beta"], initial_state=st_fi,
                              output_final_state=True, cu_seqlens=inp["cu_seqlens"].long(), state_checkpoints=ck_fi,
                              checkpoint_cu_starts=starts, checkpoint_every_n_tokens=every, **kw_fi)
    torch.cuda.synchronize()
    assert ck_fi[rows:].isnan().all() and torch.isfinite(ck_fi[:rows]).all()
    assert ref.rel_err(ck[:rows].double(), ck_fi[:rows].double()) <= 2 * BOUND
