"""State pools of every element type prefill() takes: fp32, bf16, fp16 and fp8 e4m3 (float8_e4m3fn),
off the GPU.  Every spine is built once per type (cute_kernels/state_pool.py STATE_DTYPES, a suffix
per type), the launcher picks the type's builds for the same plan an fp32 pool gets, explain()
names the type, and each pool argument (state, initial_state; checkpoints go into `state`) takes
every type where it takes bf16.  The rejections are test_guards.py's; the GPU's results against the
fp64 oracle and against the fp32 pool, bit for bit, are test_gpu_prefill.py's.  CPU and "meta"
tensors only."""
from __future__ import annotations

import ast
import os

import pytest
import torch

import gdn_prefill
from gdn_prefill import _ext, _manifest
from gdn_prefill import reference as ref

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# pool type (STATE_DTYPES' key) -> (torch dtype, explain()'s name of it)
POOLS = {"fp32": (torch.float32, "float32"), "bf16": (torch.bfloat16, "bfloat16"),
         "fp16": (torch.float16, "float16"), "fp8e4m3": (torch.float8_e4m3fn, "float8_e4m3fn")}
# the modules whose builds read or write the pool (one build per pool type each)
POOL_MODULES = ("spine_scalar", "spine_wgmma", "spine_rs", "single")


def _state_dtypes_source() -> dict[str, str]:
    """STATE_DTYPES of cute_kernels/state_pool.py as {type: suffix}, read from its source (the
    module imports the DSL, which the installed package need not have)."""
    tree = ast.parse(open(os.path.join(ROOT, "cute_kernels", "state_pool.py")).read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "STATE_DTYPES" for t in node.targets):
            return {k.value: v.elts[0].value for k, v in zip(node.value.keys, node.value.values)}
    raise AssertionError("STATE_DTYPES not found in cute_kernels/state_pool.py")


SUFFIX = _state_dtypes_source()


def _have(pool: str) -> bool:
    return f"spine_rs_o_kv{SUFFIX[pool]}" in _ext.compiled_variants()


def _needs(pool: str):
    if not _have(pool):
        pytest.skip(f"the {pool} pool's builds are not in this build (test_every_pool_type_is_built says so)")


