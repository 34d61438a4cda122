"""gdn_prefill.flashinfer_api: FlashInfer 0.7.2's chunk_gated_delta_rule over prefill().

On the CPU, the door's own rules (FlashInfer's arguments this library does not take, types) and
the arguments it hands to prefill() (a shim that records them and runs explain(), the same
validation without a launch: prefill()'s guards then name the door's tensors).  On a Hopper GPU,
the door against prefill() called with the same inputs in our conventions, bit for bit: the swap
of one import changes nothing but the conventions.
"""
from __future__ import annotations

import inspect
import types

import pytest
import torch

import gdn_prefill
from gdn_prefill import errors, flashinfer_api
from gdn_prefill import reference as ref
from conftest import explain_recorder

T, HK, HV, D = 96, 2, 4, 128


def fi_args(device="cpu", pool=False, final=True):
    """A valid FlashInfer-convention call: two sequences, alpha in (0, 1], states [N, Hv, V, K]."""
    gen = torch.Generator().manual_seed(0)
    bf = dict(dtype=torch.bfloat16)
    n = 3 if pool else 2
    a = dict(q=torch.randn(T, HK, D, generator=gen).to(**bf), k=torch.randn(T, HK, D, generator=gen).to(**bf),
             v=torch.randn(T, HV, D, generator=gen).to(**bf), g=torch.rand(T, HV, generator=gen) * 0.5 + 0.5,
             beta=torch.rand(T, HV, generator=gen), initial_state=torch.randn(n, HV, D, D, generator=gen),
             output_final_state=final, cu_seqlens=torch.tensor([0, 40, T], dtype=torch.int32))
    if pool:
        a["state_indices"] = torch.tensor([2, 0], dtype=torch.int32)
        a["output_state"] = torch.zeros(n, HV, D, D)
    return {k: (x.to(device) if isinstance(x, torch.Tensor) else x) for k, x in a.items()}


@pytest.fixture
def recorded(monkeypatch):
    """The door's prefill() calls, recorded and run through explain() (CPU tensors, no launch)."""
    calls = []
    monkeypatch.setattr(flashinfer_api, "_ext", types.SimpleNamespace(prefill=explain_recorder(calls)))
    return calls


def test_signature_is_flashinfers():
    """The parameters of FlashInfer 0.7.2.post1's chunk_gated_delta_rule, in its order, with its
    defaults, so that a caller's keyword and positional arguments mean the same thing."""
    want = [("q", inspect.Parameter.empty), ("k", inspect.Parameter.empty), ("v", inspect.Parameter.empty),
            ("g", None), ("beta", None), ("scale", None), ("initial_state", None), ("output_final_state", False),
            ("cu_seqlens", None), ("use_qk_l2norm_in_kernel", False), ("output", None), ("output_state", None),
            ("state_checkpoints", None), ("checkpoint_cu_starts", None), ("checkpoint_every_n_tokens", 0),
            ("use_cp", "auto"), ("state_indices", None), ("_cp_chunk_len", None), ("backend", "auto"),
            ("max_seqlen", None)]
    got = [(p.name, p.default) for p in inspect.signature(flashinfer_api.chunk_gated_delta_rule).parameters.values()]
    assert got == want


def test_arguments_reach_prefill_in_our_conventions(recorded):
    """alpha -> log(alpha) (fp32 [T, Hv]), the "vk" layout, the initial state read where it is
    (initial_state, the final state into a new [N, Hv, V, K] tensor of its dtype), q / k l2norm,
    max_seqlen passed through; returns (output, final_state)."""
    a = fi_args()
    out, final = flashinfer_api.chunk_gated_delta_rule(**a, use_qk_l2norm_in_kernel=True, max_seqlen=56)
    (args, kw), = recorded
    q, k, v, g, beta, o, state = args
    assert q is a["q"] and k is a["k"] and v is a["v"] and beta is a["beta"] and o is out and state is final
    assert torch.equal(g, a["g"].log())
    assert kw["state_layout"] == "vk" and kw["initial_state"] is a["initial_state"] and kw["has_initial_state"]
    assert kw["use_qk_l2norm"] is True and kw["max_seqlen"] == 56 and kw["cu_seqlens"] is a["cu_seqlens"]
    assert final.shape == (2, HV, D, D) and final.dtype == torch.float32 and out.shape == a["v"].shape


