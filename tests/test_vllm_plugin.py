"""The vLLM plugin inside vLLM (0.33): runs where vLLM is importable, skips elsewhere.

- vLLM's own plugin loader (vllm.plugins.load_general_plugins), through the entry point that
  gdn-prefill's installed metadata declares, replaces vLLM's ChunkGatedDeltaRule op and its
  QwenGatedDeltaNetAttention layer: building them (as vLLM's model code does) gives ours;
- the op is ours where gdn_prefill's kernels can run (a Hopper GPU: stood in for here), vLLM's own
  as vLLM would build it elsewhere or where another backend is asked for, and a GdnError where
  "gdn_prefill" is asked for and cannot run;
- the layer replacement sends a prefill batch (decode rows first, as vLLM orders a mixed batch)
  to prefill() with vLLM's pool itself, its slot indices and per-sequence mask, and the output rows
  of vLLM's buffer; every other batch goes to vLLM's own _forward_core;
- register() is idempotent, names a conflicting plugin, and refuses an op of another signature.

vLLM's functions the layer calls (convolution, decode kernel, post-conv prep) and prefill() are
stood in for by recorders, so this runs on a CPU.  The recorded arguments are checked for what vLLM
passes; whether prefill() takes them is tests/test_vllm_adapter.py's question (it runs them through
explain()), and tests/test_gpu_vllm.py runs the two calls on a Hopper GPU against the fp64 oracle.
The entry-point test needs gdn-prefill installed with its metadata (pip install .).
"""
from __future__ import annotations

import importlib.metadata
import types

import pytest
import torch

vllm = pytest.importorskip("vllm")

import gdn_prefill  # noqa: E402
from gdn_prefill import errors  # noqa: E402
from gdn_prefill.integrations import vllm as gv  # noqa: E402

T, HK, HV, D = 96, 2, 4, 128
BF = torch.bfloat16
PREFIX = "model.layers.0.linear_attn"


def _qwen():
    from vllm.model_executor.layers.mamba.gdn import qwen_gdn_linear_attn as qwen
    return qwen


@pytest.fixture
def fresh_vllm(monkeypatch):
    """vLLM's OOT registries without our classes and its plugin loader not yet run; both put back
    afterwards."""
    import vllm.plugins
    from vllm.model_executor.custom_op import op_registry_oot
    saved = dict(op_registry_oot)
    for key in (gv.OP_CLASS, gv.LAYER_CLASS):
        op_registry_oot.pop(key, None)
    monkeypatch.setattr(vllm.plugins, "plugins_loaded", False)
    monkeypatch.delenv("VLLM_PLUGINS", raising=False)
    monkeypatch.delenv("GDN_PREFILL_VLLM_LAYER", raising=False)
    gv._logged.clear()
    yield op_registry_oot
    op_registry_oot.clear()
    op_registry_oot.update(saved)


def vllm_config(**additional):
    """A vLLM config context for building the op.  ModelConfig needs a model checkpoint, so the
    model config is a stand-in with the fields the op and vLLM's backend resolver read: the GDN
    head dims (qwen_gdn_linear_attn.py 197-202) and the model dtype."""
    from vllm.config import DeviceConfig, VllmConfig, set_current_vllm_config
    from vllm.platforms import current_platform
    cfg = VllmConfig(device_config=DeviceConfig(device="cuda" if current_platform.is_cuda() else "cpu"),
                     additional_config=dict(additional))
    cfg.model_config = types.SimpleNamespace(
        hf_text_config=types.SimpleNamespace(linear_key_head_dim=128, linear_value_head_dim=128), dtype=BF)
    return set_current_vllm_config(cfg)


def why_not():
    with vllm_config() as cfg:
        return gv.why_not_here(cfg)


@pytest.fixture
def recorded(monkeypatch):
    calls = []

    def prefill(*args, **kw):
        calls.append((args, kw))
        return "recorded"
    monkeypatch.setattr(gdn_prefill, "prefill", prefill)
    return calls


# ----------------------------------------------------------------------------- the entry point
def _our_entry_point():
    eps = [ep for ep in importlib.metadata.entry_points(group="vllm.general_plugins") if ep.name == "gdn_prefill"]
    if not eps:
        pytest.skip("gdn-prefill is not installed with its metadata here (pip install .): vLLM cannot find "
                    "its entry point")
    return eps[0]


