"""A generated sweep of malformed calls: one property of one argument changed at a time.

From one valid call (test_guards.valid(): two sequences, GVA 2 -> 4 heads, a state), every
argument of prefill(), explain(), chunk_gated_delta_rule(), ops.prefill_op() and the raw
torch.ops.gdn_prefill.prefill gets each mutation that applies to it: not a tensor (None, a
list, an int, a str, a numpy array), sparse, quantized, the wrong dtype, one dim more / less /
none, each extent off by one, the last dim strided, a view one element into a larger buffer,
another device; for the outputs expand()ed and overlapping strides; for the workspace too
small, the wrong dtype, strided, misaligned and sharing bytes with each tensor; for the other
arguments values of the wrong type and out-of-range values.

The rule each call is judged by: it is a valid call (explain() returns its plan), or it
raises a GdnError subclass whose message names the argument (chunk_gated_delta_rule: the
layer's own names, initial_state for the state).  A mutation of the "type" kind (an object of
the wrong kind) must raise GdnTypeError, at every entry point, before anything device-related:
so on a CPU-only machine prefill(), the FLA layer and prefill_op reject them from CPU tensors.
The other mutations run through explain() (the validation prefill() runs, on CPU tensors),
through the FLA layer with its prefill() call routed to explain(), and through the torch op
under FakeTensorMode (its fake implementation runs the same validation): each must give the
outcome explain() gives.  With a Hopper GPU the same tables run through prefill(), the FLA layer
and the op on CUDA tensors: a rejected call leaves every byte of `out` and `state` untouched,
and a call explain() accepts runs.

sweep_counts() returns the number of mutations per entry point and argument (benchmarks and
reports call it); test_sweep_covers_every_argument requires at least five for every argument.
"""
from __future__ import annotations

import inspect
import re
import types
import warnings
from dataclasses import dataclass, replace
from typing import Any, Callable, Optional

import numpy as np
import pytest
import torch

import gdn_prefill
import gdn_prefill.ops as ops
from conftest import offset_view
from gdn_prefill import errors, fla
from test_guards import D, HV, T, _split, valid

TENSORS = ("q", "k", "v", "g", "beta", "out", "state", "cu_seqlens", "state_indices", "workspace", "checkpoints",
           "initial_state", "checkpoint_pool", "has_initial_state")
# the raw op's name of a tensor argument prefill() names otherwise (its per-sequence mask; the
# schema's has_initial_state is the bool for every sequence)
OP_NAMES = {"has_initial_state": "has_initial"}
REQUIRED = ("q", "k", "v", "g", "beta", "out")
FLA_TENSORS = ("q", "k", "v", "g", "beta", "initial_state", "cu_seqlens")
ENTRIES = ("explain", "prefill", "prefill_op", "torch_op", "chunk_gated_delta_rule")

# dtypes each tensor does not take (the workspace: any but uint8)
WRONG_DTYPES = {
    "q": (torch.float32, torch.float16), "k": (torch.float32, torch.float16),
    "v": (torch.float32, torch.float16), "out": (torch.float32, torch.float16),
    "g": (torch.bfloat16, torch.float64), "beta": (torch.float16, torch.float64),
    "state": (torch.float16, torch.float64), "initial_state": (torch.bfloat16, torch.int32),
    # (int64 cu_seqlens and state_indices are taken: converted on the device, tests/test_doors.py)
    "cu_seqlens": (torch.int16, torch.float32), "state_indices": (torch.int16, torch.uint8),
    "workspace": (torch.float32, torch.int8), "checkpoints": (torch.int64, torch.float32),
    "checkpoint_pool": (torch.bfloat16, torch.float64), "has_initial_state": (torch.float32, torch.int16),
}
FLA_WRONG_DTYPES = {**WRONG_DTYPES, "g": (torch.bfloat16, torch.int32)}


# ----------------------------------------------------------------------------- the table
@dataclass(frozen=True)
class Mutation:
    """One argument changed in one way.  kind "type": an object of the wrong kind (GdnTypeError
    everywhere); "ok": a value the call takes (it must be accepted); "value": anything else
    (valid, or a GdnError naming the argument)."""
    arg: str
    what: str
    kind: str
    make: Callable[[dict], dict]      # the valid arguments -> the arguments with `arg` changed
    base: str = "seq"                 # "seq": a state per sequence; "pool": a state pool + indices;
                                      # "ck": the pool with a checkpoint table (checkpoint_every=64);
                                      # "ckp": "ck" with a checkpoint_pool of its own;
                                      # "mask": "pool" with a per-sequence has_initial_state;
                                      # "init": "seq" with an initial_state read instead of state

    @property
    def id(self) -> str:
        return f"{self.base}:{self.arg}.{self.what}"

    def tensor_valued(self, a: dict) -> bool:
        """The changed value is a tensor, or None for an optional tensor argument (what the raw
        op's schema takes: its own parser rejects anything else before our code)."""
        if self.arg not in TENSORS:
            return False
        x = a.get(self.arg)
        if self.arg == "has_initial_state":      # None is no mask to the op, no flag to prefill()
            return isinstance(x, torch.Tensor)
        return isinstance(x, torch.Tensor) or (x is None and self.arg not in REQUIRED)


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _fresh(x: torch.Tensor, shape, name: str) -> torch.Tensor:
    """A new tensor like x (dtype, device) with `shape`, holding values a valid call would."""
    n = shape[0] if len(shape) else 1
    if name == "cu_seqlens":
        y = torch.linspace(0, T, max(n, 1)).round().to(torch.int32)[:n].reshape(shape)
    elif name == "state_indices":
        y = torch.tensor([1, 0, 2, 1][:n], dtype=torch.int32).reshape(shape) if n <= 4 else torch.zeros(shape)
    elif x.dtype.is_floating_point:
        y = torch.randn(tuple(shape), generator=_gen(1))
        y = -y.abs() if name == "g" else y
    else:
        y = torch.zeros(tuple(shape))
    return y.to(dtype=x.dtype, device=x.device)