def test_the_pool_types_agree_everywhere():
    """STATE_DTYPES (the builds), the registry's axis (the launcher's tables), the launcher's
    suffixes (its messages), the oracle's types and this file's list: one set of pool types."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("_registry", os.path.join(ROOT, "cute_kernels", "registry.py"))
    reg = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(reg)
    assert list(SUFFIX) == [name for name, _ in reg.AXES["sdt"][1]] == list(POOLS) == list(ref.POOL_DTYPES)
    assert _ext._pool_suffixes() == SUFFIX
    assert {k: v[0] for k, v in ref.POOL_DTYPES.items()} == {k: v[0] for k, v in POOLS.items()}


def test_every_pool_type_is_built():
    """Each build that reads or writes the pool exists for every pool type (the fp32 build's name
    plus the type's suffix), its manifest names its type, and nothing else changes per type."""
    variants = _manifest.load()["variants"]
    compiled = set(_ext.compiled_variants())
    by_type: dict[str, set[str]] = {pool: set() for pool in POOLS}
    for v in variants:
        sdt = v["kwargs"].get("state_dtype")
        if v["module"] in POOL_MODULES:
            assert sdt in POOLS, v["variant"]
            assert v["variant"].endswith(SUFFIX[sdt]) and (sdt != "fp32" or not any(
                v["variant"].endswith(s) for s in SUFFIX.values() if s)), v["variant"]
            by_type[sdt].add(v["variant"][:len(v["variant"]) - len(SUFFIX[sdt])])
        else:
            assert sdt is None, v["variant"]              # stage 1, fwd_o, compose: pool-independent
    assert len(by_type["fp32"]) == 22, sorted(by_type["fp32"])
    for pool in POOLS:
        assert by_type[pool] == by_type["fp32"], pool
        assert {b + SUFFIX[pool] for b in by_type[pool]} <= compiled, pool


def _meta(T, hk, hv):
    def t(*shape, dtype=torch.float32):
        return torch.empty(*shape, dtype=dtype, device="meta")
    bf = torch.bfloat16
    return t(T, hk, 128, dtype=bf), t(T, hk, 128, dtype=bf), t(T, hv, 128, dtype=bf), t(T, hv), t(T, hv), \
        t(T, hv, 128, dtype=bf)


def _pooled(name: str, pool: str) -> str:
    """The build a pool of type `pool` runs where an fp32 pool runs `name`."""
    reads_pool = name.startswith(("spine_", "single_"))
    return name + SUFFIX[pool] if reads_pool else name


# (T, N, Hk, Hv, forced choices): every plan and build of the launcher (the golden record's _builds)
FORCED = [(1024, 64, 4, 8, f) for f in (
    {}, {"fused": 0}, {"fused": 0, "warpgroups": 1}, {"fused": 1}, {"fused": 2}, {"rs_build": 0},
    {"rs_build": 1}, {"rs_build": 2}, {"seg_chunks": 8}, {"spine": "scalar"}, {"state_layout": "vk"},
    {"state_layout": "vk", "fused": 0}, {"state_layout": "vk", "spine": "scalar"}, {"state_layout": "vk", "fused": 2},
    {"state_layout": "vk", "seg_chunks": 8}, {"max_seqlen": 16})] + [(8192, 1, 2, 4, {}), (4096, 4, 16, 32, {})]


@pytest.mark.parametrize("pool", [p for p in POOLS if p != "fp32"])
def test_pool_type_picks_its_builds_of_the_same_plan(pool):
    """Whatever plan and builds an fp32 pool gets, a pool of another type gets the same plan with
    that type's builds of every kernel that touches the pool (the spines, the single plan's
    kernel), and the same stage-1, composition and output builds."""
    _needs(pool)
    for T, n, hk, hv, force in FORCED:
        q, k, v, g, beta, out = _meta(T, hk, hv)
        cu = torch.empty(n + 1, dtype=torch.int32, device="meta")
        names = {}
        for p in ("fp32", pool):
            st = torch.empty(n, hv, 128, 128, dtype=POOLS[p][0], device="meta")
            names[p] = _ext._builds(q, k, v, g, beta, out, st, cu_seqlens=cu, **force)
        assert None not in names[pool], (force, names)
        assert names[pool] == [_pooled(x, pool) for x in names["fp32"]], (force, names)


@pytest.mark.parametrize("pool", list(POOLS))
def test_explain_names_the_pool_type(pool):
    """explain()["state_dtype"] names the pools' type wherever a pool is bound (state, an
    initial_state apart, the initial_state alone, checkpoints into the pool), and the kernels it
    lists are that type's; None without a pool (the fp32 builds run, never touching a pool)."""
    _needs(pool)
    dt, name = POOLS[pool]
    T, n, hk, hv = 4 * 2048, 4, 16, 32
    q, k, v, g, beta, out = _meta(T, hk, hv)
    cu = torch.empty(n + 1, dtype=torch.int32, device="meta")
    si = torch.empty(n, dtype=torch.int32, device="meta")
    P = 2 * n

    def pool_t(slots=n):
        return torch.empty(slots, hv, 128, 128, dtype=dt, device="meta")
    calls = {
        "state": dict(state=pool_t()),
        "state vk": dict(state=pool_t(), state_layout="vk"),
        "initial_state apart": dict(state=pool_t(), initial_state=pool_t()),
        "initial_state alone": dict(initial_state=pool_t()),
        "checkpoints": dict(state=pool_t(P), state_indices=si, checkpoint_every=512,
                            checkpoints=torch.empty(n, 3, dtype=torch.int32, device="meta")),
        "zero start": dict(state=pool_t(), has_initial_state=False),
        "single plan": dict(state=pool_t(), max_seqlen=2048),
        "scalar spine": dict(state=pool_t(), spine="scalar"),
    }
    seen = set()
    for what, kw in calls.items():
        e = gdn_prefill.explain(q, k, v, g, beta, out, kw.pop("state", None), cu_seqlens=cu, **kw)
        assert e["state_dtype"] == name, (what, e["state_dtype"])
        pooled = [x["name"] for x in e["kernels"] if x["name"].startswith(("spine_", "single_"))]
        assert pooled and all(x.endswith(SUFFIX[pool]) for x in pooled), (what, e["kernels"])
        if pool == "fp32":
            assert not any(x.endswith(s) for x in pooled for s in SUFFIX.values() if s), (what, pooled)
        seen.add(e["plan"]["name"])
    assert {"single", "serial", "unfused"} <= seen, seen
    e = gdn_prefill.explain(q, k, v, g, beta, out, None, cu_seqlens=cu)
    assert e["state_dtype"] is None
    assert not any(x["name"].endswith(s) for x in e["kernels"] for s in SUFFIX.values() if s), e["kernels"]


@pytest.mark.parametrize("pool", ["fp16", "fp8e4m3"])
def test_pool_accepted_where_bf16_is(pool):
    """The CPU guard run (explain()) takes an fp16 or fp8 pool in every form it takes a bf16 one,
    on real CPU tensors: state in place, with state_indices and checkpoints, an initial_state pool
    apart or alone, the "vk" layout; and an fp8 pool right next to k in one buffer (the alias rule
    measures a pool in its own 1-byte elements)."""
    _needs(pool)
    from test_guards import HV, _fp8_state_then_k, _split, valid
    dt = POOLS[pool][0]
    for indexed in (False, True):
        a = valid("cpu", pool=indexed)
        a["state"] = a["state"].to(dt)
        args, state, rest = _split(a)
        for extra in (dict(), dict(initial_state=state.clone()), dict(state_layout="vk")):
            assert gdn_prefill.explain(*args, state, **rest, **extra)["state_dtype"] == POOLS[pool][1]
        e = gdn_prefill.explain(*args, None, **rest, initial_state=state.clone())
        assert e["state_dtype"] == POOLS[pool][1] and e["initial_state"] == "initial_state"
    a = valid("cpu", pool=True)
    a["state"] = torch.zeros(3, HV, 128, 128, dtype=dt)
    a.update(state_indices=torch.tensor([1, 0], dtype=torch.int32), checkpoint_every=64,
             checkpoints=torch.tensor([[2, -1], [-1, -1]], dtype=torch.int32))
    args, state, rest = _split(a)
    assert gdn_prefill.explain(*args, state, **rest)["checkpoints"].startswith("every 64 tokens")
    if pool == "fp8e4m3":
        a = _fp8_state_then_k(valid("cpu"), overlap=0)
        args, state, rest = _split(a)
        assert gdn_prefill.explain(*args, state, **rest)["state_dtype"] == "float8_e4m3fn"


def test_rounding_model_of_the_oracle():
    """reference.round_to_pool is the kernels' rounding (round to nearest even; fp8 e4m3
    saturating at +-448, NaN kept; fp16 overflowing to inf) and pool_rounding_bound bounds it."""
    x = torch.tensor([0.1, 447.9, 449.0, 464.0, 480.0, 1e6, float("inf"), -1e6, 2.0 ** -10, 3 * 2.0 ** -10,
                      2.0 ** -9 + 2.0 ** -11])
    f8 = ref.round_to_pool(x, torch.float8_e4m3fn).double()
    assert f8[1:8].abs().tolist() == [448.0] * 7 and f8[7] == -448.0
    # the subnormals' spacing is 2^-9: 0.5 and 1.5 spacings are ties (to even), 1.25 rounds down
    assert f8[8] == 0.0 and f8[9] == 2.0 ** -8 and f8[10] == 2.0 ** -9
    assert ref.round_to_pool(torch.tensor([float("nan")]), torch.float8_e4m3fn).isnan().all()
    assert ref.round_to_pool(torch.tensor([7e4]), torch.float16).isinf().all()
    gen = torch.Generator().manual_seed(0)
    s = torch.randn(2, 4, 128, 128, generator=gen) * 128 ** -0.5
    for name, (dt, u, h, _) in ref.POOL_DTYPES.items():
        r = ref.round_to_pool(s, dt)
        assert r.dtype == dt
        d = (r.double() - s.double()).abs()
        assert bool((d <= torch.clamp_min(s.double().abs() * u, h)).all()), name
        assert ref.rel_err(r.double(), s.double()) <= ref.pool_rounding_bound(s, dt), name
    with pytest.raises(ValueError, match="beyond the finite range"):
        ref.pool_rounding_bound(torch.tensor([500.0]), torch.float8_e4m3fn)
    with pytest.raises(ValueError, match="not a state pool type"):
        ref.round_to_pool(s, torch.float64)