def test_entry_point_is_installed():
    assert _our_entry_point().value == "gdn_prefill.integrations.vllm:register"


def test_vllms_plugin_loader_makes_vllm_build_ours(fresh_vllm):
    """vllm.plugins.load_general_plugins() (what vLLM runs in its engine, worker and CLI processes)
    loads the entry point; vLLM's model code building ChunkGatedDeltaRule() then gets ours, and
    PluggableLayer's QwenGatedDeltaNetAttention(...) ours too."""
    _our_entry_point()
    from vllm.plugins import load_general_plugins
    qwen = _qwen()
    load_general_plugins()
    assert fresh_vllm[gv.OP_CLASS] is gv.GdnChunkGatedDeltaRule
    assert fresh_vllm[gv.LAYER_CLASS] is gv.GdnQwenGatedDeltaNetAttention
    with vllm_config():
        op = qwen.ChunkGatedDeltaRule()
    assert type(op) is gv.GdnChunkGatedDeltaRule
    if why_not() is None:   # a Hopper GPU: gdn_prefill's kernels
        assert op.gdn_prefill_backend == gv.BACKEND and op._forward_method is gv.chunk_gated_delta_rule
    else:                   # elsewhere: vLLM's own backend, built as vLLM builds it
        assert op.gdn_prefill_backend in ("triton", "flashinfer", "cutedsl", "aiter_flydsl", "sycl")
        assert getattr(op._forward_method, "__func__", None) in (qwen.ChunkGatedDeltaRule.forward_native,
                                                                 qwen.ChunkGatedDeltaRule.forward_cuda)
    layer = qwen.QwenGatedDeltaNetAttention.__new__(qwen.QwenGatedDeltaNetAttention)  # PluggableLayer.__new__
    assert type(layer) is gv.GdnQwenGatedDeltaNetAttention


# ----------------------------------------------------------------------------- the op
def layer_call(pool_dtype=BF):
    """The op's arguments as vLLM's layer passes them for a prefill batch (qwen_gdn_linear_attn.py
    1816-1836): keywords, [1, T, H, D], the gathered initial states in the pool's dtype."""
    gen = torch.Generator().manual_seed(0)
    return dict(q=torch.nn.functional.normalize(torch.randn(1, T, HK, D, generator=gen), dim=-1).to(BF),
                k=torch.nn.functional.normalize(torch.randn(1, T, HK, D, generator=gen), dim=-1).to(BF),
                v=torch.randn(1, T, HV, D, generator=gen).to(BF),
                g=torch.nn.functional.logsigmoid(3 + torch.randn(1, T, HV, generator=gen)),
                beta=torch.rand(1, T, HV, generator=gen), initial_state=torch.randn(2, HV, D, D).to(pool_dtype),
                output_final_state=True, cu_seqlens=torch.tensor([0, 40, T], dtype=torch.int32),
                chunk_indices=None, chunk_offsets=None, use_qk_l2norm_in_kernel=False, aiter_prefill_metadata=None)


def test_where_the_kernels_run_vllms_op_is_ours(fresh_vllm, monkeypatch, recorded):
    """On a Hopper GPU (stood in for: why_not_here -> None) with "auto": the op's backend is
    "gdn_prefill", its forward gdn_prefill's chunk_gated_delta_rule, and vLLM's call through the
    op (CustomOp.forward) reaches prefill() in our conventions."""
    monkeypatch.setattr(gv, "why_not_here", lambda cfg: None)
    gv.register()
    with vllm_config():
        op = _qwen().ChunkGatedDeltaRule()
    assert op.gdn_prefill_backend == gv.BACKEND and op._forward_method is gv.chunk_gated_delta_rule
    a = layer_call()
    o, final = op(**a)
    (args, kw), = recorded
    assert args[6] is final and final.dtype == BF and o.shape == (1, T, HV, D)
    assert kw["state_layout"] == "vk" and kw["initial_state"] is a["initial_state"] and kw["use_qk_l2norm"] is False


