"""Context parallelism (gdn_prefill.distributed): a sequence's segments as affine state maps,
their composition, and the ranks' exchange.

On the CPU every segment pass is the fp64 oracle (distributed.reference_pass), so the composition
itself is checked to float64 rounding: the segment map (A, B) reproduces the oracle's final state
and outputs from any initial state; the ranks, emulated in one process and run as two processes
exchanging through torch.distributed's gloo backend, give the one-sequence oracle's outputs and
final state.  On a Hopper GPU the passes are gdn_prefill.prefill (bf16 outputs, fp32 states):
emulated ranks and two gloo processes on one GPU against the fp64 oracle over the whole sequence.
"""
from __future__ import annotations

import os

import pytest
import torch
import torch.multiprocessing as mp

from gdn_prefill import distributed as cp, reference as ref

BOUND = 1e-2           # the kernels' bound (bf16 operands and outputs)


def _inputs(T, Hk=1, Hv=2, seed=0, device="cpu"):
    inp = ref.make_inputs([T], Hk, Hv, seed=seed, device=device, state="dense", l2norm_inputs=True)
    return inp


def _shards(inp, cuts):
    """inp's one sequence cut at token offsets `cuts` (rank r: tokens [cuts[r], cuts[r + 1]))."""
    return [{n: inp[n][a:b] for n in ("q", "k", "v", "g", "beta")} for a, b in zip(cuts, cuts[1:])]


def test_segment_map_is_affine():
    """(A, B) of a segment: from any initial state S, the oracle's final state is A S + B (per head)."""
    inp = _inputs(200, seed=1)
    sh = _shards(inp, [0, 200])[0]
    A, B = cp.segment_maps(**sh, segment_pass=cp.reference_pass)
    S = torch.randn(2, 128, 128, dtype=torch.float64) * 0.1
    _, s_end = cp.reference_pass(**sh, initial=S, scale=None, use_qk_l2norm=False)
    assert ref.rel_err(torch.bmm(A.double(), S) + B.double(), s_end) < 1e-6      # A, B are fp32


@pytest.mark.parametrize("cuts", [[0, 100, 300], [0, 64, 128, 300], [0, 1, 150, 151, 300]])
def test_emulated_ranks_equal_one_sequence(cuts):
    """Ranks emulated in one process (cuts at chunk edges, inside chunks, one-token shards)."""
    inp = _inputs(300, seed=2)
    o_ref, s_ref = ref.chunked(inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], state=inp["state"])
    shards = _shards(inp, cuts)
    shards[0]["initial_states"] = inp["state"]
    outs = [torch.empty(sh["v"].shape, dtype=torch.float64) for sh in shards]
    states = cp.emulate(shards, outs, segment_pass=cp.reference_pass)
    assert ref.rel_err(torch.cat(outs), o_ref) < 1e-6            # A, B in fp32: the composed initial state's rounding
    assert ref.rel_err(states[-1][0].double(), s_ref[0]) < 1e-6


def _packed(lens, cuts, seed=6, Hk=1, Hv=2, device="cpu"):
    """Sequences `lens` packed in one stream, cut into rank shards at `cuts`: each shard's local
    sequence lengths, whether its first continues from the previous shard and its last into the
    next, and the initial states of the sequences that start in it."""
    inp = ref.make_inputs(lens, Hk, Hv, seed=seed, state="dense", l2norm_inputs=True, device=device)
    starts = [sum(lens[:i]) for i in range(len(lens))]
    shards = _shards(inp, cuts)
    for sh, a, b in zip(shards, cuts, cuts[1:]):
        inside = sorted({a, b} | {t for t in starts if a < t < b})
        sh["seq_lens"] = [y - x for x, y in zip(inside, inside[1:])]
        sh["first_continues"] = a not in starts
        sh["last_continues"] = b not in starts and b != sum(lens)
        starting = [inp["state"][i] for i, t in enumerate(starts) if a <= t < b]
        placeholder = [torch.full_like(inp["state"][0], float("nan"))] if sh["first_continues"] else []
        sh["initial_states"] = torch.stack(placeholder + starting)    # the continuing one's is not read
    return inp, shards


@pytest.mark.parametrize("cuts", [[0, 300, 600, 890], [0, 150, 550, 890], [0, 100, 200, 890]])
def test_packed_sequences_across_ranks(cuts):
    """Several sequences per rank (150, 400, 90, 250 tokens packed, cut on and off sequence
    boundaries, a sequence through a whole rank): every sequence's outputs, and its final state on
    the rank where it ends, as the oracle's."""
    lens = [150, 400, 90, 250]
    inp, shards = _packed(lens, cuts)
    o_ref, s_ref = ref.chunked(inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], cu_seqlens=inp["cu_seqlens"],
                               state=inp["state"])
    outs = [torch.empty(sh["v"].shape, dtype=torch.float64) for sh in shards]
    states = cp.emulate(shards, outs, segment_pass=cp.reference_pass)
    assert ref.rel_err(torch.cat(outs), o_ref) < 1e-6
    ends = [sum(lens[:i + 1]) for i in range(len(lens))]
    for n, end in enumerate(ends):
        r = max(i for i, a in enumerate(cuts[:-1]) if a < end)                # the rank holding its last token
        local_ends = [cuts[r] + sum(shards[r]["seq_lens"][:i + 1]) for i in range(len(shards[r]["seq_lens"]))]
        j = local_ends.index(end)
        assert ref.rel_err(states[r][j].double(), s_ref[n]) < 1e-6, (n, r, j)


