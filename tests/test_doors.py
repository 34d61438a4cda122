"""The doors engines call through, where they differ from FLA and FlashInfer, never failing silently
(issue 70): a per-sequence has_initial_state mask, int64 indices, a checkpoint pool of its own and
FlashInfer's checkpoint buffers, the FLA layer's grad mode and unknown keywords.

The rules run through explain() on CPU tensors (the validation prefill() runs, nothing launched);
tests/test_gpu_doors.py runs the same calls on a Hopper GPU against the fp64 oracle.
"""
from __future__ import annotations

import pytest
import torch

import gdn_prefill
from gdn_prefill import errors, fla, flashinfer_api
from test_guards import D, HV, T, _split, valid


def _pool(**over):
    """A valid pool call (3 slots, sequences in slots 2 and 0) as explain()'s (args, state, kw)."""
    args, state, kw = _split({**valid(pool=True), **over})
    return args, state, kw


def _explain(**over):
    args, state, kw = _pool(**over)
    return gdn_prefill.explain(*args, state, **kw)


# ----------------------------------------------------------------------------- per-sequence mask
def test_a_bool_mask_reads_the_initial_state_per_sequence():
    plan = _explain(has_initial_state=torch.tensor([True, False]))
    assert plan["initial_state"] == "state (in place), per sequence"
    assert plan["conversions"] == []
    args, state, kw = _pool()
    plan = gdn_prefill.explain(*args, None, **kw, initial_state=state, has_initial_state=torch.tensor([0, 1],
                                                                                                        dtype=torch.uint8))
    assert plan["initial_state"] == "initial_state, per sequence"
    assert plan["conversions"] == []
    assert _explain()["initial_state"] == "state (in place)"
    assert _explain(has_initial_state=False)["initial_state"] == "zeros"


def test_integer_masks_and_int64_indices_are_converted_on_the_device():
    """vLLM's and SGLang's metadata as they build it: int64 offsets and slots, an integer mask;
    explain() lists each device conversion prefill() makes, and plans as for int32 and bool."""
    base = _explain(has_initial_state=torch.tensor([True, False]))
    a = valid(pool=True)
    plan = _explain(cu_seqlens=a["cu_seqlens"].long(), state_indices=a["state_indices"].long(),
                    has_initial_state=torch.tensor([1, 0]))
    assert plan["conversions"] == ["cu_seqlens: int64 -> int32", "state_indices: int64 -> int32",
                                   "has_initial_state: int64 -> bool (entry != 0)"]
    assert plan["plan"] == base["plan"] and plan["kernels"] == base["kernels"]
    assert plan["initial_state"] == base["initial_state"]
    plan = _explain(has_initial_state=torch.tensor([1, 0], dtype=torch.int32))
    assert plan["conversions"] == ["has_initial_state: int32 -> bool (entry != 0)"]


@pytest.mark.parametrize("mask,cls,msg", [
    (torch.tensor([True, False, True]), errors.GdnShapeError, "has_initial_state: dim 0 (one entry per sequence"),
    (torch.ones(2, 1, dtype=torch.bool), errors.GdnShapeError, "has_initial_state: must have 1 dims"),
    (torch.tensor([1.0, 0.0]), errors.GdnDtypeError, "has_initial_state: dtype must be bool or uint8, got float32"),
    (torch.tensor([1, 0], dtype=torch.int16), errors.GdnDtypeError, "has_initial_state: dtype must be bool or uint8"),
    ([True, False], errors.GdnTypeError, "has_initial_state: must be a bool or a per-sequence tensor [N]"),
    ("yes", errors.GdnTypeError, "has_initial_state: must be a bool or a per-sequence tensor [N]"),
    (torch.tensor([True, False], device="meta"), errors.GdnDeviceError, "has_initial_state"),
])
def test_mask_rules(mask, cls, msg):
    with pytest.raises(cls) as e:
        _explain(has_initial_state=mask)
    assert msg in str(e.value), str(e.value)


def test_a_mask_sharing_memory_with_an_output_is_refused():
    a = valid(pool=True)
    mask = a["out"].view(torch.uint8).flatten()[:2].view(torch.bool)
    with pytest.raises(errors.GdnAliasError, match="^out: overlaps the memory of has_initial_state"):
        _explain(out=a["out"], has_initial_state=mask)


def test_strided_masks_are_read_where_they_are():
    """A mask that is a view (every other entry of a wider one) is read with its stride: no copy."""
    plan = _explain(has_initial_state=torch.tensor([True, True, False, False])[::2])
    assert plan["conversions"] == [] and plan["initial_state"] == "state (in place), per sequence"