def test_vllms_batch_invariant_switch_reaches_prefill(fresh_vllm, monkeypatch, recorded):
    """VLLM_BATCH_INVARIANT=1 (vLLM's deterministic serving, read through vllm.envs): the op built
    under it passes batch_invariant=True to prefill(); without it, False."""
    monkeypatch.setattr(gv, "why_not_here", lambda cfg: None)
    gv.register()
    for value, want in (("1", True), ("0", False)):
        monkeypatch.setenv("VLLM_BATCH_INVARIANT", value)
        assert gv.vllm_batch_invariant() is want
        with vllm_config():
            op = _qwen().ChunkGatedDeltaRule()
        op(**layer_call())
        assert recorded[-1][1]["batch_invariant"] is want


def test_another_backend_asked_for_is_vllms(fresh_vllm, monkeypatch):
    """--gdn-prefill-backend triton (additional_config) keeps vLLM's own op, even where ours could
    run."""
    monkeypatch.setattr(gv, "why_not_here", lambda cfg: None)
    gv.register()
    with vllm_config(gdn_prefill_backend="triton"):
        op = _qwen().ChunkGatedDeltaRule()
    assert op.gdn_prefill_backend == "triton"
    assert op._forward_method.__func__ is _qwen().ChunkGatedDeltaRule.forward_native


def test_gdn_prefill_asked_for_where_it_cannot_run_is_an_error(fresh_vllm):
    reason = why_not()
    if reason is None:
        pytest.skip("a Hopper GPU is visible: the kernels can run here")
    gv.register()
    with vllm_config(gdn_prefill_backend="gdn_prefill"):
        with pytest.raises(reason[0], match="^gdn_prefill_backend: 'gdn_prefill' was requested"):
            _qwen().ChunkGatedDeltaRule()


# ----------------------------------------------------------------------------- the layer
def bare_layer(pool_in_place=True, batch_invariant=False):
    """Our layer class with the attributes _forward_core reads (QwenGatedDeltaNetAttention.__init__
    builds TP linear layers; not needed here; ours adds the two _gdn_ flags), a paged ssm pool and a
    conv state."""
    layer = torch.nn.Module.__new__(gv.GdnQwenGatedDeltaNetAttention)
    torch.nn.Module.__init__(layer)
    conv_dim = 2 * HK * D + HV * D
    nbytes = HV * D * D * 4
    pages = torch.zeros(10, 6144 + nbytes + 4096, dtype=torch.int8)
    ssm = pages[:, 6144:6144 + nbytes].view(torch.float32).view(-1, HV, D, D)
    vars(layer).update(prefix=PREFIX, activation="silu", num_k_heads=HK, tp_size=1, head_k_dim=D, head_v_dim=D,
                       key_dim=HK * D, value_dim=HV * D, _gdn_pool_in_place=pool_in_place,
                       _gdn_batch_invariant=batch_invariant,
                       conv1d=types.SimpleNamespace(weight=torch.zeros(conv_dim, 1, 4), bias=None),
                       A_log=torch.zeros(HV), dt_bias=torch.ones(HV),
                       kv_cache=(torch.zeros(10, conv_dim, 3, dtype=BF), ssm))
    return layer


def mixed_metadata(**changes):
    """GDNAttentionMetadata of a mixed batch as gdn_attn.py builds it without speculative decoding:
    two decodes (1 token each) then prefills of 40 and 56 tokens, the last one fresh; the prefill
    tensors rebased past the decodes (gdn_attn.py 517-576)."""
    from vllm.v1.attention.backends.gdn_attn import GDNAttentionMetadata
    qsl = torch.tensor([0, 1, 2, 42, 98], dtype=torch.int32)
    slots = torch.tensor([7, 8, 3, 1], dtype=torch.int32)
    has = torch.tensor([True, True, True, False])
    md = GDNAttentionMetadata(
        num_prefills=2, num_prefill_tokens=96, num_decodes=2, num_decode_tokens=2, num_spec_decodes=0,
        num_spec_decode_tokens=0, num_actual_tokens=98, has_initial_state=has, non_spec_query_start_loc=qsl,
        non_spec_state_indices_tensor=slots, prefill_query_start_loc=qsl[2:] - 2, prefill_state_indices=slots[2:],
        prefill_has_initial_state=has[2:], nums_dict={8: {"nums": torch.tensor([1, 1, 5, 7])}})
    for k, v in changes.items():
        setattr(md, k, v)
    return md