def _resized(x: torch.Tensor, dim: int, delta: int, name: str) -> torch.Tensor:
    shape = list(x.shape)
    shape[dim] += delta
    return _fresh(x, shape, name)


def _strided_last(x: torch.Tensor) -> torch.Tensor:
    """x's values in a view whose last dim has stride 2."""
    buf = torch.zeros(*x.shape[:-1], 2 * x.shape[-1], dtype=x.dtype, device=x.device)
    buf[..., ::2] = x
    return buf[..., ::2]


def _quantized(x: torch.Tensor) -> torch.Tensor:
    qt = torch.quint8 if x.dtype == torch.uint8 else torch.qint8
    try:
        return torch.quantize_per_tensor(x.float(), 0.1, 0, qt)
    except (RuntimeError, NotImplementedError):  # no quantized kernels on this device: a CPU one
        return torch.quantize_per_tensor(x.float().cpu(), 0.1, 0, qt)


def _as_strided(x: torch.Tensor, stride) -> torch.Tensor:
    """A view with x's shape and `stride` over a zeroed buffer just large enough."""
    extent = 1 + sum((n - 1) * s for n, s in zip(x.shape, stride))
    return torch.zeros(extent, dtype=x.dtype, device=x.device).as_strided(tuple(x.shape), tuple(stride))


def _aligned_bytes(n: int, device, align: int = 256) -> torch.Tensor:
    """n zeroed bytes whose storage begins `align`-aligned, as a CUDA allocation does (the op's
    fake implementation places storages so; torch's CPU allocator aligns to 64 bytes only, so on
    the CPU the storage is an aligned slice of a numpy buffer)."""
    if torch.device(device).type == "cpu":
        buf = np.zeros(n + align, np.uint8)
        off = (-buf.ctypes.data) % align
        return torch.from_numpy(buf[off:off + n])
    buf = torch.zeros(n + align, dtype=torch.uint8, device=device)
    off = (-buf.data_ptr()) % align
    return buf[off:off + n]


def _ws_need(a: dict, which=max) -> int:
    N = a["cu_seqlens"].shape[0] - 1
    return which(gdn_prefill.workspace_bytes(T, N, HV, fused=f) for f in (True, False))


def _inside_workspace(a: dict, name: str) -> dict:
    """`name` moved into the first bytes of a workspace (same values, shape and strides)."""
    x = a[name]
    nbytes = x.numel() * x.element_size()
    ws = _aligned_bytes(max(_ws_need(a), nbytes), x.device)
    moved = ws[:nbytes].view(x.dtype).view(x.shape)
    moved.copy_(x)
    return {**a, name: moved, "workspace": ws}


def _set(name: str, fn: Callable[[Any, dict], Any]) -> Callable[[dict], dict]:
    return lambda a: {**a, name: fn(a[name], a)}


def _const(name: str, value: Any) -> Callable[[dict], dict]:
    return lambda a: {**a, name: value}


def _sample(name: str, a: dict) -> torch.Tensor:
    """The argument's valid value (the workspace, None in the valid call: one of the right size)."""
    return a[name] if name != "workspace" else _aligned_bytes(_ws_need(a), a["q"].device)


def _not_tensors(name: str, required: bool, base: str) -> list[Mutation]:
    """Objects of the wrong kind: no tensor at all, or not a dense one."""
    def put(fn):
        return lambda a: {**a, name: fn(_sample(name, a))}
    m = [Mutation(name, "None", "type", _const(name, None), base)] if required else []
    m += [
        Mutation(name, "list", "type", _const(name, [1, 2, 3]), base),
        Mutation(name, "int", "type", _const(name, 7), base),
        Mutation(name, "str", "type", _const(name, name), base),
        Mutation(name, "numpy", "type", put(lambda x: np.zeros(tuple(x.shape), np.float32)), base),
        Mutation(name, "sparse", "type", put(lambda x: x.to_sparse()), base),
        Mutation(name, "quantized", "type", put(_quantized), base),
    ]
    return m


def tensor_mutations(name: str, rank: int, *, required: bool, base: str = "seq",
                     dtypes=WRONG_DTYPES) -> list[Mutation]:
    """The mutations every tensor argument gets (rank: its rank in the valid call)."""
    m = _not_tensors(name, required, base)
    if not required:
        m.append(Mutation(name, "None", "value", _const(name, None), base))
    for dt in dtypes[name]:
        m.append(Mutation(name, f"dtype.{str(dt)[6:]}", "value", _set(name, lambda x, a, dt=dt: x.to(dt)), base))
    m.append(Mutation(name, "rank+1", "value", _set(name, lambda x, a: x.unsqueeze(0)), base))
    if rank > 1:
        m.append(Mutation(name, "rank-1", "value", _set(name, lambda x, a: x[0]), base))
    m.append(Mutation(name, "rank0", "value", _set(name, lambda x, a: x.flatten()[0]), base))
    for dim in range(rank):
        for delta in (-1, 1):
            m.append(Mutation(name, f"dim{dim}{delta:+d}", "value",
                              _set(name, lambda x, a, dim=dim, delta=delta: _resized(x, dim, delta, name)), base))
    m += [
        Mutation(name, "last_dim_strided", "value", _set(name, lambda x, a: _strided_last(x)), base),
        Mutation(name, "offset_view", "value", _set(name, lambda x, a: offset_view(x)), base),
        Mutation(name, "device.meta", "value", _set(name, lambda x, a: x.to("meta")), base),
    ]
    return m


