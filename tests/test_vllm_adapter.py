"""gdn_prefill.integrations.vllm without vLLM: the arguments its two calls hand to prefill().

The op's call (chunk_gated_delta_rule: vLLM 0.33's ChunkGatedDeltaRule.forward, FLA's [B, T, H, D]
conventions) and the layer's (prefill_pool: a prefill batch into vLLM's state pool in place) are
called here as vLLM's layer calls them, with prefill() replaced by a recorder that runs explain()
(the same validation, no launch), so prefill()'s guards still name vLLM's tensors.  Also: the
decision of whose kernels run, the entry point in pyproject.toml, and that importing the module
imports no vLLM.  tests/test_vllm_plugin.py checks the plugin inside vLLM (where it is installed);
tests/test_gpu_vllm.py runs both calls on a Hopper GPU against the fp64 oracle.
"""
from __future__ import annotations

import inspect
import logging
import os
import pathlib
import subprocess
import sys

import pytest
import torch

import gdn_prefill
from gdn_prefill import errors
from gdn_prefill.integrations import vllm as gv
from conftest import explain_recorder

T, HK, HV, D = 96, 2, 4, 128
BF = torch.bfloat16


@pytest.fixture
def recorded(monkeypatch):
    """prefill() calls, recorded and run through explain() (CPU tensors, no launch)."""
    calls = []
    monkeypatch.setattr(gdn_prefill, "prefill", explain_recorder(calls))
    return calls


def layer_args(n_slots=5, pool_dtype=torch.bfloat16, seed=0):
    """What vLLM 0.33's Qwen GDN layer passes its op for a prefill batch of two sequences
    (qwen_gdn_linear_attn.py 1812-1836): q, k, v [1, T, H, 128] bf16, contiguous and already
    l2-normed (fused_post_conv_prep, apply_l2norm=True); g log-decay and beta fp32 [1, T, Hv];
    initial_state = ssm_state[prefill_state_indices] in the pool's dtype, [N, Hv, V, K]; FLA's chunk
    tables (which FlashInfer and this op ignore); use_qk_l2norm_in_kernel=False."""
    gen = torch.Generator().manual_seed(seed)
    pool = torch.randn(n_slots, HV, D, D, generator=gen).to(pool_dtype)
    slots = torch.tensor([3, 1], dtype=torch.int32)
    return dict(q=torch.nn.functional.normalize(torch.randn(1, T, HK, D, generator=gen), dim=-1).to(BF),
                k=torch.nn.functional.normalize(torch.randn(1, T, HK, D, generator=gen), dim=-1).to(BF),
                v=torch.randn(1, T, HV, D, generator=gen).to(BF),
                g=torch.nn.functional.logsigmoid(3 + torch.randn(1, T, HV, generator=gen)),
                beta=torch.rand(1, T, HV, generator=gen), initial_state=pool[slots.long()],
                output_final_state=True, cu_seqlens=torch.tensor([0, 40, T], dtype=torch.int32),
                chunk_indices=torch.zeros(3, 2, dtype=torch.int32), chunk_offsets=torch.zeros(3, dtype=torch.int32),
                use_qk_l2norm_in_kernel=False, aiter_prefill_metadata=None)


# ----------------------------------------------------------------------------- the op
def test_signature_is_vllms():
    """vLLM 0.33.0's ChunkGatedDeltaRule.forward_cuda / forward_native parameters, in order, with
    their defaults (qwen_gdn_linear_attn.py 401-416 and 434-449), so that vLLM's keyword and
    positional calls mean the same thing here."""
    e = inspect.Parameter.empty
    want = [("q", e), ("k", e), ("v", e), ("g", e), ("beta", e), ("initial_state", e), ("output_final_state", e),
            ("cu_seqlens", None), ("chunk_indices", None), ("chunk_offsets", None),
            ("use_qk_l2norm_in_kernel", True), ("core_attn_out", None), ("aiter_prefill_metadata", None)]
    params = inspect.signature(gv.chunk_gated_delta_rule).parameters.values()
    got = [(p.name, p.default) for p in params if p.kind != p.KEYWORD_ONLY]
    assert got == want
    assert tuple(n for n, _ in want) == gv.OP_PARAMETERS
    # beyond vLLM's: batch_invariant, keyword-only (the op binds it), so vLLM's calls cannot reach it
    assert [(p.name, p.default) for p in params if p.kind == p.KEYWORD_ONLY] == [("batch_invariant", False)]