@pytest.fixture
def vllm_calls(monkeypatch, recorded):
    """The functions the layer calls, by their names in vLLM's module, replaced by recorders; the
    forward context holding the metadata under the layer's name."""
    qwen = _qwen()
    calls = {"prefill": recorded}
    state = {"md": mixed_metadata()}
    monkeypatch.setattr(qwen, "get_forward_context",
                        lambda: types.SimpleNamespace(attn_metadata={PREFIX: state["md"]}))
    monkeypatch.setattr(qwen, "is_conv_state_dim_first", lambda: True)

    def conv(x, weight, bias, **kw):
        calls["conv"] = dict(x=x, **kw)
        return x

    def decode(**kw):
        calls["decode"] = kw
        return torch.full((1, kw["q"].shape[1], HV, D), 7.0, dtype=BF), None

    def prep(**kw):
        calls["prep"] = kw
        L = kw["conv_output"].shape[0]
        return (torch.zeros(L, HK, D, dtype=BF), torch.zeros(L, HK, D, dtype=BF), torch.zeros(L, HV, D, dtype=BF),
                torch.zeros(L, HV), torch.zeros(L, HV))

    def theirs(self, mixed_qkv, b, a, core_attn_out):
        calls["vllm_forward_core"] = (self, mixed_qkv, b, a, core_attn_out)
    monkeypatch.setattr(qwen, "causal_conv1d_fn", conv)
    monkeypatch.setattr(qwen, "fused_sigmoid_gating_delta_rule_update", decode)
    monkeypatch.setattr(qwen, "fused_post_conv_prep", prep)
    monkeypatch.setattr(qwen.QwenGatedDeltaNetAttention, "_forward_core", theirs)
    calls["state"] = state
    return calls


def test_layer_passes_its_batch_invariant_flag(vllm_calls):
    """The flag the layer took from VLLM_BATCH_INVARIANT when built reaches prefill()."""
    layer = bare_layer(batch_invariant=True)
    layer._forward_core(mixed_qkv=torch.randn(100, 2 * HK * D + HV * D).to(BF), b=torch.randn(100, HV).to(BF),
                        a=torch.randn(100, HV).to(BF), core_attn_out=torch.zeros(100, HV, D, dtype=BF))
    (args, kw), = vllm_calls["prefill"]
    assert kw["batch_invariant"] is True


def test_layer_prefill_batch_goes_straight_to_the_pool(vllm_calls):
    """A mixed batch: the convolution over all 98 tokens with the batch's metadata, the 2 decode
    rows through vLLM's recurrent kernel (written to core_attn_out[:2]), the prefill rows through
    fused_post_conv_prep without its l2norm, then one prefill() on vLLM's pool itself with the
    prefill slots, the per-sequence mask, the in-kernel l2norm and the output rows 2:98 of
    core_attn_out; no gather, no scatter, vLLM's own _forward_core not called."""
    layer = bare_layer()
    md = vllm_calls["state"]["md"]
    mixed_qkv = torch.randn(100, 2 * HK * D + HV * D).to(BF)     # 2 padding rows past num_actual_tokens
    a, b = torch.randn(100, HV).to(BF), torch.randn(100, HV).to(BF)
    core = torch.zeros(100, HV, D, dtype=BF)
    layer._forward_core(mixed_qkv=mixed_qkv, b=b, a=a, core_attn_out=core)
    conv = vllm_calls["conv"]
    assert conv["x"].shape == (mixed_qkv.shape[1], 98) and conv["has_initial_state"] is md.has_initial_state
    assert conv["cache_indices"] is md.non_spec_state_indices_tensor and conv["metadata"] is md
    dec = vllm_calls["decode"]
    assert dec["q"].shape == (1, 2, HK, D) and dec["initial_state"] is layer.kv_cache[1]
    assert dec["cu_seqlens"].tolist() == [0, 1, 2] and dec["ssm_state_indices"] is md.non_spec_state_indices_tensor
    assert bool((core[:2] == 7).all()) and bool((core[98:] == 0).all())
    prep = vllm_calls["prep"]
    assert prep["apply_l2norm"] is False and prep["output_g_exp"] is False and prep["conv_output"].shape[0] == 96
    assert torch.equal(prep["a"], a[2:98]) and torch.equal(prep["b"], b[2:98])
    (args, kw), = vllm_calls["prefill"]
    assert args[6] is layer.kv_cache[1] and args[5].data_ptr() == core[2].data_ptr() and args[5].shape == (96, HV, D)
    assert kw["state_indices"] is md.prefill_state_indices and kw["has_initial_state"] is md.prefill_has_initial_state
    assert kw["cu_seqlens"] is md.prefill_query_start_loc and kw["state_layout"] == "vk"
    assert kw["use_qk_l2norm"] is True and kw["max_seqlen"] == 56 and kw["batch_invariant"] is False
    assert "vllm_forward_core" not in vllm_calls


