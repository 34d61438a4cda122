"""gdn_prefill.integrations.transformers on the CPU: which modules it routes, what it puts there,
that leaving restores every original, and (with transformers installed) that a real Qwen3.5
model's prefill reaches our layer with what the model passes.  The launches are routed to
explain() (test_fla_layout.Recorder), so no GPU is needed; tests/test_integration_transformers.py
runs the models on a Hopper GPU, and its harness is checked here with transformers' torch path.
"""
from __future__ import annotations

import sys
import types

import pytest
import torch

from gdn_prefill import errors, fla
from gdn_prefill.integrations import transformers as gdn_tf
from test_fla_layout import Recorder, conv_views, inputs

FUNCTION = gdn_tf.FUNCTION


def _fake_module(name="fake_gdn_modeling"):
    """A model module as transformers writes them: the chunked function and the recurrent one."""
    mod = types.ModuleType(name)

    def torch_chunk_gated_delta_rule(query, key, value, g, beta, chunk_size=64, initial_state=None,
                                     output_final_state=False, use_qk_l2norm_in_kernel=False, **kwargs):
        return "theirs"

    def torch_recurrent_gated_delta_rule(query, key, value, g, beta, initial_state=None, output_final_state=False,
                                         use_qk_l2norm_in_kernel=False, **kwargs):
        return "theirs (decode)"
    mod.torch_chunk_gated_delta_rule = torch_chunk_gated_delta_rule
    mod.torch_recurrent_gated_delta_rule = torch_recurrent_gated_delta_rule
    return mod


@pytest.fixture
def fake(monkeypatch):
    mod = _fake_module()
    monkeypatch.setitem(sys.modules, mod.__name__, mod)
    yield mod
    gdn_tf.disable([mod])


@pytest.fixture
def rec(monkeypatch):
    r = Recorder()
    monkeypatch.setattr(fla, "_ext", r)
    return r


# ----------------------------------------------------------------------------- without transformers
def test_enable_routes_and_disable_restores(fake, rec):
    original, recurrent = fake.torch_chunk_gated_delta_rule, fake.torch_recurrent_gated_delta_rule
    assert gdn_tf.enable([fake]) == [fake.__name__]
    assert gdn_tf.routed() == [fake.__name__]
    assert fake.torch_chunk_gated_delta_rule is not original
    assert fake.torch_recurrent_gated_delta_rule is recurrent          # decode stays theirs
    assert gdn_tf.enable([fake]) == []                                  # already routed
    a = inputs()
    with torch.no_grad():
        o, s = fake.torch_chunk_gated_delta_rule(a["q"], a["k"], a["v"], g=a["g"], beta=a["beta"],
                                                 initial_state=a["initial_state"], output_final_state=True,
                                                 use_qk_l2norm_in_kernel=True, use_cache=True)
    assert len(rec.calls) == 1 and o.shape == a["v"].shape and s.shape == a["initial_state"].shape
    assert gdn_tf.disable() == [fake.__name__]
    assert fake.torch_chunk_gated_delta_rule is original and gdn_tf.routed() == []


def test_context_manager_restores_on_exit_and_on_error(fake):
    original = fake.torch_chunk_gated_delta_rule
    with gdn_tf.enabled([fake.__name__]) as names:
        assert names == [fake.__name__] and fake.torch_chunk_gated_delta_rule is not original
    assert fake.torch_chunk_gated_delta_rule is original
    with pytest.raises(RuntimeError, match="inside"):
        with gdn_tf.enabled([fake]):
            raise RuntimeError("inside")
    assert fake.torch_chunk_gated_delta_rule is original and gdn_tf.routed() == []


def test_context_manager_keeps_routes_made_before_it(fake):
    gdn_tf.enable([fake])
    routed = fake.torch_chunk_gated_delta_rule
    with gdn_tf.enabled([fake]) as names:
        assert names == []
    assert fake.torch_chunk_gated_delta_rule is routed and gdn_tf.routed() == [fake.__name__]


def test_a_function_replaced_again_is_left_alone(fake):
    def someone_elses(*args, **kwargs):
        return "someone else's"
    with gdn_tf.enabled([fake]):
        fake.torch_chunk_gated_delta_rule = someone_elses
        assert gdn_tf.routed() == []
    assert fake.torch_chunk_gated_delta_rule is someone_elses