def _output_mutations(base: str) -> list[Mutation]:
    """Outputs whose elements share memory, and legal padded strides."""
    blk = D * D
    return [
        Mutation("out", "expand_tokens", "value", _set("out", lambda x, a: x[:1].expand_as(x)), base),
        Mutation("out", "expand_heads", "value", _set("out", lambda x, a: x[:, :1].expand_as(x)), base),
        Mutation("out", "token_stride_overlaps", "value",
                 _set("out", lambda x, a: _as_strided(x, ((HV - 1) * D + 64, D, 1))), base),
        Mutation("out", "head_stride_overlaps", "value", _set("out", lambda x, a: _as_strided(x, (HV * D, 64, 1))),
                 base),
        Mutation("out", "padded_strides", "value",
                 _set("out", lambda x, a: _as_strided(x, (HV * (D + 8) + 16, D + 8, 1))), base),
        Mutation("out", "is_v", "value", lambda a: {**a, "out": a["v"]}, base),
        Mutation("state", "expand_slots", "value", _set("state", lambda x, a: x[:1].expand_as(x)), base),
        Mutation("state", "expand_heads", "value", _set("state", lambda x, a: x[:, :1].expand_as(x)), base),
        Mutation("state", "head_stride_below_block", "value",
                 _set("state", lambda x, a: _as_strided(x, (HV * blk, blk - D, D, 1))), base),
        Mutation("state", "slot_stride_is_head_stride", "value",
                 _set("state", lambda x, a: _as_strided(x, (blk, blk, D, 1))), base),
        Mutation("state", "transposed_blocks", "value", _set("state", lambda x, a: x.transpose(2, 3)), base),
        Mutation("state", "padded_strides", "value",
                 _set("state", lambda x, a: _as_strided(x, (HV * (blk + 4) + 8, blk + 4, D, 1))), base),
    ]


def _workspace_mutations() -> list[Mutation]:
    def ws(fn):
        return lambda a: {**a, "workspace": fn(a)}
    dev = lambda a: a["q"].device  # noqa: E731
    m = _not_tensors("workspace", False, "seq")
    m += [
        Mutation("workspace", "exact", "value", ws(lambda a: _aligned_bytes(_ws_need(a), dev(a)))),
        Mutation("workspace", "rank2", "value", ws(lambda a: _aligned_bytes(2 * _ws_need(a), dev(a)).view(2, -1))),
        Mutation("workspace", "too_small", "value", ws(lambda a: _aligned_bytes(_ws_need(a, min) - 1, dev(a)))),
        Mutation("workspace", "empty", "value", ws(lambda a: torch.empty(0, dtype=torch.uint8, device=dev(a)))),
        Mutation("workspace", "strided", "value",
                 ws(lambda a: _aligned_bytes(2 * _ws_need(a), dev(a))[::2])),
        Mutation("workspace", "misaligned", "value", ws(lambda a: _aligned_bytes(_ws_need(a) + 1, dev(a))[1:])),
        Mutation("workspace", "rank0", "value", ws(lambda a: torch.zeros((), dtype=torch.uint8, device=dev(a)))),
        Mutation("workspace", "rank5", "value",
                 ws(lambda a: _aligned_bytes(_ws_need(a), dev(a)).view(1, 1, 1, 1, -1))),
        Mutation("workspace", "device.meta", "value",
                 ws(lambda a: torch.empty(_ws_need(a), dtype=torch.uint8, device="meta"))),
    ]
    for dt in WRONG_DTYPES["workspace"]:
        m.append(Mutation("workspace", f"dtype.{str(dt)[6:]}", "value",
                          ws(lambda a, dt=dt: _aligned_bytes(_ws_need(a), dev(a)).view(dt))))
    for name in ("q", "k", "v", "g", "beta", "out", "state", "cu_seqlens"):
        m.append(Mutation("workspace", f"overlaps_{name}", "value", lambda a, name=name: _inside_workspace(a, name)))
    m.append(Mutation("workspace", "overlaps_state_indices", "value",
                      lambda a: _inside_workspace(a, "state_indices"), "pool"))
    return m


def _scalars(name: str, types_: list, values: list, oks: list) -> list[Mutation]:
    """A non-tensor argument: values of the wrong type, wrong values of the right one, values it takes."""
    return [Mutation(name, f"{type(v).__name__}={v!r}", kind, _const(name, v))
            for kind, vs in (("type", types_), ("value", values), ("ok", oks)) for v in vs]


def _option_mutations() -> list[Mutation]:
    return (
        _scalars("scale", ["0.1", [0.1], True, 1j, b"1", torch.tensor(0.1)],
                 [float("inf"), float("-inf"), float("nan"), 1e39], [0.0, -0.5, 1, np.float32(0.25), None])
        + _scalars("use_qk_l2norm", ["yes", 2, [True], None, 1.5, -1], [], [True, 1, 0, np.bool_(True)])
        + _scalars("batch_invariant", ["yes", 2, [True], None, 1.5, -1], [], [True, 1, 0, np.bool_(True)])
        + _scalars("spine", [1, None, b"auto", ["auto"]], ["mma", "", "AUTO", "scalar "], ["scalar", "wgmma"])
        + _scalars("state_layout", [0, None, b"kv", ["kv"]], ["kvv", "KV", ""], ["vk"])
        + _scalars("stream", ["0", 1.5, [0], True, object()], [], [0, None])
    )