@pytest.mark.parametrize("change", ["spec_decoding", "decode_only", "checkpoint_plan", "vllms_op", "profile_run"])
def test_other_batches_run_vllms_own_forward_core(vllm_calls, change):
    """Speculative decoding, decode-only batches, FlashInfer checkpoint plans, a layer whose op is
    vLLM's own and the profile run (no metadata): vLLM's _forward_core, with the same arguments."""
    state = vllm_calls["state"]
    if change == "spec_decoding":
        state["md"] = mixed_metadata(spec_sequence_masks=torch.tensor([True, False, False, False]))
    elif change == "decode_only":
        state["md"] = mixed_metadata(num_prefills=0)
    elif change == "checkpoint_plan":
        state["md"] = mixed_metadata(flashinfer_checkpoint_plan=object())
    elif change == "profile_run":
        state["md"] = None
    layer = bare_layer(pool_in_place=change != "vllms_op")
    args = (torch.zeros(98, 2 * HK * D + HV * D, dtype=BF), torch.zeros(98, HV), torch.zeros(98, HV),
            torch.zeros(98, HV, D, dtype=BF))
    layer._forward_core(*args)
    seen = vllm_calls["vllm_forward_core"]
    assert seen[0] is layer and all(x is y for x, y in zip(seen[1:], args))
    assert vllm_calls["prefill"] == [] and "conv" not in vllm_calls


# ----------------------------------------------------------------------------- register()
def test_register_is_idempotent_and_names_a_conflicting_plugin(fresh_vllm):
    gv.register()
    gv.register()     # vLLM may load plugins more than once per process
    assert fresh_vllm[gv.OP_CLASS] is gv.GdnChunkGatedDeltaRule
    fresh_vllm.pop(gv.OP_CLASS)
    fresh_vllm[gv.OP_CLASS] = type("TheirChunkGatedDeltaRule", (), {})
    with pytest.raises(errors.GdnArgumentError, match="^VLLM_PLUGINS: vLLM's ChunkGatedDeltaRule is already replaced"):
        gv.register()


def test_register_refuses_an_op_of_another_signature(fresh_vllm, monkeypatch):
    monkeypatch.setattr(_qwen().ChunkGatedDeltaRule, "forward_cuda", lambda self, q, k, v: None)
    with pytest.raises(errors.GdnArgumentError, match=r"^VLLM_PLUGINS: vLLM .*takes \('q', 'k', 'v'\)"):
        gv.register()
    assert gv.OP_CLASS not in fresh_vllm


@pytest.mark.parametrize("how", ["env", "version"])
def test_layer_left_to_vllm(fresh_vllm, monkeypatch, how):
    """GDN_PREFILL_VLLM_LAYER=0, or a vLLM other than 0.33.x (whose _forward_core the layer mirrors):
    the op alone is replaced."""
    if how == "env":
        monkeypatch.setenv("GDN_PREFILL_VLLM_LAYER", "0")
    else:
        monkeypatch.setattr(vllm, "__version__", "0.34.0")
    gv.register()
    assert fresh_vllm[gv.OP_CLASS] is gv.GdnChunkGatedDeltaRule and gv.LAYER_CLASS not in fresh_vllm