def test_replacement_passes_the_models_arguments(fake, rec, monkeypatch):
    """The model's call: q, k, v positional, the rest by keyword (its chunk_size consumed, its
    cu_seqlens passed on, the model's other keywords, which the function replaced ignores, left
    out: the FLA layer would refuse them by name); our layer receives them as its own."""
    seen = []
    real = fla.chunk_gated_delta_rule
    monkeypatch.setattr(fla, "chunk_gated_delta_rule", lambda *a, **kw: seen.append((a, kw)) or real(*a, **kw))
    a = {n: (x.flatten(0, 1)[None] if isinstance(x, torch.Tensor) and n != "initial_state" else x)
         for n, x in conv_views(inputs()).items()}
    cu = torch.tensor([0, 70, 140])                                     # int64, as transformers' cu_seq_lens_q
    with gdn_tf.enabled([fake]), torch.no_grad():
        fake.torch_chunk_gated_delta_rule(a["q"], a["k"], a["v"], g=a["g"], beta=a["beta"], chunk_size=64,
                                          initial_state=a["initial_state"], output_final_state=True,
                                          use_qk_l2norm_in_kernel=True, cu_seqlens=cu, use_cache=True,
                                          position_ids=None, max_length_q=70)
    ((args, kw),) = seen
    assert args[:3] == (a["q"], a["k"], a["v"]) and "chunk_size" not in kw
    assert kw["cu_seqlens"] is cu and kw["use_qk_l2norm_in_kernel"] is True
    assert not {"use_cache", "position_ids", "max_length_q"} & set(kw)
    (call,) = rec.calls
    assert call["cu_seqlens"].dtype == torch.int32 and call["q"].is_contiguous()


def test_replacement_refuses_to_run_where_autograd_would_need_a_backward(fake, rec):
    a = inputs()
    q = a["q"].clone().requires_grad_()
    with gdn_tf.enabled([fake]):
        with pytest.raises(errors.GdnArgumentError, match="^q: requires grad.*no_grad"):
            fake.torch_chunk_gated_delta_rule(q, a["k"], a["v"], a["g"], a["beta"])
        with torch.no_grad():
            fake.torch_chunk_gated_delta_rule(q, a["k"], a["v"], a["g"], a["beta"])
    assert len(rec.calls) == 1


def test_modules_that_cannot_be_routed_are_named():
    plain = types.ModuleType("no_gdn_here")
    odd = types.ModuleType("odd_gdn")
    odd.torch_chunk_gated_delta_rule = lambda x, cu_seqlens=None: x
    for mod in (plain, odd):
        with pytest.raises(errors.GdnArgumentError, match=f"^modules: {mod.__name__} defines no {FUNCTION}"):
            gdn_tf.enable([mod])
    with pytest.raises(errors.GdnArgumentError, match="^modules: expected modules"):
        gdn_tf.enable([42])
    assert gdn_tf.routed() == []


def test_importing_the_integration_does_not_import_transformers(tmp_path):
    import subprocess
    code = ("import sys, gdn_prefill.integrations.transformers, gdn_prefill.fla; "
            "assert 'transformers' not in sys.modules, 'imported'")
    # outside the source tree, so that the child imports the installed package (CI installs it
    # without building the extension in the tree)
    subprocess.run([sys.executable, "-c", code], check=True, cwd=tmp_path)


# ----------------------------------------------------------------------------- with transformers
def _transformers():
    return pytest.importorskip("transformers")


def test_finds_the_gdn_modules_of_transformers():
    """qwen3_next and qwen3_5 first, then every other transformers.models module whose source
    defines the function (qwen3_5_moe, olmo_hybrid, ... in 5.23), and none other."""
    _transformers()
    import glob
    import os

    import transformers.models as models
    mods = gdn_tf.gdn_modules()
    names = [m.__name__ for m in mods]
    assert names[:2] == ["transformers.models.qwen3_next.modeling_qwen3_next",
                         "transformers.models.qwen3_5.modeling_qwen3_5"] or names[:2] == [
                         "transformers.models.qwen3_5.modeling_qwen3_5",
                         "transformers.models.qwen3_next.modeling_qwen3_next"]
    root = os.path.dirname(models.__file__)
    defining = {"transformers.models." + os.path.relpath(p, root)[:-3].replace(os.sep, ".")
                for p in glob.glob(os.path.join(root, "*", "modeling_*.py"))
                if f"def {FUNCTION}(" in open(p, encoding="utf-8").read()}
    assert defining <= set(names) and len(defining) >= 2
    assert all(callable(vars(m)[FUNCTION]) for m in mods)


def test_enter_and_exit_restore_every_original(fake):
    """enabled() with discovery: every transformers GDN module and the already-imported fake
    module routed inside; on exit each holds the very object it held before, and the recurrent
    (decode) functions are never touched."""
    _transformers()
    before = {m.__name__: (m, vars(m)[FUNCTION], vars(m).get("torch_recurrent_gated_delta_rule"))
              for m in gdn_tf.gdn_modules()}
    assert fake.__name__ in before
    with gdn_tf.enabled() as names:
        assert set(names) == set(before)
        for name, (m, chunk, rec_fn) in before.items():
            assert vars(m)[FUNCTION] is not chunk and getattr(vars(m)[FUNCTION], "_gdn_prefill_original") is chunk
            assert vars(m).get("torch_recurrent_gated_delta_rule") is rec_fn
    for name, (m, chunk, rec_fn) in before.items():
        assert vars(m)[FUNCTION] is chunk, name
        assert vars(m).get("torch_recurrent_gated_delta_rule") is rec_fn, name
    assert gdn_tf.routed() == []