def test_shard_shapes_are_checked():
    inp = _inputs(64)
    sh = _shards(inp, [0, 64])[0]
    with pytest.raises(ValueError, match="out: must have v's shape"):
        cp.emulate([sh], [torch.empty(63, 2, 128)], segment_pass=cp.reference_pass)
    with pytest.raises(ValueError, match="q: a rank's shard"):
        cp.emulate([{**sh, "q": sh["q"][None]}], [torch.empty(64, 2, 128)], segment_pass=cp.reference_pass)
    with pytest.raises(ValueError, match="seq_lens: positive lengths summing"):
        cp.emulate([{**sh, "seq_lens": [30, 30]}], [torch.empty(64, 2, 128)], segment_pass=cp.reference_pass)
    with pytest.raises(ValueError, match="first_continues"):
        cp.emulate([{**sh, "first_continues": True}], [torch.empty(64, 2, 128)], segment_pass=cp.reference_pass)


def _rank_main(rank, world, T, cuts, device, result_path):
    """One process of the gloo run: its shard through context_parallel_prefill; writes its out
    and state for the parent (the rendezvous through a file of the test's own directory)."""
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method=f"file://{result_path}.store", rank=rank, world_size=world)
    try:
        inp = _inputs(T, seed=4, device=device)
        sh = _shards(inp, cuts)[rank]
        if device == "cpu":
            out = torch.empty(sh["v"].shape, dtype=torch.float64)
            kw = dict(segment_pass=cp.reference_pass)
        else:
            out = torch.empty(sh["v"].shape, dtype=torch.bfloat16, device=device)
            kw = {}
        init = inp["state"] if rank == 0 else None
        s = cp.context_parallel_prefill(**sh, out=out, initial_states=init, **kw)
        torch.save({"out": out.cpu(), "state": s.cpu()}, f"{result_path}.{rank}")
    finally:
        dist.destroy_process_group()


def _two_processes(tmp_path, device, T=260, cuts=(0, 130, 260)):
    path = str(tmp_path / "cp")
    mp.spawn(_rank_main, args=(2, T, list(cuts), device, path), nprocs=2, join=True)
    got = [torch.load(f"{path}.{r}") for r in range(2)]
    inp = _inputs(T, seed=4)
    o_ref, s_ref = ref.chunked(inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], state=inp["state"])
    return torch.cat([g["out"] for g in got]), got[-1]["state"][0], o_ref, s_ref[0]


def test_two_gloo_processes_on_the_cpu(tmp_path):
    """Two processes, one all_gather through gloo: the one-sequence oracle's outputs and state."""
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    out, state, o_ref, s_ref = _two_processes(tmp_path, "cpu")
    assert ref.rel_err(out, o_ref) < 1e-6
    assert ref.rel_err(state.double(), s_ref) < 1e-6


# ----------------------------------------------------------------------------- one Hopper GPU
@pytest.mark.gpu
@pytest.mark.parametrize("T, R", [(4096, 2), (4096, 4), (65536, 2)])
def test_emulated_ranks_on_the_gpu(T, R):
    """R ranks emulated in one process with the prefill kernels, 16/32 heads: outputs and final
    state against the fp64 oracle over the whole sequence (the report records the errors)."""
    inp = ref.make_inputs([T], 16, 32, seed=5, device="cuda", state="dense", l2norm_inputs=True)
    cuts = [T * r // R for r in range(R + 1)]
    shards = _shards(inp, cuts)
    shards[0]["initial_states"] = inp["state"]
    outs = [torch.empty(sh["v"].shape, dtype=torch.bfloat16, device="cuda") for sh in shards]
    states = cp.emulate(shards, outs)
    with torch.device("cuda"):
        o_ref, s_ref = ref.chunked(inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], state=inp["state"])
    e_o = ref.rel_err(torch.cat(outs).double(), o_ref)
    e_s = ref.rel_err(states[-1][0].double(), s_ref[0])
    print(f"\ncontext parallel emulated, T={T} R={R}: o {e_o:.3e}, final state {e_s:.3e}")
    assert e_o <= BOUND and e_s <= BOUND