@pytest.mark.parametrize("pool_dtype", [torch.float32, torch.bfloat16])
def test_layer_call_reaches_prefill_packed_and_vk(recorded, pool_dtype):
    """The layer's call: q, k, v, g, beta reach prefill() as their [T, ...] row 0 (views: same
    memory, no copy), the state layout "vk", the initial state read where it is (not modified),
    the final state a new [N, Hv, V, K] tensor of the initial state's dtype, no in-kernel l2norm
    (vLLM normed q and k), cu_seqlens as given; returns (o [1, T, Hv, V], final_state)."""
    a = layer_args(pool_dtype=pool_dtype)
    before = a["initial_state"].clone()
    o, final = gv.chunk_gated_delta_rule(**a)
    (args, kw), = recorded
    for x, name in zip(args[:5], ("q", "k", "v", "g", "beta")):
        assert x.shape == a[name].shape[1:] and x.stride() == a[name].stride()[1:]
        assert x.data_ptr() == a[name].data_ptr()
    out, state = args[5], args[6]
    assert out.shape == (T, HV, D) and out.dtype == BF and o.shape == (1, T, HV, D) and o.data_ptr() == out.data_ptr()
    assert state is final and final.shape == (2, HV, D, D) and final.dtype == pool_dtype
    assert kw == dict(cu_seqlens=a["cu_seqlens"], state_layout="vk", use_qk_l2norm=False,
                      initial_state=a["initial_state"], has_initial_state=True, batch_invariant=False)
    assert torch.equal(a["initial_state"], before)


def test_warm_up_call(recorded):
    """The layer's warm-up call (qwen_gdn_linear_attn.py 1350-1413): one sequence of 64 tokens, a
    zero [1, Hv, V, K] state of the pool's dtype, keywords only, no chunk tables."""
    a = layer_args()
    a.update(q=a["q"][:, :64], k=a["k"][:, :64], v=a["v"][:, :64], g=a["g"][:, :64], beta=a["beta"][:, :64],
             initial_state=torch.zeros(1, HV, D, D, dtype=BF), cu_seqlens=torch.tensor([0, 64], dtype=torch.int32),
             chunk_indices=None, chunk_offsets=None)
    o, final = gv.chunk_gated_delta_rule(**a)
    assert o.shape == (1, 64, HV, D) and final.shape == (1, HV, D, D) and len(recorded) == 1


def test_options_map_to_prefill(recorded):
    """use_qk_l2norm_in_kernel=True (FlashInfer's route's flag) -> the kernel's l2norm; no initial
    state -> has_initial_state=False (zero start), an fp32 final state (FLA's dtype) or none;
    int64 cu_seqlens pass through (prefill() converts them on the device)."""
    a = layer_args()
    a.update(use_qk_l2norm_in_kernel=True, initial_state=None, cu_seqlens=a["cu_seqlens"].long())
    o, final = gv.chunk_gated_delta_rule(**a)
    (args, kw), = recorded
    assert kw["use_qk_l2norm"] is True and kw["has_initial_state"] is False and kw["initial_state"] is None
    assert final.dtype == torch.float32 and args[6] is final and kw["cu_seqlens"].dtype == torch.int64
    recorded.clear()
    a["output_final_state"] = False
    o, final = gv.chunk_gated_delta_rule(**a)
    (args, kw), = recorded
    assert final is None and args[6] is None and o.shape == (1, T, HV, D)


def test_core_attn_out_receives_the_output_in_place(recorded):
    """With core_attn_out (any shape, contiguous, v's dtype), the output is its first T * Hv * V
    elements (where vLLM's backends put it): prefill() writes there and o is a view of them."""
    a = layer_args()
    buf = torch.full((T + 8, HV, D), 7.0, dtype=BF)
    o, _ = gv.chunk_gated_delta_rule(**a, core_attn_out=buf.view(-1))
    (args, _), = recorded
    assert args[5].data_ptr() == buf.data_ptr() and args[5].shape == (T, HV, D) and args[5].is_contiguous()
    assert o.data_ptr() == buf.data_ptr() and o.shape == (1, T, HV, D)