def test_pool_in_place_and_defaults(recorded):
    """With state_indices and output_state given as initial_state: the pool in place (no separate
    initial_state); g and beta None are ones (log 0); int64 cu_seqlens pass to prefill(), which
    converts them on the device (explain()["conversions"]); alpha = 0 is
    floored to a finite log; output_final_state False returns the output alone and binds no state."""
    a = fi_args(pool=True)
    pool = a["initial_state"]
    a["output_state"] = pool
    a["cu_seqlens"] = a["cu_seqlens"].long()
    a["g"][0, 0] = 0.0
    out, st = flashinfer_api.chunk_gated_delta_rule(**a)
    (args, kw), = recorded
    assert st is pool and args[6] is pool and kw["initial_state"] is None and kw["has_initial_state"]
    assert kw["cu_seqlens"] is a["cu_seqlens"]
    assert torch.isfinite(args[3]).all() and args[3][0, 0] == torch.tensor(torch.finfo(torch.float32).tiny).log()
    recorded.clear()
    b = fi_args(final=False)
    b["g"], b["beta"] = None, None
    res = flashinfer_api.chunk_gated_delta_rule(**b)
    (args, kw), = recorded
    assert isinstance(res, torch.Tensor) and args[6] is None
    assert not args[3].any() and bool((args[4] == 1).all())


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float8_e4m3fn])
def test_states_of_every_pool_type_pass_through(recorded, dtype):
    """States of each pool type FlashInfer takes and prefill() takes (bf16, fp16, fp8 e4m3) reach
    prefill() as they are (no conversion), the final state allocated in the initial state's
    dtype, and the pool in place keeps its dtype."""
    if not any(v.endswith("_sf8e4m3") for v in gdn_prefill.compiled_variants()):
        pytest.skip("the fp16 / fp8 pools' builds are not in this build")
    a = fi_args()
    a["initial_state"] = a["initial_state"].to(dtype)
    out, final = flashinfer_api.chunk_gated_delta_rule(**a)
    (args, kw), = recorded
    assert kw["initial_state"] is a["initial_state"] and args[6] is final and final.dtype == dtype
    recorded.clear()
    b = fi_args(pool=True)
    b["initial_state"] = b["output_state"] = b["initial_state"].to(dtype)
    _, st = flashinfer_api.chunk_gated_delta_rule(**b)
    (args, kw), = recorded
    assert st is b["initial_state"] and args[6] is st and kw["initial_state"] is None


@pytest.mark.parametrize("mutate, cls, fragment", [
    (lambda a: {**a, "cu_seqlens": None}, errors.GdnArgumentError, "cu_seqlens: required"),
    (lambda a: {**a, "checkpoint_every_n_tokens": 64}, errors.GdnArgumentError,
     "state_checkpoints: required with checkpoint_every_n_tokens=64"),
    (lambda a: {**a, "state_checkpoints": torch.zeros(1, HV, D, D)}, errors.GdnArgumentError, "state_checkpoints:"),
    (lambda a: {**a, "checkpoint_every_n_tokens": 64, "state_checkpoints": torch.zeros(4, HV, D, D),
                "checkpoint_cu_starts": torch.zeros(a["cu_seqlens"].shape[0], dtype=torch.int32, device="meta")},
     errors.GdnDeviceError, "checkpoint_cu_starts: is on meta but the other tensors are on cpu"),
    (lambda a: {**a, "use_cp": "yes"}, errors.GdnArgumentError, "use_cp: must be"),
    (lambda a: {**a, "use_cp": 1}, errors.GdnArgumentError, "use_cp: must be"),
    (lambda a: {**a, "backend": "cudnn"}, errors.GdnArgumentError, "backend: must be"),
    (lambda a: {**a, "_cp_chunk_len": 512}, errors.GdnArgumentError, "_cp_chunk_len:"),
    (lambda a: {**a, "q": torch.zeros(T, 8, D, dtype=torch.bfloat16), "k": torch.zeros(T, 8, D, dtype=torch.bfloat16)},
     errors.GdnShapeError, "q: 8 q heads for 4 v heads"),
    (lambda a: {**a, "g": a["g"].double()}, errors.GdnDtypeError, "g: the decay factor alpha must be float32"),
    (lambda a: {**a, "output_final_state": 1}, errors.GdnTypeError, "output_final_state: must be a bool"),
    (lambda a: {**a, "q": [1, 2]}, errors.GdnTypeError, "q:"),
    (lambda a: {**a, "state_indices": torch.tensor([2, 0], dtype=torch.int32)}, errors.GdnArgumentError,
     "output_state: required with state_indices"),
    # prefill()'s own guards, naming the door's tensors
    (lambda a: {**a, "v": a["v"].float()}, errors.GdnDtypeError, "v: dtype must be bfloat16"),
    (lambda a: {**a, "g": a["g"][:, :2]}, errors.GdnShapeError, "g:"),
    (lambda a: {**a, "initial_state": a["initial_state"][:, :, :64]}, errors.GdnShapeError, "initial_state:"),
    # FlashInfer also takes float8_e5m2 states; prefill() does not (no e5m2 builds)
    (lambda a: {**a, "initial_state": a["initial_state"].to(torch.float8_e5m2), "output_final_state": False},
     errors.GdnDtypeError, "initial_state: dtype must be float32, bfloat16, float16 or float8_e4m3fn"),
])
def test_rejections_name_the_argument(recorded, mutate, cls, fragment):
    with pytest.raises(cls, match=fragment.replace("(", r"\(")):
        flashinfer_api.chunk_gated_delta_rule(**mutate(fi_args()))