@pytest.mark.gpu
def test_packed_sequences_across_ranks_on_the_gpu():
    """Packed ranks through the kernels (the sequences that start on a rank in one prefill with
    local cu_seqlens): every sequence's outputs and final state against the fp64 oracle."""
    lens, cuts = [1500, 700, 90, 2100], [0, 1000, 2300, 4390]
    inp, shards = _packed(lens, cuts, Hk=16, Hv=32, device="cuda")
    outs = [torch.empty(sh["v"].shape, dtype=torch.bfloat16, device="cuda") for sh in shards]
    states = cp.emulate(shards, outs)
    with torch.device("cuda"):
        o_ref, s_ref = ref.chunked(inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], cu_seqlens=inp["cu_seqlens"],
                                   state=inp["state"])
    assert ref.rel_err(torch.cat(outs).double(), o_ref) <= BOUND
    ends = [sum(lens[:i + 1]) for i in range(len(lens))]
    for n, end in enumerate(ends):
        r = max(i for i, a in enumerate(cuts[:-1]) if a < end)
        local_ends = [cuts[r] + sum(shards[r]["seq_lens"][:i + 1]) for i in range(len(shards[r]["seq_lens"]))]
        assert ref.rel_err(states[r][local_ends.index(end)].double(), s_ref[n].to("cuda")) <= BOUND, n


@pytest.mark.gpu
def test_two_gloo_processes_on_one_gpu(tmp_path):
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    out, state, o_ref, s_ref = _two_processes(tmp_path, "cuda", T=4096, cuts=(0, 2000, 4096))
    assert ref.rel_err(out.double(), o_ref) <= BOUND
    assert ref.rel_err(state.double(), s_ref) <= BOUND


def test_compose_maps_rejects_host_tensors():
    """The composition kernel's entry checks its tensors before any launch."""
    from gdn_prefill import _ext, errors
    with pytest.raises(errors.GdnArgumentError, match="maps, states: must be on one CUDA device"):
        _ext._compose_maps(torch.zeros(4, 2, 128, 128), torch.zeros(2, 2, 128, 128))


@pytest.mark.gpu
@pytest.mark.parametrize("T, Hv", [(3000, 4), (4096, 32)])
def test_segment_maps_on_the_gpu_are_the_maps_pass(T, Hv):
    """A rank's (A, B) from stage 1 and the MAPS pass (_ext._segment_maps, one launch for both
    chains) against the same maps through two prefill() passes (v = 0 from I, v from 0), and
    against the fp64 oracle: from a random state S, A S + B is the oracle's final state."""
    from gdn_prefill import _ext
    inp = ref.make_inputs([T], Hv // 2, Hv, seed=7, device="cuda", state="dense", l2norm_inputs=True)
    sh = _shards(inp, [0, T])[0]
    out = torch.full(sh["v"].shape, 3.0, dtype=torch.bfloat16, device="cuda")
    A, B, why = _ext._segment_maps(**sh, out=out)
    assert why is None
    A2, B2 = cp.segment_maps(**sh)                       # no out: the two prefill passes
    assert ref.rel_err(A.double(), A2.double()) <= 1e-5 and ref.rel_err(B.double(), B2.double()) <= 1e-5
    assert bool((out == 3.0).all())                      # checked, not written
    S = torch.randn(Hv, 128, 128, dtype=torch.float64, device="cuda") * 0.1
    with torch.device("cuda"):
        _, s_end = cp.reference_pass(**sh, initial=S, scale=None, use_qk_l2norm=False)
    assert ref.rel_err(torch.bmm(A.double(), S) + B.double(), s_end) <= BOUND


@pytest.mark.gpu
def test_segment_maps_of_unaligned_rows_take_the_prefill_passes():
    """Rows the fused plans cannot load by TMA (token stride not a multiple of 8 elements): the
    MAPS pass says why, and segment_maps runs the two prefill() passes, as before it."""
    from gdn_prefill import _ext
    T, Hv = 500, 4
    inp = ref.make_inputs([T], 2, Hv, seed=8, device="cuda", state="dense", l2norm_inputs=True)
    sh = _shards(inp, [0, T])[0]
    wide = torch.zeros(T, 2 * 128 + 3, dtype=torch.bfloat16, device="cuda")
    wide[:, :256] = sh["q"].reshape(T, 256)
    sh["q"] = wide[:, :256].view(T, 2, 128)
    out = torch.empty(sh["v"].shape, dtype=torch.bfloat16, device="cuda")
    A, B, why = _ext._segment_maps(**sh, out=out)
    assert A is None and B is None and why
    A1, B1 = cp.segment_maps(**sh, out=out)
    A2, B2 = cp.segment_maps(**sh)
    assert torch.equal(A1, A2) and torch.equal(B1, B2)


@pytest.mark.gpu
@pytest.mark.parametrize("R", [2, 5])
def test_compose_kernel_is_the_composition(R):
    """compose_gathered on the GPU (compose_f32, three TF32 passes on the tensor cores) against
    the composition in float64: the state each rank starts from."""
    Hv = 4
    gen = torch.Generator(device="cuda").manual_seed(R)
    gathered = [torch.cat([torch.eye(128, device="cuda").expand(1, Hv, 128, 128) * 0.9
                           + 0.02 * torch.randn(1, Hv, 128, 128, device="cuda", generator=gen),
                           torch.randn(1, Hv, 128, 128, device="cuda", generator=gen)]) for _ in range(R)]
    for upto in range(1, R):
        S = cp.compose_gathered(gathered, upto)
        S64 = cp.compose([(g[0].double(), g[1].double()) for g in gathered], upto)
        assert ref.rel_err(S.double(), S64) <= 1e-5, upto