# Tensor mutations that are valid calls: element-aligned views (the scalar spine's loads take any
# 2-byte aligned base), g / beta with any strides, padded strides, no state, a pool one slot
# shorter or longer (slots [1, 0] stay in range), a workspace that fits.
PREFILL_VALID = (
    {f"seq:{n}.offset_view" for n in ("q", "k", "v", "g", "beta", "out", "cu_seqlens")}
    | {"mask:has_initial_state.offset_view", "mask:has_initial_state.last_dim_strided",
       "ckp:checkpoint_pool.None", "ckp:checkpoint_pool.dim0-1", "ckp:checkpoint_pool.dim0+1",
       "pool:state_indices.offset_view", "seq:g.last_dim_strided", "seq:beta.last_dim_strided", "seq:state.None",
       "pool:state.dim0-1", "pool:state.dim0+1", "seq:out.padded_strides", "seq:state.padded_strides",
       "pool:state.padded_strides", "seq:workspace.exact", "seq:workspace.rank2",
       "ck:checkpoints.dim1-1", "ck:checkpoints.dim1+1", "ck:checkpoints.offset_view", "init:initial_state.None"}
)
# The FLA layer also converts g to float32, cu_seqlens to int32 and copies initial_state (fp32).
FLA_VALID = (
    {f"seq:{n}.offset_view" for n in ("q", "k", "v", "g", "beta", "initial_state", "cu_seqlens")}
    | {"seq:g.last_dim_strided", "seq:beta.last_dim_strided", "seq:g.dtype.bfloat16", "seq:cu_seqlens.dtype.int16",
       "seq:initial_state.None", "seq:initial_state.dtype.bfloat16", "seq:initial_state.dtype.int32",
       "seq:initial_state.last_dim_strided", "seq:initial_state.expand_heads"}
)


def _valid_marked(table: list[Mutation], valid_ids: set) -> list[Mutation]:
    assert valid_ids <= {x.id for x in table}, valid_ids - {x.id for x in table}
    return [replace(x, kind="ok") if x.id in valid_ids else x for x in table]


def _mask_mutations() -> list[Mutation]:
    """has_initial_state as a per-sequence tensor: the tensor mutations, and the integer masks
    prefill() converts on the device (valid)."""
    m = [x for x in tensor_mutations("has_initial_state", 1, required=False, base="mask") if x.what != "None"]
    m += [Mutation("has_initial_state", f"dtype.{str(dt)[6:]}", "ok", _set("has_initial_state",
                                                                       lambda x, a, dt=dt: x.to(dt)), "mask")
          for dt in (torch.uint8, torch.int32, torch.int64)]
    m += [Mutation("has_initial_state", "is_out_bytes", "value",
                   lambda a: {**a, "has_initial_state": a["out"].view(torch.uint8).flatten()[:2].view(torch.bool)},
                   "mask")]
    return m


def _checkpoint_pool_mutations() -> list[Mutation]:
    """checkpoint_pool: the tensor mutations, an output's (expanded, overlapping the state pool),
    and the state pool itself (the default: valid)."""
    m = tensor_mutations("checkpoint_pool", 4, required=False, base="ckp")
    m += [Mutation("checkpoint_pool", "is_state", "ok", lambda a: {**a, "checkpoint_pool": a["state"]}, "ckp"),
          Mutation("checkpoint_pool", "overlaps_state", "value", lambda a: {**a, "checkpoint_pool": a["state"][1:]},
                   "ckp"),
          Mutation("checkpoint_pool", "expand_slots", "value", _set("checkpoint_pool", lambda x, a: x[:1].expand_as(x)),
                   "ckp"),
          Mutation("checkpoint_pool", "transposed_blocks", "value",
                   _set("checkpoint_pool", lambda x, a: x.transpose(2, 3)), "ckp")]
    return m


def prefill_mutations() -> list[Mutation]:
    """The table for prefill() / explain() / the op: every argument, the tensor ones on the
    per-sequence base (the state also on the pool base; state_indices only there)."""
    ranks = dict(q=3, k=3, v=3, g=2, beta=2, out=3, state=4, cu_seqlens=1)
    m: list[Mutation] = []
    for name, rank in ranks.items():
        m += tensor_mutations(name, rank, required=name in REQUIRED)
    m += tensor_mutations("state", 4, required=False, base="pool")
    m += tensor_mutations("state_indices", 1, required=False, base="pool")
    m += tensor_mutations("checkpoints", 2, required=False, base="ck")
    m += [replace(x, base="ck") for x in _scalars("checkpoint_every", ["64", 64.0, True, [64], b"64"],
                                                   [0, -64, 63, 100, 2 ** 40, None], [128, 640, np.int64(64)])]
    m += tensor_mutations("initial_state", 4, required=False, base="init")
    m += [Mutation("initial_state", "is_state", "value", lambda a: {**a, "initial_state": a["state"]}, "init"),
          Mutation("initial_state", "transposed_blocks", "value",
                   _set("initial_state", lambda x, a: x.transpose(2, 3)), "init")]
    m += _scalars("has_initial_state", ["yes", 2, [True], None, 1.5], [], [True, False, 1, 0, np.bool_(True)])
    m += _mask_mutations() + _checkpoint_pool_mutations()
    m += _scalars("max_seqlen", ["64", 64.0, True, [64], b"64"], [0, -64, 2 ** 31, 2 ** 40],
                  [None, 1, 64, 100, 2 ** 31 - 1, np.int64(64)])
    m += _output_mutations("seq") + [x for x in _output_mutations("pool") if x.arg == "state"]
    m += _workspace_mutations()
    m += _option_mutations()
    return _valid_marked(m, PREFILL_VALID)


