"""`torch.ops.gdn_prefill.prefill`: the custom operator, its fake implementation, torch.compile
and CUDA graphs.

What is honestly testable without a GPU: the registration and schema (which arguments are
mutated), torch.library.opcheck on meta tensors (schema, fake tensor and AOT-dispatch checks,
which run the fake implementation), the fake implementation's validation (every guard case of
test_guards.py rejected at trace time with the same error and message), and torch.compile
with fullgraph=True tracing a module that calls the op on meta tensors (Dynamo graph with the
op, no graph break; the functionalised AOT graph writing `out` and `state` back).  On a Hopper
GPU: opcheck on real tensors, compiled (inductor) output == eager output bitwise, and CUDA
graph capture + replay on fresh inputs == eager bitwise.
"""
from __future__ import annotations

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import gdn_prefill
import gdn_prefill.ops as ops
from gdn_prefill import errors

from test_guards import CASES, _split, guard_ids, valid

NAMES = ("q", "k", "v", "g", "beta", "out", "state", "cu_seqlens")


def _meta(a):
    return {k: (x.to("meta") if isinstance(x, torch.Tensor) else x) for k, x in a.items()}


class Prefill(torch.nn.Module):
    """A module that calls the op and then reads what it wrote."""

    def forward(self, q, k, v, g, beta, out, state, cu_seqlens):
        ops.prefill_op(q, k, v, g, beta, out, state, cu_seqlens=cu_seqlens)
        return out.float() * 2.0, state


# ----------------------------------------------------------------------------- CPU
def test_op_registered_with_mutation_schema():
    op = torch.ops.gdn_prefill.prefill.default
    schema = op._schema
    assert schema.name == "gdn_prefill::prefill"
    assert len(schema.returns) == 0
    written = {a.name for a in schema.arguments if a.alias_info is not None and a.alias_info.is_write}
    assert written == {"out", "state", "workspace", "checkpoint_pool"}
    names = [a.name for a in schema.arguments]
    assert names == ["q", "k", "v", "g", "beta", "out", "state", "cu_seqlens", "state_indices", "state_layout",
                     "scale", "use_qk_l2norm", "spine", "workspace", "checkpoints", "checkpoint_every", "initial_state",
                     "has_initial_state", "max_seqlen", "checkpoint_pool", "has_initial",
                     "batch_invariant"]
    # prefill_op mirrors prefill()'s keyword arguments (less `stream`: the op uses the current one;
    # the op's has_initial is prefill_op's has_initial_state given as a tensor)
    import inspect
    op_params = list(inspect.signature(ops.prefill_op).parameters)
    ext_params = [p for p in inspect.signature(gdn_prefill.prefill).parameters if p != "stream"]
    assert sorted(op_params) == sorted(ext_params)


def _all_args(args, state, kw):
    """The op's 22 arguments in order: none has a default (see gdn_prefill/ops.py)."""
    return (*args, state, kw.get("cu_seqlens"), kw.get("state_indices"), kw.get("state_layout", "kv"),
            kw.get("scale"), kw.get("use_qk_l2norm", False), kw.get("spine", "auto"), kw.get("workspace"),
            kw.get("checkpoints"), kw.get("checkpoint_every"), kw.get("initial_state"), kw.get("has_initial_state", True),
            kw.get("max_seqlen"), kw.get("checkpoint_pool"), kw.get("has_initial"), kw.get("batch_invariant", False))


@pytest.mark.parametrize("pool", [False, True], ids=["per_seq_state", "pool_vk"])
def test_opcheck_on_meta_tensors(pool):
    """torch.library.opcheck's schema, fake-tensor and AOT-dispatch checks (they run the fake impl)."""
    a = _meta(valid("cpu", pool=pool))
    args, state, kw = _split(a)
    if pool:
        kw["state_layout"] = "vk"
    result = torch.library.opcheck(torch.ops.gdn_prefill.prefill.default, _all_args(args, state, kw), {})
    assert set(result.values()) == {"SUCCESS"}, result