# ----------------------------------------------------------------------------- checkpoint pool
def _ck(**over):
    a = valid(pool=True)
    table = torch.tensor([[0, -1], [1, 2]], dtype=torch.int32)
    pool = torch.zeros(3, HV, D, D)
    return {**a, "checkpoint_every": 64, "checkpoints": table, "checkpoint_pool": pool, **over}


def test_checkpoints_into_a_pool_of_their_own():
    args, state, kw = _split(_ck())
    plan = gdn_prefill.explain(*args, state, **kw)
    assert plan["checkpoints"] == "every 64 tokens, up to 2 per sequence, into checkpoint_pool"
    # no live states in that pool: no state_indices needed, and no state at all
    a = _ck(state_indices=None, state=torch.zeros(2, HV, D, D))
    args, state, kw = _split(a)
    assert gdn_prefill.explain(*args, state, **kw)["checkpoints"].endswith("into checkpoint_pool")
    args, _, kw = _split(_ck(state_indices=None))
    assert gdn_prefill.explain(*args, None, **kw)["state_dtype"] == "float32"
    # the pool's own type picks the builds when no other pool is given
    args, _, kw = _split(_ck(state_indices=None, checkpoint_pool=torch.zeros(3, HV, D, D, dtype=torch.bfloat16)))
    plan = gdn_prefill.explain(*args, None, **kw)
    assert plan["state_dtype"] == "bfloat16" and all(k["name"].endswith("_sbf16") for k in plan["kernels"]
                                                     if "spine" in k["name"] or "single" in k["name"])


def test_checkpoint_pool_as_the_state_pool_is_the_state_pool():
    """Passing the state pool itself as checkpoint_pool is the default: the live-slot rule applies."""
    a = _ck()
    args, state, kw = _split({**a, "checkpoint_pool": a["state"]})
    assert gdn_prefill.explain(*args, state, **kw)["checkpoints"].endswith("into the state pool")
    args, state, kw = _split({**a, "state_indices": None, "state": a["state"][:2], "checkpoint_pool": a["state"][:2]})
    with pytest.raises(errors.GdnArgumentError, match="^checkpoints: need state_indices"):
        gdn_prefill.explain(*args, state, **kw)


@pytest.mark.parametrize("over,cls,msg", [
    (lambda a: {"checkpoint_pool": a["checkpoint_pool"].bfloat16()}, errors.GdnDtypeError,
     "checkpoint_pool: dtype bfloat16 differs from the state pool's float32"),
    (lambda a: {"checkpoint_pool": a["checkpoint_pool"][:, :2]}, errors.GdnShapeError,
     "checkpoint_pool: dim 1 (value heads"),
    (lambda a: {"checkpoint_pool": a["checkpoint_pool"].transpose(2, 3)}, errors.GdnLayoutError, "checkpoint_pool:"),
    (lambda a: {"checkpoint_pool": a["state"][1:]}, errors.GdnAliasError,
     "checkpoint_pool: overlaps the memory of state"),
    (lambda a: {"checkpoint_pool": a["checkpoint_pool"][:1].expand(3, HV, D, D)}, errors.GdnLayoutError,
     "checkpoint_pool:"),
    (lambda a: {"checkpoints": None, "checkpoint_every": None}, errors.GdnArgumentError,
     "checkpoint_pool: given without checkpoints"),
    (lambda a: {"checkpoint_pool": [0]}, errors.GdnTypeError, "checkpoint_pool"),
])
def test_checkpoint_pool_rules(over, cls, msg):
    a = _ck()
    args, state, kw = _split({**a, **over(a)})
    with pytest.raises(cls) as e:
        gdn_prefill.explain(*args, state, **kw)
    assert msg in str(e.value), str(e.value)


# ----------------------------------------------------------------------------- the FLA layer
def _fla_inputs(requires_grad=()):
    gen = torch.Generator().manual_seed(3)
    x = dict(q=torch.randn(1, 64, 2, D, generator=gen).bfloat16(), k=torch.randn(1, 64, 2, D, generator=gen).bfloat16(),
             v=torch.randn(1, 64, 4, D, generator=gen).bfloat16(), g=-torch.rand(1, 64, 4, generator=gen),
             beta=torch.rand(1, 64, 4, generator=gen))
    for n in requires_grad:
        x[n].requires_grad_()
    return x


@pytest.mark.parametrize("name", ["q", "v", "g", "beta"])
def test_the_fla_layer_refuses_inputs_that_require_grad(name):
    """Its outputs would have no autograd history: a training user's gradients would stop at the
    layer without a word.  Under no_grad / inference_mode the same tensors are taken."""
    a = _fla_inputs(requires_grad=(name,))
    with pytest.raises(errors.GdnArgumentError, match=f"^{name}: requires grad.*inference-only"):
        fla.chunk_gated_delta_rule(**a)
    with pytest.raises(errors.GdnArgumentError, match=f"^{name}: requires grad"):
        fla.explain_copies(**a)
    with torch.no_grad():
        assert fla.explain_copies(**a) == {}
    with torch.inference_mode():
        assert fla.explain_copies(**a) == {}