def explain_mutations() -> list[Mutation]:
    return prefill_mutations() + _scalars("check_device", ["yes", 2, [True], None, 1.5], [], [False, 0, True])


def fla_mutations() -> list[Mutation]:
    ranks = dict(q=4, k=4, v=4, g=3, beta=3, initial_state=4, cu_seqlens=1)
    m: list[Mutation] = []
    for name, rank in ranks.items():
        m += tensor_mutations(name, rank, required=name in REQUIRED, dtypes=FLA_WRONG_DTYPES)
    m += [Mutation("initial_state", "expand_heads", "value",
                   _set("initial_state", lambda x, a: x[:, :1].expand_as(x))),
          Mutation("initial_state", "transposed_blocks", "value",
                   _set("initial_state", lambda x, a: x.transpose(2, 3)))]
    flags = (["yes", 2, [True], None, 1.5], [], [True, False, 1, 0, np.bool_(True)])
    m += _scalars("output_final_state", *flags) + _scalars("use_qk_l2norm_in_kernel", *flags)
    m += [x for x in _option_mutations() if x.arg in ("scale", "spine")]
    return _valid_marked(m, FLA_VALID)


def op_mutations() -> list[Mutation]:
    """prefill_op takes prefill()'s arguments less `stream`."""
    return [x for x in prefill_mutations() if x.arg != "stream"]


def sweep_counts() -> dict[str, dict[str, int]]:
    """{entry point: {argument: mutations swept}}: explain() and the op on CPU (all their
    mutations), prefill() on CPU (the type mutations; with a GPU, all), the raw op (the
    tensor-valued mutations), chunk_gated_delta_rule (all)."""
    a = bases_on("cpu")
    tables = {
        "explain": explain_mutations(),
        "prefill": prefill_mutations(),
        "prefill_op": op_mutations(),
        "torch_op": [x for x in op_mutations() if x.arg in TENSORS and x.tensor_valued(_made(x, a))],
        "chunk_gated_delta_rule": fla_mutations(),
    }
    counts: dict[str, dict[str, int]] = {}
    for entry, table in tables.items():
        counts[entry] = {}
        for x in table:
            counts[entry][x.arg] = counts[entry].get(x.arg, 0) + 1
    return counts


def format_counts(counts: Optional[dict[str, dict[str, int]]] = None) -> str:
    counts = counts if counts is not None else sweep_counts()
    args = list(dict.fromkeys(arg for per in counts.values() for arg in per))
    width = max(len(a) for a in args)
    cols = {e: max(len(e), 5) for e in counts}
    lines = [" " * width + "".join(f"  {e:>{n}}" for e, n in cols.items())]
    for arg in args:
        lines.append(f"{arg:<{width}}" + "".join(f"  {counts[e].get(arg, '-'):>{n}}" for e, n in cols.items()))
    lines.append(f"{'total':<{width}}" + "".join(f"  {sum(counts[e].values()):>{n}}" for e, n in cols.items()))
    return "\n".join(lines)


# ----------------------------------------------------------------------------- bases and calls
def valid_args(device: str, pool: bool = False, checkpoints: bool = False) -> dict:
    """test_guards.valid() (pool: slots [1, 0] of a 3-slot pool, so that a pool one slot shorter
    is still a valid call; checkpoints: that pool with a checkpoint table into its free slot 2)."""
    a = valid(device, pool=pool or checkpoints)
    if pool or checkpoints:
        a["state_indices"] = torch.tensor([1, 0], dtype=torch.int32, device=device)
    if checkpoints:
        a["checkpoints"] = torch.tensor([[2, -1], [-1, -1]], dtype=torch.int32, device=device)
        a["checkpoint_every"] = 64
    return a


def bases_on(device: str) -> dict:
    """The valid calls each mutation starts from, by Mutation.base."""
    init = valid_args(device)
    init["initial_state"] = init["state"].clone() + 1.0
    ckp = valid_args(device, checkpoints=True)
    ckp["checkpoint_pool"] = torch.zeros(3, HV, D, D, device=device)
    mask = valid_args(device, pool=True)
    mask["has_initial_state"] = torch.tensor([True, False], device=device)
    return {"seq": valid_args(device), "pool": valid_args(device, pool=True),
            "ck": valid_args(device, checkpoints=True), "init": init, "ckp": ckp, "mask": mask}


def fla_args(device: str) -> dict:
    a = valid(device)
    return dict(q=a["q"][None], k=a["k"][None], v=a["v"][None], g=a["g"][None], beta=a["beta"][None],
                initial_state=a["state"], output_final_state=True, cu_seqlens=a["cu_seqlens"])


def _made(m: Mutation, bases: dict) -> dict:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's deprecation of quantized tensors
        return m.make(dict(bases[m.base]))


def _call_prefill(fn, a: dict, **extra):
    args, state, kw = _split(dict(a))
    return fn(*args, state, **kw, **extra)