def _tiny_qwen3_5(dtype=torch.bfloat16):
    import test_integration_transformers as harness
    return harness.tiny_model("qwen3_5", dtype=dtype, device="cpu")


def test_qwen3_5_prefill_reaches_our_layer(rec, monkeypatch):
    """A tiny Qwen3.5 (bf16, CPU) under enabled(): each of its three GDN layers' prefill calls our
    layer with what the model passes (FLA's keywords; the model's own, like use_cache, left out); q, k and v are
    views of the transposed convolution output, each copied once; with the cache, the final
    states are asked for and the cache holds them; a forward with grad enabled is refused."""
    _transformers()
    model = _tiny_qwen3_5()
    seen = []
    real = fla.chunk_gated_delta_rule

    def spy(*args, **kwargs):
        seen.append((fla.explain_copies(*args, **kwargs), kwargs))
        return real(*args, **kwargs)
    monkeypatch.setattr(fla, "chunk_gated_delta_rule", spy)
    ids = torch.randint(0, 1024, (1, 96), generator=torch.Generator().manual_seed(0))
    with gdn_tf.enabled(["transformers.models.qwen3_5.modeling_qwen3_5"]), torch.no_grad():
        out = model(ids, use_cache=True)
    assert len(seen) == len(rec.calls) == 3
    for copies, kw in seen:
        assert set(copies) == {"q", "k", "v"} and "last dim has stride 96" in copies["q"], copies
        assert kw["use_qk_l2norm_in_kernel"] is True and kw["output_final_state"] is True and "use_cache" not in kw
    cache = out.past_key_values
    assert all(cache.layers[i].recurrent_states[0] is not None for i in range(3))
    with gdn_tf.enabled(["transformers.models.qwen3_5.modeling_qwen3_5"]):
        with pytest.raises(errors.GdnArgumentError, match="^q: requires grad"):
            model(ids)


def test_packed_sequences_reach_our_layer_as_cu_seqlens(rec):
    """transformers' packed format (position_ids restarting, cu_seq_lens_q): our layer gets the
    offsets as cu_seqlens, converted to int32, and one state per sequence is not asked for."""
    _transformers()
    import test_integration_transformers as harness
    model = _tiny_qwen3_5()
    ids, kw, _ = harness.packed_batch([37, 50, 13], device="cpu")
    kw["cu_seq_lens_q"] = kw["cu_seq_lens_q"].long()
    with gdn_tf.enabled(["transformers.models.qwen3_5.modeling_qwen3_5"]), torch.no_grad():
        model(ids, use_cache=False, **kw)
    assert len(rec.calls) == 3
    for call in rec.calls:
        assert call["cu_seqlens"].dtype == torch.int32 and call["cu_seqlens"].tolist() == [0, 37, 87, 100]
        assert call["final"] is None


# ----------------------------------------------------------------------------- the GPU tests' harness
def test_harness_paths_and_decoding_on_the_cpu():
    """test_integration_transformers' harness with transformers' torch path on the CPU: gdn_path()
    puts the module's functions back; teacher-forced decoding fed the free run's own tokens gives
    its logits bit for bit; the packed reference keeps the first sequence as a run of its own."""
    _transformers()
    import test_integration_transformers as harness
    mod = harness.modeling("qwen3_5")
    saved = (vars(mod)[FUNCTION], vars(mod)[harness.RECURRENT])
    model = _tiny_qwen3_5()
    (p,) = harness.prompts([30], device="cpu")
    with harness.gdn_path("qwen3_5", "torch"):
        tokens, free = harness.decode(model, p, 6)
        first, forced = harness.decode(model, p, 6, tokens=tokens)
    assert torch.equal(first, tokens) and torch.equal(forced, free)
    assert (vars(mod)[FUNCTION], vars(mod)[harness.RECURRENT]) == saved
    ids, kw, seqs = harness.packed_batch([20, 33], device="cpu")
    with harness.gdn_path("qwen3_5", "torch"):
        packed = harness.logits(model, ids, **kw)
        alone = harness.logits(model, seqs[0])
    with harness.gdn_path("qwen3_5", "zero"):
        zero = harness.logits(model, ids, **kw)
    assert harness.maxabs(packed[:, :20], alone) <= 2 * harness.ulp(alone)
    assert harness.maxabs(zero, packed) > 20 * harness.ulp(packed)   # the GDN layers matter in this model
    assert (vars(mod)[FUNCTION], vars(mod)[harness.RECURRENT]) == saved