@pytest.mark.parametrize("case", CASES, ids=guard_ids())
def test_fake_impl_rejects_like_prefill(case):
    """Under FakeTensorMode (what torch.compile traces with) every guard of the entry point fires
    with the error class and message prefill() raises, aliasing and alignment cases included."""
    _, mutate, cls, fragment = case
    a = mutate(valid("cpu"))
    mode = FakeTensorMode()
    fake = {k: (mode.from_tensor(x) if isinstance(x, torch.Tensor) else x) for k, x in a.items()}
    args, state, kw = _split(fake)
    with pytest.raises(cls) as info:
        with mode:
            ops.prefill_op(*args, state, **kw)
    assert fragment in str(info.value), str(info.value)


def test_fake_impl_accepts_valid_and_strided_inputs():
    from test_guards import _packed_qk

    for a in (valid("cpu"), valid("cpu", pool=True), _packed_qk(valid("cpu"))):
        gb = torch.rand(a["q"].shape[0], 2 * a["g"].shape[1])
        a["g"], a["beta"] = gb[:, 0::2], gb[:, 1::2]
        mode = FakeTensorMode()
        fake = {k: (mode.from_tensor(x) if isinstance(x, torch.Tensor) else x) for k, x in a.items()}
        args, state, kw = _split(fake)
        with mode:
            assert ops.prefill_op(*args, state, **kw) is None


def test_op_on_cpu_tensors_names_the_argument():
    """No device restriction on the op: CPU tensors reach prefill(), which names the argument."""
    args, state, kw = _split(valid("cpu"))
    with pytest.raises(errors.GdnDeviceError, match="q: must be a CUDA tensor"):
        ops.prefill_op(*args, state, **kw)


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_compile_fullgraph_keeps_the_op(dynamic):
    """Dynamo traces a module calling the op with fullgraph=True (no graph break): the op is one
    node of the graph, and the functionalised AOT graph writes `out` and `state` back."""
    from torch._dynamo.backends.common import aot_autograd

    torch._dynamo.reset()
    dynamo_graphs, aot_graphs = [], []

    def fw_compiler(gm, example_inputs):
        aot_graphs.append(gm)
        return gm.forward

    aot = aot_autograd(fw_compiler=fw_compiler)

    def backend(gm, example_inputs):
        dynamo_graphs.append(gm)
        return aot(gm, example_inputs)

    a = _meta(valid("cpu"))
    compiled = torch.compile(Prefill(), fullgraph=True, backend=backend, dynamic=dynamic)
    o2, state = compiled(*(a[n] for n in NAMES))
    assert o2.shape == a["out"].shape and o2.dtype == torch.float32
    assert len(dynamo_graphs) == 1
    calls = [n for n in dynamo_graphs[0].graph.nodes
             if n.op == "call_function" and "gdn_prefill" in str(n.target)]
    assert len(calls) == 1, dynamo_graphs[0].code
    # functionalised: the op runs as auto_functionalized with `out` and `state` as the bases it
    # writes, and the graph returns both new values so that AOT's runtime wrapper copies them
    # back into the inputs (were a mutation undeclared, that value would not be returned)
    gm = aot_graphs[0]
    (af,) = [n for n in gm.graph.nodes if n.op == "call_function" and "auto_functionalized" in str(n.target)]
    assert "gdn_prefill.prefill" in str(af.args[0])
    bases = af.kwargs["_all_bases"]
    assert len(bases) == 2
    assert af.kwargs["_out_base_index"] == 0 and af.kwargs["_state_base_index"] == 1
    assert af.kwargs["_workspace_base_index"] is None
    (output,) = [n for n in gm.graph.nodes if n.op == "output"]
    returned = [getattr(x, "args", ()) for x in output.args[0]]
    assert ((af, 1) in returned) and ((af, 2) in returned), gm.code


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_compile_fullgraph_runs_on_meta(backend):
    torch._dynamo.reset()
    a = _meta(valid("cpu", pool=False))
    o2, _ = torch.compile(Prefill(), fullgraph=True, backend=backend)(*(a[n] for n in NAMES))
    assert o2.device.type == "meta" and o2.shape == a["out"].shape