def _op_args(a: dict) -> tuple:
    """The raw op's 22 arguments (none has a default; a per-sequence has_initial_state is its
    has_initial)."""
    h = a.get("has_initial_state", True)
    mask = h if isinstance(h, torch.Tensor) else None
    return (a["q"], a["k"], a["v"], a["g"], a["beta"], a["out"], a.get("state"), a.get("cu_seqlens"),
            a.get("state_indices"), a.get("state_layout", "kv"), a.get("scale"), a.get("use_qk_l2norm", False),
            a.get("spine", "auto"), a.get("workspace"), a.get("checkpoints"), a.get("checkpoint_every"),
            a.get("initial_state"), True if mask is not None else h, a.get("max_seqlen"), a.get("checkpoint_pool"),
            mask, a.get("batch_invariant", False))


def _fakeable(a: dict) -> bool:
    """FakeTensorMode holds every tensor of the call (it has no quantized tensors)."""
    return not any(x.is_quantized for x in a.values() if isinstance(x, torch.Tensor))


def _under_fake(fn, a: dict):
    """fn(a) under FakeTensorMode: what torch.compile traces (the op's fake implementation)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    mode = FakeTensorMode()
    fake = {k: (mode.from_tensor(x) if isinstance(x, torch.Tensor) else x) for k, x in a.items()}
    with mode:
        return fn(fake)


def _fla_call(a: dict):
    return gdn_prefill.chunk_gated_delta_rule(**a)


def _explain_shim() -> types.SimpleNamespace:
    """The FLA layer's view of the extension with every launch replaced by explain(): prefill() and
    the layer's own entry (_prefill_fla: [B, T, ...] tensors, viewed as [B * T, ...])."""
    def prefill_fla(q, k, v, g, beta, out, final, initial_state, has_initial_state, cu_seqlens, scale, l2, spine):
        flat = [x.flatten(0, 1) for x in (q, k, v, g, beta, out)]
        return gdn_prefill.explain(*flat, final, cu_seqlens=cu_seqlens, scale=scale, use_qk_l2norm=l2, spine=spine,
                                   initial_state=initial_state, has_initial_state=has_initial_state)
    return types.SimpleNamespace(prefill=gdn_prefill.explain, _prefill_fla=prefill_fla)


class _Outcome:
    """What a call did: returned (ok), raised a GdnError (cls, msg), or raised anything else."""

    def __init__(self, fn):
        self.ok, self.value, self.cls, self.msg, self.crash = False, None, None, "", None
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self.value = fn()
            self.ok = True
        except errors.GdnError as e:
            self.cls, self.msg = type(e), str(e)
        except Exception as e:  # noqa: BLE001 - the defect this sweep looks for
            self.crash = f"{type(e).__name__}: {e}"

    def __repr__(self) -> str:
        if self.ok:
            return "ok"
        return self.crash or f"{self.cls.__name__}({self.msg!r})"

    def same(self, other: "_Outcome") -> bool:
        return (self.ok, self.cls, self.msg, self.crash) == (other.ok, other.cls, other.msg, other.crash)


def names(arg: str, msg: str) -> bool:
    """msg names the argument (a whole word; not part of another name such as state_indices)."""
    return re.search(rf"(?<![\w.]){re.escape(arg)}(?!\w)", msg) is not None


def judge(m: Mutation, got: _Outcome, own_type_rule: bool = False) -> Optional[str]:
    """The rule of the sweep; None, or what is wrong.  own_type_rule: the entry point may reject a
    value prefill() takes with a GdnTypeError (prefill_op passes bools and floats to the op's
    schema, which takes no 1 for True and no numpy scalars)."""
    arg = m.arg
    if got.crash:
        return f"{m.id}: not a GdnError: {got.crash}"
    if m.kind == "type":
        if got.ok or got.cls is not errors.GdnTypeError:
            return f"{m.id}: expected GdnTypeError, got {got!r}"
    if m.kind == "ok" and not got.ok and not (own_type_rule and got.cls is errors.GdnTypeError):
        return f"{m.id}: a valid call, rejected: {got!r}"
    if not got.ok and not names(arg, got.msg):
        return f"{m.id}: the message does not name {arg}: {got!r}"
    return None


CALLS: dict[str, dict[str, int]] = {}
"""{sweep: {argument: calls made in this session}}; a sweep named like an entry point of
sweep_counts() makes the calls that table counts, "<entry>(type)" only its type mutations."""


def _count(sweep: str, arg: str) -> None:
    per = CALLS.setdefault(sweep, {})
    per[arg] = per.get(arg, 0) + 1


def _args_of(table: list[Mutation]) -> list[str]:
    return list(dict.fromkeys(x.arg for x in table))


# ----------------------------------------------------------------------------- CPU half
@pytest.mark.parametrize("arg", _args_of(explain_mutations()))
def test_explain_sweep_cpu(arg):
    """Every mutation of `arg` through explain() on CPU tensors: a plan, or a GdnError naming it."""
    bases = bases_on("cpu")
    bad = []
    for m in (x for x in explain_mutations() if x.arg == arg):
        a = _made(m, bases)
        got = _Outcome(lambda: _call_prefill(gdn_prefill.explain, a))
        _count("explain", arg)
        bad.append(judge(m, got))
        if got.ok and not (isinstance(got.value, dict) and got.value.get("chosen") in ("scalar", "wgmma")):
            bad.append(f"{m.id}: accepted, but explain() returned {got.value!r}")
    bad = [b for b in bad if b]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("entry", ["prefill", "prefill_op", "chunk_gated_delta_rule"])