def test_rows_of_a_batch_without_cu_seqlens_are_sequences(recorded):
    """Without cu_seqlens, B > 1 rows are B sequences (FLA's rule): [B * T] views, offsets
    0, T, ..., B T made on the device, B initial states."""
    a = layer_args()
    for n in ("q", "k", "v", "g", "beta"):
        a[n] = a[n].view(2, T // 2, *a[n].shape[2:])
    a.update(cu_seqlens=None, chunk_indices=None, chunk_offsets=None)
    o, final = gv.chunk_gated_delta_rule(**a)
    (args, kw), = recorded
    assert args[0].shape == (T, HK, D) and args[0].data_ptr() == a["q"].data_ptr()
    assert kw["cu_seqlens"].tolist() == [0, T // 2, T] and kw["cu_seqlens"].dtype == torch.int32
    assert o.shape == (2, T // 2, HV, D) and final.shape == (2, HV, D, D)


def _bt_swapped(x):
    return x.transpose(0, 1).contiguous().transpose(0, 1)


@pytest.mark.parametrize("mutate, cls, fragment", [
    (lambda a: {**a, "output_final_state": 1}, errors.GdnTypeError, "output_final_state: must be a bool"),
    (lambda a: {**a, "use_qk_l2norm_in_kernel": None}, errors.GdnTypeError, "use_qk_l2norm_in_kernel: must be a bool"),
    (lambda a: {**a, "q": [1, 2]}, errors.GdnTypeError, "q: must be a torch.Tensor"),
    (lambda a: {**a, "q": a["q"][0]}, errors.GdnShapeError, "q: must have 4 dims"),
    (lambda a: {**a, "beta": a["beta"][0]}, errors.GdnShapeError, "beta: must have 3 dims"),
    (lambda a: {**a, "g": a["g"].expand(2, T, HV)}, errors.GdnShapeError, "g: batch size 2, v has 1"),
    (lambda a: {**a, **{n: a[n].expand(2, *a[n].shape[1:]) for n in ("q", "k", "v", "g", "beta")}},
     errors.GdnShapeError, "v: batch size 2 with cu_seqlens"),
    (lambda a: {**a, "cu_seqlens": a["cu_seqlens"][None]}, errors.GdnShapeError, "cu_seqlens: must have 1 dim"),
    (lambda a: {**a, **{n: _bt_swapped(a[n].view(2, T // 2, *a[n].shape[2:])) for n in ("q", "k", "v", "g", "beta")},
                "cu_seqlens": None}, errors.GdnLayoutError, "q: strides"),
    (lambda a: {**a, "core_attn_out": torch.zeros(T * HV * D)}, errors.GdnDtypeError, "core_attn_out: dtype"),
    (lambda a: {**a, "core_attn_out": torch.zeros(HV, T, D, dtype=BF).transpose(0, 1)}, errors.GdnLayoutError,
     "core_attn_out: strides"),
    (lambda a: {**a, "core_attn_out": torch.zeros(T - 1, HV, D, dtype=BF)}, errors.GdnShapeError,
     "core_attn_out: 48640 elements"),
    (lambda a: {**a, "initial_state": "pool"}, errors.GdnTypeError, "initial_state: must be a torch.Tensor"),
    # prefill()'s own guards, naming vLLM's tensors
    (lambda a: {**a, "g": a["g"].bfloat16()}, errors.GdnDtypeError, "g:"),
    (lambda a: {**a, "v": a["v"].float()}, errors.GdnDtypeError, "v:"),
    (lambda a: {**a, "initial_state": a["initial_state"][:, :, :64]}, errors.GdnShapeError, "initial_state:"),
    (lambda a: {**a, "initial_state": a["initial_state"][:1]}, errors.GdnShapeError, "initial_state:"),
])
def test_rejections_name_the_argument(recorded, mutate, cls, fragment):
    with pytest.raises(cls, match="^" + fragment.replace("(", r"\(")):
        gv.chunk_gated_delta_rule(**mutate(layer_args()))


def test_own_rejections_come_before_prefill(recorded):
    with pytest.raises(errors.GdnLayoutError):
        gv.chunk_gated_delta_rule(**layer_args(), core_attn_out=torch.zeros(HV, T, D, dtype=BF).transpose(0, 1))
    assert recorded == []


# ----------------------------------------------------------------------------- the layer
def paged_pool(n_blocks=6, dtype=torch.float32, conv_bytes=6144, pad_bytes=4096):
    """vLLM's ssm_state as the hybrid KV cache binds it (mamba/abstract.py 28-42): a view into
    [n_blocks, page] int8 pages holding the conv state first, then [Hv, V, K]; the slot stride is
    the page's, not Hv * V * K."""
    nbytes = HV * D * D * torch.tensor([], dtype=dtype).element_size()
    pages = torch.zeros(n_blocks, conv_bytes + nbytes + pad_bytes, dtype=torch.int8)
    return pages[:, conv_bytes:conv_bytes + nbytes].view(dtype).view(-1, HV, D, D)


@pytest.mark.parametrize("spec_blocks", [0, 1], ids=["block_table_1col", "spec_decoding_2col"])
def test_pool_call_reaches_prefill_in_place(recorded, spec_blocks):
    """prefill_pool as the layer replacement calls it: the paged pool itself (in place, "vk"), the
    block table's slot column (strided with speculative decoding on: one contiguous copy of its N
    entries; contiguous: as it is), the per-sequence bool mask as it is, the in-kernel l2norm, the
    output rows and max_seqlen as given."""
    a = layer_args()
    pool = paged_pool()
    table = torch.tensor([[4, 9], [2, 9]], dtype=torch.int32)[:, :1 + spec_blocks].contiguous()  # [N, 1 + spec]
    slots = table[:, 0]
    mask = torch.tensor([True, False])
    out = torch.empty(T + 3, HV, D, dtype=BF)[1:T + 1]
    gv.prefill_pool(a["q"][0], a["k"][0], a["v"][0], a["g"][0], a["beta"][0], out, pool, cu_seqlens=a["cu_seqlens"],
                    state_indices=slots, has_initial_state=mask, max_seqlen=56)
    (args, kw), = recorded
    assert args[5] is out and args[6] is pool
    assert (kw["state_indices"] is slots) == (spec_blocks == 0)
    assert kw["state_indices"].is_contiguous() and kw["state_indices"].tolist() == [4, 2]
    assert kw["has_initial_state"] is mask and kw["cu_seqlens"] is a["cu_seqlens"]
    assert kw["state_layout"] == "vk" and kw["use_qk_l2norm"] is True and kw["max_seqlen"] == 56


@pytest.mark.parametrize("switch, want", [(None, False), (False, False), (True, True)])
def test_vllms_batch_invariant_switch_reaches_both_calls(recorded, monkeypatch, switch, want):
    """VLLM_BATCH_INVARIANT, read through vllm.envs as vLLM 0.33 reads it (absent: off), and each
    call's batch_invariant handed to prefill() as given."""
    import types
    envs = types.ModuleType("vllm.envs")
    if switch is not None:
        envs.VLLM_BATCH_INVARIANT = switch
    pkg = types.ModuleType("vllm")
    pkg.envs = envs
    monkeypatch.setitem(sys.modules, "vllm", pkg)
    monkeypatch.setitem(sys.modules, "vllm.envs", envs)
    assert gv.vllm_batch_invariant() is want
    a = layer_args()
    gv.chunk_gated_delta_rule(**a, batch_invariant=want)
    gv.prefill_pool(a["q"][0], a["k"][0], a["v"][0], a["g"][0], a["beta"][0], torch.empty(T, HV, D, dtype=BF),
                    paged_pool(), cu_seqlens=a["cu_seqlens"], state_indices=torch.tensor([4, 2], dtype=torch.int32),
                    has_initial_state=torch.tensor([True, True]), batch_invariant=want)
    assert [kw["batch_invariant"] for _, kw in recorded] == [want, want]
    assert all(e["plan"]["why"].startswith("batch_invariant=True") == want
               for e in (gdn_prefill.explain(*args, **kw) for args, kw in recorded))


def test_pool_call_takes_int64_metadata(recorded):
    """int64 slot indices and offsets (other engines' metadata) pass through unconverted: prefill()
    converts them on the device (explain()["conversions"] says so)."""
    a = layer_args()
    gv.prefill_pool(a["q"][0], a["k"][0], a["v"][0], a["g"][0], a["beta"][0], torch.empty(T, HV, D, dtype=BF),
                    paged_pool(), cu_seqlens=a["cu_seqlens"].long(), state_indices=torch.tensor([4, 2]),
                    has_initial_state=torch.tensor([True, True]))
    (args, kw), = recorded
    assert kw["state_indices"].dtype == torch.int64 and kw["cu_seqlens"].dtype == torch.int64


# ----------------------------------------------------------------------------- whose kernels run
@pytest.mark.parametrize("extra, want", [
    (None, "auto"), ({}, "auto"), ({"gdn_prefill_backend": " GDN_Prefill "}, "gdn_prefill"),
    ({"gdn_prefill_backend": "flashinfer"}, "flashinfer"), ("not a dict", "auto"),
])
def test_requested_backend_is_read_as_vllm_reads_it(extra, want):
    """additional_config["gdn_prefill_backend"], stripped and lower-cased, "auto" when absent
    (qwen_gdn_linear_attn.py 175-181)."""
    class Config:
        additional_config = extra
    assert gv.requested_backend(Config()) == want


def test_decide(caplog):
    """"gdn_prefill" insists (a GdnError naming gdn_prefill_backend where it cannot run); "auto"
    takes ours where it can run, else vLLM's with a WARNING naming why; a backend of vLLM's is
    vLLM's, said once at INFO."""
    why = (errors.GdnDeviceError, "the GPU is sm_100; the kernels are built for sm_90a (H100, H200) only")
    with pytest.raises(errors.GdnDeviceError, match="^gdn_prefill_backend: 'gdn_prefill' was requested .* sm_100"):
        gv.decide("gdn_prefill", why)
    assert gv.decide("gdn_prefill", None) is True and gv.decide("auto", None) is True
    gv._logged.clear()
    with caplog.at_level(logging.INFO, logger="gdn_prefill"):
        assert gv.decide("auto", why) is False and gv.decide("auto", why) is False
        assert gv.decide("triton", None) is False
    assert [(r.levelname, "sm_100" in r.message) for r in caplog.records] == [("WARNING", True), ("INFO", False)]
    assert "'triton' was requested" in caplog.records[1].message


# ----------------------------------------------------------------------------- packaging
def test_entry_point_in_pyproject():
    """The one entry point: vllm.general_plugins -> gdn_prefill.integrations.vllm:register."""
    tomllib = pytest.importorskip("tomllib")
    root = pathlib.Path(__file__).resolve().parents[1]
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["vllm.general_plugins"] == {"gdn_prefill": "gdn_prefill.integrations.vllm:register"}
    assert callable(gv.register)


def test_importing_the_plugin_does_not_import_vllm(tmp_path):
    code = ("import sys, gdn_prefill, gdn_prefill.integrations.vllm as gv; gv.chunk_gated_delta_rule; "
            "assert 'vllm' not in sys.modules, 'imported'")
    # outside the source tree, with the gdn_prefill this process imported on the path (installed,
    # or a source tree with the extension built in place)
    env = {**os.environ, "PYTHONPATH": str(pathlib.Path(gdn_prefill.__file__).resolve().parents[1])}
    subprocess.run([sys.executable, "-c", code], check=True, cwd=tmp_path, env=env)


def test_without_vllm_register_and_the_classes_say_so():
    try:
        import vllm  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("vLLM is installed here (tests/test_vllm_plugin.py covers it)")
    with pytest.raises(ImportError, match="vLLM is not importable"):
        gv.register()
    with pytest.raises(ImportError):
        gv.GdnChunkGatedDeltaRule
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        gv.nothing