def test_the_fla_layer_refuses_an_initial_state_that_requires_grad():
    a = _fla_inputs()
    h0 = torch.zeros(1, 4, D, D, requires_grad=True)
    with pytest.raises(errors.GdnArgumentError, match="^initial_state: requires grad"):
        fla.explain_copies(**a, initial_state=h0)


@pytest.mark.parametrize("kw", [dict(foo=1), dict(output=torch.empty(1)), dict(out=None), dict(seq_idx=None),
                                dict(cu_seqlen=None), dict(final_state=None)])
def test_the_fla_layer_refuses_keywords_fla_does_not_know(kw):
    """A typo or an engine's output buffer is named, never dropped (even when its value is None)."""
    (name,) = kw
    with pytest.raises(errors.GdnArgumentError, match=f"^{name}: not a keyword of FLA 0.6.0"):
        fla.explain_copies(**_fla_inputs(), **kw)


# ----------------------------------------------------------------------------- FlashInfer's checkpoints
def test_flashinfer_checkpoint_rows_become_the_table():
    """Sequence n's checkpoints are rows cu_starts[n] .. cu_starts[n + 1] - 1 of state_checkpoints;
    -1 past its count.  Lengths 200, 64, 0, 130 at c = 64: 3, 1, 0, 2 checkpoints."""
    lens = [200, 64, 0, 130]
    cu = torch.tensor([0, 200, 264, 264, 394], dtype=torch.int64)
    counts = [n // 64 for n in lens]
    starts = torch.tensor([0, 3, 4, 4, 6], dtype=torch.int64)
    assert starts.diff().tolist() == counts
    buf = torch.zeros(6, HV, D, D)
    table = flashinfer_api._checkpoint_table(starts, buf, cu, 64, 394, torch.device("cpu"))
    assert table.dtype == torch.int32 and table.shape == (4, 6)
    assert table.tolist() == [[0, 1, 2, -1, -1, -1], [3, -1, -1, -1, -1, -1], [-1] * 6, [4, 5, -1, -1, -1, -1]]
    assert flashinfer_api._checkpoint_table(starts.int(), buf, cu, 64, 394, torch.device("cpu")).tolist() == \
        table.tolist()


@pytest.mark.parametrize("every,buf,starts,cls,msg", [
    (64, None, torch.zeros(3, dtype=torch.int32), errors.GdnArgumentError, "state_checkpoints: required"),
    (64, torch.zeros(1, HV, D, D), None, errors.GdnArgumentError, "checkpoint_cu_starts: required"),
    (0, torch.zeros(1, HV, D, D), None, errors.GdnArgumentError, "state_checkpoints: given with "
                                                                  "checkpoint_every_n_tokens=0"),
    (100, torch.zeros(1, HV, D, D), torch.zeros(3, dtype=torch.int32), errors.GdnArgumentError,
     "checkpoint_every_n_tokens: must be 0 or a positive multiple of 64"),
    (True, None, None, errors.GdnTypeError, "checkpoint_every_n_tokens: must be an int"),
    (64, torch.zeros(1, HV, D, D), torch.zeros(2, dtype=torch.int32), errors.GdnShapeError,
     "checkpoint_cu_starts: must be [N + 1] = [3]"),
    (64, torch.zeros(1, HV, D, D), torch.zeros(3), errors.GdnDtypeError, "checkpoint_cu_starts: dtype must be int32"),
])
def test_flashinfer_checkpoint_argument_rules(every, buf, starts, cls, msg):
    a = valid()
    with pytest.raises(cls) as e:
        flashinfer_api.chunk_gated_delta_rule(a["q"], a["k"], a["v"], a["g"].exp(), a["beta"],
                                              cu_seqlens=a["cu_seqlens"], state_checkpoints=buf,
                                              checkpoint_cu_starts=starts, checkpoint_every_n_tokens=every)
    assert msg in str(e.value), str(e.value)


def test_flashinfer_door_names_its_callers_arguments():
    """A rule prefill() applies to the checkpoint pool is reported under FlashInfer's name."""
    e = flashinfer_api._in_flashinfer_names(errors.GdnDtypeError("checkpoint_pool: dtype bfloat16 differs"))
    assert type(e) is errors.GdnDtypeError and str(e) == "state_checkpoints: dtype bfloat16 differs"
    e = errors.GdnShapeError("q: must have 3 dims")
    assert flashinfer_api._in_flashinfer_names(e) is e