def test_type_mutations_rejected_before_the_device(entry):
    """An argument of the wrong kind is a GdnTypeError naming it, raised before the device rule:
    prefill(), prefill_op() and the FLA layer reject it from CPU tensors (which they cannot run)."""
    if entry == "chunk_gated_delta_rule":
        table, bases, call = fla_mutations(), {"seq": fla_args("cpu")}, _fla_call
    else:
        table = prefill_mutations() if entry == "prefill" else op_mutations()
        bases = bases_on("cpu")
        fn = gdn_prefill.prefill if entry == "prefill" else ops.prefill_op
        call = lambda a: _call_prefill(fn, a)  # noqa: E731
    bad = []
    for m in (x for x in table if x.kind == "type"):
        a = _made(m, bases)
        got = _Outcome(lambda: call(a))
        _count(f"{entry}(type)", m.arg)
        bad.append(judge(m, got))
    bad = [b for b in bad if b]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("entry,arg", [("prefill_op", arg) for arg in _args_of(op_mutations())]
                         + [("torch_op", arg) for arg in TENSORS])
def test_op_sweep_cpu_matches_explain(entry, arg):
    """The op (ops.prefill_op, or torch.ops.gdn_prefill.prefill with the tensor-valued mutations)
    under FakeTensorMode: its fake implementation gives explain()'s outcome, error class and
    message included.  A tensor of the wrong kind is also called for real (CPU tensors: a
    GdnTypeError before the device rule); quantized ones only so (FakeTensorMode has none)."""
    bases = bases_on("cpu")
    if entry == "torch_op":
        call = lambda a: torch.ops.gdn_prefill.prefill(*_op_args(a))  # noqa: E731
    else:
        call = lambda a: _call_prefill(ops.prefill_op, a)  # noqa: E731
    own_type_rule = entry == "prefill_op"
    bad = []
    for m in (x for x in op_mutations() if x.arg == arg):
        a = _made(m, bases)
        if entry == "torch_op" and not m.tensor_valued(a):
            continue            # the schema's parser rejects it, before our code
        _count(entry, arg)
        if m.kind == "type":
            bad.append(judge(m, _Outcome(lambda: call(a)), own_type_rule))
        if not _fakeable(a):
            continue
        got = _Outcome(lambda: _under_fake(call, a))
        bad.append(judge(m, got, own_type_rule))
        want = _Outcome(lambda: _call_prefill(gdn_prefill.explain, a))
        # prefill_op's own type rule: stricter (use_qk_l2norm=1) and worded its own way
        own_rule = own_type_rule and got.cls is errors.GdnTypeError and (want.ok or m.kind == "type")
        if not got.same(want) and not own_rule and not (got.ok and want.ok):
            bad.append(f"{m.id}: the op gives {got!r}, explain() {want!r}")
    bad = [b for b in bad if b]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("arg", _args_of(fla_mutations()))
def test_fla_sweep_cpu(arg, monkeypatch):
    """Every mutation of `arg` through chunk_gated_delta_rule on CPU tensors, its prefill() call
    routed to explain(): valid, or a GdnError naming the layer's own argument."""
    monkeypatch.setattr(fla, "_ext", _explain_shim())
    bases = {"seq": fla_args("cpu")}
    bad = []
    for m in (x for x in fla_mutations() if x.arg == arg):
        a = _made(m, bases)
        got = _Outcome(lambda: _fla_call(a))
        _count("chunk_gated_delta_rule", arg)
        bad.append(judge(m, got))
        if got.ok:
            o, s = got.value
            bad.append(None if o.shape == a["v"].shape else f"{m.id}: output shape {tuple(o.shape)}")
    bad = [b for b in bad if b]
    assert not bad, "\n".join(bad)


def test_sweep_covers_every_argument():
    """Every argument of every entry point gets at least five mutations (the raw op: its tensor
    arguments; torch's schema parser rejects other types before our code), and the sweeps that
    ran in this session made the calls the table counts."""
    counts = sweep_counts()
    assert tuple(counts) == ENTRIES
    print("\n" + format_counts(counts))
    print("calls made in this session:\n" + format_counts(CALLS) if CALLS else "")
    for entry in counts:
        for arg, n in CALLS.get(entry, {}).items():
            assert n == counts[entry][arg], (entry, arg, n, counts[entry][arg])
    signatures = {
        "explain": gdn_prefill.explain, "prefill": gdn_prefill.prefill, "prefill_op": ops.prefill_op,
        "chunk_gated_delta_rule": gdn_prefill.chunk_gated_delta_rule,
    }
    want = {entry: [p.name for p in inspect.signature(fn).parameters.values()
                    if p.kind is not inspect.Parameter.VAR_KEYWORD]
            for entry, fn in signatures.items()}
    schema = torch.ops.gdn_prefill.prefill.default._schema
    op_names = {v: k for k, v in OP_NAMES.items()}
    want["torch_op"] = [op_names.get(x.name, x.name) for x in schema.arguments if "Tensor" in str(x.type)]
    assert set(want["torch_op"]) == set(TENSORS)
    short = {entry: {arg: counts[entry].get(arg, 0) for arg in args if counts[entry].get(arg, 0) < 5}
             for entry, args in want.items()}
    assert not any(short.values()), short
    extra = {entry: set(counts[entry]) - set(want[entry]) for entry in want}
    assert not any(extra.values()), extra  # no mutation of an argument the entry point does not have