@pytest.mark.gpu
@pytest.mark.parametrize("pool", [False, True], ids=["packed", "pool_in_place"])
def test_swap_matches_prefill_bit_for_bit(pool):
    """The door on CUDA tensors against prefill() on the same inputs in our conventions (log-decay g,
    "vk" states): the same output and final state bits; the initial state untouched where it is not
    the output state; FlashInfer's output buffer used as given."""
    if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("needs a Hopper GPU")
    lens = [700, 64, 3000]
    inp = ref.make_inputs(lens, 2, 4, seed=4, device="cuda", l2norm_inputs=True, state="pool" if pool else "dense",
                          state_layout="vk")
    alpha = inp["g"].exp()
    log_g = torch.clamp_min(alpha, torch.finfo(torch.float32).tiny).log_()
    ours_out = torch.empty_like(inp["v"])
    ours_state = inp["state"].clone()
    gdn_prefill.prefill(inp["q"], inp["k"], inp["v"], log_g, inp["beta"], ours_out, ours_state,
                        cu_seqlens=inp["cu_seqlens"], state_indices=inp["state_indices"], state_layout="vk")
    init = inp["state"].clone()
    output = torch.empty_like(inp["v"])
    kw = dict(state_indices=inp["state_indices"], output_state=init) if pool else {}
    out, final = flashinfer_api.chunk_gated_delta_rule(
        inp["q"], inp["k"], inp["v"], alpha, inp["beta"], initial_state=init, output_final_state=True,
        cu_seqlens=inp["cu_seqlens"], output=output, **kw)
    torch.cuda.synchronize()
    assert out is output and torch.equal(out.view(torch.int16), ours_out.view(torch.int16))
    assert torch.equal(final, ours_state)
    if not pool:
        assert torch.equal(init, inp["state"])


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.float8_e4m3fn])
def test_swap_with_low_precision_states_matches_prefill(dtype):
    """The door with fp16 or fp8 e4m3 states (a pool in place) against prefill() on the same pool
    type: the same output and final state bits, the pool's dtype kept."""
    if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("needs a Hopper GPU")
    inp = ref.make_inputs([700, 64, 3000], 2, 4, seed=6, device="cuda", l2norm_inputs=True, state="pool",
                          state_layout="vk")
    alpha = inp["g"].exp()
    log_g = torch.clamp_min(alpha, torch.finfo(torch.float32).tiny).log_()
    ours_out = torch.empty_like(inp["v"])
    ours_state = inp["state"].to(dtype)
    gdn_prefill.prefill(inp["q"], inp["k"], inp["v"], log_g, inp["beta"], ours_out, ours_state,
                        cu_seqlens=inp["cu_seqlens"], state_indices=inp["state_indices"], state_layout="vk")
    pool = inp["state"].to(dtype)
    out, final = flashinfer_api.chunk_gated_delta_rule(
        inp["q"], inp["k"], inp["v"], alpha, inp["beta"], initial_state=pool, output_final_state=True,
        cu_seqlens=inp["cu_seqlens"], state_indices=inp["state_indices"], output_state=pool)
    torch.cuda.synchronize()
    assert final is pool and final.dtype == dtype
    assert torch.equal(out.view(torch.int16), ours_out.view(torch.int16))
    assert torch.equal(final.view(torch.uint8), ours_state.view(torch.uint8))