def test_compile_rejects_bad_arguments_at_trace_time():
    """A bad argument fails the compile with the guard's own message, before anything runs."""
    torch._dynamo.reset()
    a = _meta(valid("cpu"))
    a["g"] = a["g"].bfloat16()
    with pytest.raises(Exception, match="g: dtype must be float32, got bfloat16"):
        torch.compile(Prefill(), fullgraph=True, backend="aot_eager")(*(a[n] for n in NAMES))


def test_torch_export_keeps_the_op():
    a = _meta(valid("cpu"))
    ep = torch.export.export(Prefill(), tuple(a[n] for n in NAMES))
    targets = [str(n.target) for n in ep.graph.nodes if n.op == "call_function"]
    assert any("gdn_prefill.prefill" in t for t in targets), ep.graph


# ----------------------------------------------------------------------------- GPU
def _fresh(seed, pool=False):
    torch.manual_seed(seed)
    a = valid("cuda", pool=pool)
    for n in ("q", "k", "v"):
        a[n] = torch.randn_like(a[n])
    a["g"] = -torch.rand_like(a["g"])
    a["beta"] = torch.rand_like(a["beta"])
    a["state"] = torch.randn_like(a["state"]) * 0.1
    return a


def _eager(a):
    out = torch.full_like(a["out"], float("nan"))
    state = a["state"].clone()
    gdn_prefill.prefill(a["q"], a["k"], a["v"], a["g"], a["beta"], out, state, cu_seqlens=a["cu_seqlens"],
                        state_indices=a.get("state_indices"))
    torch.cuda.synchronize()
    return out, state


def _bits_equal(x, y):
    return torch.equal(x.contiguous().view(torch.uint8), y.contiguous().view(torch.uint8))


@pytest.mark.gpu
def test_gpu_opcheck():
    a = _fresh(1)
    args, state, kw = _split(a)
    result = torch.library.opcheck(torch.ops.gdn_prefill.prefill.default, _all_args(args, state, kw), {})
    assert set(result.values()) == {"SUCCESS"}, result


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_gpu_compiled_matches_eager_bitwise(backend):
    torch._dynamo.reset()
    a = _fresh(2)
    out_ref, state_ref = _eager(a)
    compiled = torch.compile(Prefill(), fullgraph=True, backend=backend)
    out = torch.full_like(a["out"], float("nan"))
    state = a["state"].clone()
    o2, _ = compiled(a["q"], a["k"], a["v"], a["g"], a["beta"], out, state, a["cu_seqlens"])
    torch.cuda.synchronize()
    assert _bits_equal(out, out_ref), "compiled op wrote a different `out`"
    assert _bits_equal(state, state_ref), "compiled op left a different `state`"
    assert torch.equal(o2, out_ref.float() * 2.0)


@pytest.mark.gpu
def test_gpu_cuda_graph_capture_and_replay():
    """Capture one op call; replay on new inputs copied into the static buffers == eager."""
    static = _fresh(3)
    out = torch.full_like(static["out"], float("nan"))
    state = static["state"].clone()
    workspace = torch.empty(gdn_prefill.workspace_bytes(static["q"].shape[0], static["cu_seqlens"].shape[0] - 1,
                                                        static["v"].shape[1]), dtype=torch.uint8, device="cuda")

    def call():
        ops.prefill_op(static["q"], static["k"], static["v"], static["g"], static["beta"], out, state,
                       cu_seqlens=static["cu_seqlens"], workspace=workspace)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        call()  # warm-up (module load) outside capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        call()
    for seed in (4, 5):
        fresh = _fresh(seed)
        for n in ("q", "k", "v", "g", "beta"):
            static[n].copy_(fresh[n])
        state.copy_(fresh["state"])
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        out_ref, state_ref = _eager(fresh)
        assert _bits_equal(out, out_ref), f"replay {seed}: out differs from eager"
        assert _bits_equal(state, state_ref), f"replay {seed}: state differs from eager"