# ----------------------------------------------------------------------------- GPU half
def _storage_bytes(x) -> Optional[torch.Tensor]:
    """A copy of every byte of x's storage (not only the elements x views), or None for
    something that is no dense CUDA tensor."""
    if not isinstance(x, torch.Tensor) or x.device.type != "cuda" or x.layout != torch.strided or x.is_quantized:
        return None
    return torch.empty(0, dtype=torch.uint8, device=x.device).set_(x.untyped_storage()).clone()


def _untouched(before: Optional[torch.Tensor], x) -> bool:
    return before is None or torch.equal(before, _storage_bytes(x))


def _gpu_extra(arg: str, fla_layer: bool = False) -> list[Mutation]:
    """On the GPU, a tensor on the host among CUDA ones too (on the base that holds it)."""
    base = "seq" if fla_layer else {"state_indices": "pool", "checkpoints": "ck", "initial_state": "init",
                                    "checkpoint_pool": "ckp", "has_initial_state": "mask"}.get(arg, "seq")
    if arg in TENSORS + FLA_TENSORS and arg != "workspace":
        return [Mutation(arg, "device.cpu", "value", _set(arg, lambda x, a: x.cpu()), base)]
    return []


def _gpu_call(m, bases, fn, label):
    """One mutation on CUDA tensors: (its arguments, explain()'s verdict, fn's, out / state bytes
    before the call)."""
    a = _made(m, bases)
    want = _Outcome(lambda: _call_prefill(gdn_prefill.explain, a))
    before = {n: _storage_bytes(a.get(n)) for n in ("out", "state", "checkpoint_pool")}
    torch.cuda.synchronize()
    got = _Outcome(lambda: _call_prefill(fn, a))
    torch.cuda.synchronize()
    _count(label, m.arg)
    return a, want, got, before


def _writes(m, a, before):
    """What a rejected call wrote: a message for out or state if a byte changed."""
    return [f"{m.id}: rejected, but {n} was written" for n in ("out", "state", "checkpoint_pool")
            if not _untouched(before[n], a.get(n))]


@pytest.mark.gpu
@pytest.mark.parametrize("arg", _args_of(prefill_mutations()))
def test_prefill_sweep_gpu(arg):
    """The table through prefill() on CUDA tensors: a call explain() rejects raises the same error
    class (naming the argument) and leaves every byte of out and state untouched; a call explain()
    accepts runs."""
    bases = bases_on("cuda")
    bad = []
    for m in [x for x in prefill_mutations() if x.arg == arg] + _gpu_extra(arg):
        a, want, got, before = _gpu_call(m, bases, gdn_prefill.prefill, "prefill[gpu]")
        bad.append(judge(m, got))
        if want.ok:
            bad.append(None if got.ok and got.value in ("scalar", "wgmma") else f"{m.id}: explain() accepts, "
                       f"prefill() gives {got!r}")
        else:
            bad.append(None if got.cls is want.cls else f"{m.id}: prefill() gives {got!r}, explain() {want!r}")
            bad += _writes(m, a, before)
    bad = [b for b in bad if b]
    assert not bad, "\n".join(bad)


@pytest.mark.gpu
@pytest.mark.parametrize("arg", _args_of(op_mutations()))
def test_op_sweep_gpu(arg):
    """prefill_op on CUDA tensors: explain()'s verdict, out and state untouched when rejected."""
    bases = bases_on("cuda")
    bad = []
    for m in [x for x in op_mutations() if x.arg == arg] + _gpu_extra(arg):
        a, want, got, before = _gpu_call(m, bases, ops.prefill_op, "prefill_op[gpu]")
        bad.append(judge(m, got, own_type_rule=True))
        if want.ok:
            stricter = got.cls is errors.GdnTypeError  # prefill_op's own type rule (e.g. use_qk_l2norm=1)
            bad.append(None if got.ok or stricter else f"{m.id}: explain() accepts, prefill_op gives {got!r}")
        if not got.ok:
            bad += _writes(m, a, before)
    bad = [b for b in bad if b]
    assert not bad, "\n".join(bad)


@pytest.mark.gpu
@pytest.mark.parametrize("arg", _args_of(fla_mutations()))
def test_fla_sweep_gpu(arg, monkeypatch):
    """chunk_gated_delta_rule on CUDA tensors: the verdict its explain()-routed twin gives, and
    initial_state never written (the layer updates a copy)."""
    bases = {"seq": fla_args("cuda")}
    shim = _explain_shim()
    bad = []
    for m in [x for x in fla_mutations() if x.arg == arg] + _gpu_extra(arg, fla_layer=True):
        a = _made(m, bases)
        with monkeypatch.context() as patch:
            patch.setattr(fla, "_ext", shim)
            want = _Outcome(lambda: _fla_call(a))
        before = _storage_bytes(a.get("initial_state"))
        got = _Outcome(lambda: _fla_call(a))
        torch.cuda.synchronize()
        _count("chunk_gated_delta_rule[gpu]", arg)
        bad.append(judge(m, got))
        bad.append(None if got.ok == want.ok and got.cls is want.cls else f"{m.id}: {got!r}, explain()-routed "
                   f"{want!r}")
        if not _untouched(before, a.get("initial_state")):
            bad.append(f"{m.id}: initial_state was written")
    bad = [b for b in bad if b]
    assert not bad, "\n".join(bad)


if __name__ == "__main__":
    print(format_counts())
