"""FLA-shaped API: `chunk_gated_delta_rule` with FLA's [B, T, H, D] shapes, over prefill().

A user of fla.ops.gated_delta_rule switches by changing one import.  The layer takes what FLA
0.6.0's takes, with two deliberate differences (docs/INTEGRATIONS.md):

- dtypes stay strict: q, k, v bf16 with K = V = 128 (g may be any float and is read as fp32,
  initial_state is read as fp32, cu_seqlens any integer type, each converted once as before);
- layouts: a tensor the kernels can read where it is is read there; one they cannot (last dim
  not contiguous, a token or head stride that is no multiple of 8 elements or a base that is not
  16-byte aligned where TMA reads rows, [B, T] dims that are no view of one, a state block that
  is not contiguous) gets one contiguous copy of its own, and only that tensor.  FLA copies
  every non-contiguous input.  `explain_copies()` lists the copies (and conversions) a call makes.

FLA's other keywords are accepted; those with a value the kernels cannot honour are rejected by
name (head_first=True, use_gate_in_kernel=True, cp_context, ...), those whose value cannot change
the result are ignored (IGNORED_KEYWORDS).  A keyword FLA 0.6.0 does not know is rejected by name:
a typo, or an engine's output buffer, must not vanish.  The layer is inference-only: the kernels
have no backward pass, so an input that requires grad under grad mode is rejected by name rather
than returning outputs whose gradients would stop here without a word.  prefill() itself stays
strict: it never copies.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Optional

from . import _ext
from ._ext import _check_tensor  # type: ignore[attr-defined]  # a private helper: no stub
from ._ext import explain as _explain
from .errors import GdnArgumentError, GdnDtypeError, GdnShapeError, GdnTypeError

if TYPE_CHECKING:
    from torch import Tensor

_log = logging.getLogger("gdn_prefill")

_RANKS = (("q", 4), ("k", 4), ("v", 4), ("g", 3), ("beta", 3))

# FLA 0.6.0 keywords (its named parameters and those its **kwargs reads) that the layer takes and
# ignores: the result does not depend on them
IGNORED_KEYWORDS = {
    "cu_seqlens_cpu": "a host copy of cu_seqlens, which FLA reads to avoid a host sync; the kernels read "
                      "cu_seqlens on the device and never sync",
    "chunk_indices": "FLA's precomputed chunk table for cu_seqlens; the kernels derive their own",
    "chunk_size": "FLA's chunk length (16, 32 or 64, checked as FLA does); the kernels' chunk is 64 and the "
                  "recurrence is the same",
    "A_log": "read by FLA only with use_gate_in_kernel=True, which is rejected",
    "dt_bias": "read by FLA only with use_gate_in_kernel=True, which is rejected",
}
# keywords that must be false (False, 0 or None): their true value asks for work the kernels do not do
_FALSE_ONLY = {
    "head_first": "only head_first=False ([B, T, H, D]) is supported",
    "use_gate_in_kernel": "the gate is not computed in the kernel; pass g = -exp(A_log) * softplus(a + dt_bias), "
                          "the log-space decay",
    "use_beta_sigmoid_in_kernel": "beta is not passed through a sigmoid in the kernel; pass beta = sigmoid(logits)",
    "allow_neg_eigval": "beta in [0, 2) needs use_beta_sigmoid_in_kernel, which is not supported; pass "
                        "beta = 2 * sigmoid(logits)",
}
_STATE_KEYS = ("state_v_first", "transpose_state_layout")   # FLA 0.6.0's name and its deprecated alias
# every keyword FLA 0.6.0's chunk_gated_delta_rule takes beyond this layer's named parameters (its
# named parameters and the keys its **kwargs reads): any other keyword is rejected by name
FLA_KEYWORDS = frozenset(IGNORED_KEYWORDS) | frozenset(_FALSE_ONLY) | frozenset(_STATE_KEYS) | {"cp_context"}


def inference_only(tensors: dict[str, Any], advice: str = "run it under torch.no_grad() or "
                   "torch.inference_mode()") -> None:
    """Raise GdnArgumentError naming the first tensor that requires grad while grad mode is on: the
    kernels have no backward pass, and outputs without autograd history would end the gradients
    at the layer without a word."""
    import torch
    if not torch.is_grad_enabled():
        return
    for name, t in tensors.items():
        if isinstance(t, torch.Tensor) and t.requires_grad:
            raise GdnArgumentError(f"{name}: requires grad, and gdn_prefill's kernels have no backward pass (the "
                                   f"layer is inference-only); {advice}")


def _numpy_bool(x: object) -> bool:
    """numpy.bool_ (prefill()'s flags take it; it has no __index__ since numpy 2)."""
    return type(x).__module__ == "numpy" and getattr(x, "ndim", None) == 0 and getattr(x, "dtype", None) == bool


def _flag(name: str, flag: object) -> bool:
    if not isinstance(flag, bool) and not (isinstance(flag, int) and flag in (0, 1)) and not _numpy_bool(flag):
        raise GdnTypeError(f"{name}: must be a bool, got {type(flag).__qualname__}")
    return bool(flag)


def _false(x: object) -> bool:
    """None, False, 0 or a false numpy.bool_: a keyword left at its default."""
    return x is None or x is False or (type(x) is int and x == 0) or (_numpy_bool(x) and not x)


def _keywords(kwargs: dict[str, Any]) -> bool:
    """Check FLA's extra keywords; returns state_v_first (the state stored [V, K])."""
    if not kwargs:
        return False
    for name in kwargs:
        if name not in FLA_KEYWORDS:
            raise GdnArgumentError(f"{name}: not a keyword of FLA 0.6.0's chunk_gated_delta_rule, so this layer "
                                   "would drop it (a misspelt argument, or an output buffer this layer does not "
                                   "take: it allocates o and the final state); it takes "
                                   + ", ".join(sorted(FLA_KEYWORDS)))
    for name, rule in _FALSE_ONLY.items():
        if not _false(kwargs.get(name)):
            raise GdnArgumentError(f"{name}: {rule}")
    if kwargs.get("cp_context") is not None:
        raise GdnArgumentError("cp_context: FLA's context parallelism is not supported; gdn_prefill.distributed "
                               "splits one sequence across ranks")
    size = kwargs.get("chunk_size", 64)
    if type(size) is not int or size not in (16, 32, 64):
        raise GdnArgumentError(f"chunk_size: must be 16, 32 or 64 (FLA's rule), got {size!r}")
    given = [(n, _flag(n, kwargs[n])) for n in _STATE_KEYS if kwargs.get(n) is not None]
    if len(given) == 2 and given[0][1] != given[1][1]:
        raise GdnArgumentError("state_v_first: differs from transpose_state_layout, its deprecated name")
    return bool(given and given[0][1])


# ----------------------------------------------------------------------------- the layout rules
# The rules prefill() applies (pyx/gdn_prefill/validate.pxi _layout and _pool_layout; the 16-byte
# row rule of launch.pxi _row_aligned16 and plan.pxi's wgmma guard; api.pxi _merge_bt), on the
# layer's [B, T, ...] tensors: why the kernels cannot read a tensor where it is, or None.
def _merged(shape: Any, stride: tuple[int, ...]) -> Optional[int]:
    """The token stride of [B, T, ...] viewed as [B * T, ...], or None where that is no view."""
    if shape[0] == 1:
        return stride[1]
    if shape[1] == 1:
        return stride[0]
    if stride[0] == shape[1] * stride[1]:
        return stride[1]
    return None


def _rows_why(t: Tensor) -> Optional[str]:
    """q, k, v [B, T, H, 128]: rows the kernels read in 16-byte vectors and by TMA."""
    shape, stride, ptr = t.shape, t.stride(), t.data_ptr()
    ts = stride[1] if shape[0] == 1 else _merged(shape, stride)
    if stride[3] == 1 and ts is not None and ts >= 0 and stride[2] >= 0 and ptr % 16 == 0 and ts % 8 == 0 \
            and stride[2] % 8 == 0:
        return None                                         # the usual case, in few steps: the hot path
    if ts is not None and min(ts, stride[2], stride[3]) < 0:
        return f"strides {tuple(stride)}: negative strides are not read"
    why = []
    if stride[3] != 1 and shape[3] > 1:
        why.append(f"last dim has stride {stride[3]}; the kernels read each head's {shape[3]} values as one "
                   "contiguous row")
    if ts is None:
        why.append(f"its [B, T] dims (strides {stride[0]}, {stride[1]}) are no view of one [B * T] dim; the "
                   "kernels index tokens with one stride")
    if ptr % t.element_size() != 0:
        why.append("data pointer is not aligned to its elements")
    elif not why and (ptr % 16 != 0 or (ts or 0) % 8 != 0 or stride[2] % 8 != 0):
        why.append(f"base {'not ' if ptr % 16 else ''}16-byte aligned, token stride {ts}, head stride {stride[2]}: "
                   "TMA reads 16-byte aligned rows (a base aligned to 16 bytes, strides multiples of 8 "
                   "elements); read in place it would cost the fused plan or the wgmma spine")
    return "; ".join(why) or None


def _gates_why(t: Tensor) -> Optional[str]:
    """g, beta [B, T, H]: any strides, read element by element."""
    if t.is_contiguous():
        return None                                         # the hot path (torch aligns elements)
    shape, stride, ptr = t.shape, t.stride(), t.data_ptr()
    ts = stride[1] if shape[0] == 1 else _merged(shape, stride)
    if ts is not None and ts >= 0 and stride[2] >= 0 and ptr % 4 == 0:
        return None                                         # the hot path
    if ts is not None and min(ts, stride[2]) < 0:
        return f"strides {tuple(stride)}: negative strides are not read"
    why = []
    if ts is None:
        why.append(f"its [B, T] dims (strides {stride[0]}, {stride[1]}) are no view of one [B * T] dim; the "
                   "kernels index tokens with one stride")
    if ptr % t.element_size() != 0:
        why.append("data pointer is not aligned to its elements")
    return "; ".join(why) or None


def _state_why(t: Tensor) -> Optional[str]:
    """initial_state [N, H, 128, 128] fp32: each head's block contiguous and 16-byte aligned."""
    ptr = t.data_ptr()
    if ptr % 16 == 0 and t.is_contiguous() and t.shape[3] % 4 == 0:
        return None                                         # the hot path
    shape, stride = t.shape, t.stride()
    if min(stride) < 0:
        return f"strides {tuple(stride)}: negative strides are not read"
    if (stride[3] != 1 and shape[3] > 1) or stride[2] != shape[3]:
        return (f"strides {tuple(stride)}: the kernels read each head's {shape[2]} x {shape[3]} block whole "
                "(contiguous)")
    if ptr % 16 != 0 or stride[0] % 4 != 0 or stride[1] % 4 != 0:
        return f"base or strides {tuple(stride)}: each head's block must start 16-byte aligned"
    return None


def _offsets_why(t: Tensor) -> Optional[str]:
    """cu_seqlens [N + 1] int32: contiguous."""
    if t.shape[0] > 1 and t.stride(0) != 1:
        return f"stride {t.stride(0)}; the offsets are read contiguous"
    if t.data_ptr() % t.element_size() != 0:
        return "data pointer is not aligned to its elements"
    return None


# ----------------------------------------------------------------------------- one call
class _Call:
    """The layer's call, checked and planned on the host, nothing launched: the tensors prefill()
    reads, and `copies`, {argument: why it is copied or converted}.  `materialise()` makes them."""

    __slots__ = ("output_final_state", "state_layout", "scale", "l2", "spine", "plan", "N", "tensors")

    def __init__(self, q: Any, k: Any, v: Any, g: Any, beta: Any, scale: Any, initial_state: Any,
                 output_final_state: Any, cu_seqlens: Any, use_qk_l2norm_in_kernel: Any, spine: Any,
                 kwargs: dict[str, Any]) -> None:
        import torch

        inference_only({"q": q, "k": k, "v": v, "g": g, "beta": beta, "initial_state": initial_state})
        # prefill()'s rule for a tensor's kind, before this layer reshapes or copies the tensors
        for name, t, rank in (("q", q, 4), ("k", k, 4), ("v", v, 4), ("g", g, 3), ("beta", beta, 3)):
            _check_tensor(t, name)
            if t.dim() != rank:
                raise GdnShapeError(f"{name}: must have {rank} dims ({'[B, T, H, D]' if rank == 4 else '[B, T, H]'}), "
                                    f"got {t.dim()}")
        if initial_state is not None:
            _check_tensor(initial_state, "initial_state")
        if cu_seqlens is not None:
            _check_tensor(cu_seqlens, "cu_seqlens")
        self.output_final_state = _flag("output_final_state", output_final_state)
        _flag("use_qk_l2norm_in_kernel", use_qk_l2norm_in_kernel)
        self.state_layout = "vk" if kwargs and _keywords(kwargs) else "kv"
        self.scale, self.l2, self.spine = scale, use_qk_l2norm_in_kernel, spine
        # {name: (why, dtype of the copy)}: the copies and conversions, made by materialise()
        plan: dict[str, tuple[str, Any]] = {}
        for name, t in (("q", q), ("k", k), ("v", v)):
            why = _rows_why(t)
            if why is not None:
                plan[name] = (why, t.dtype)
        if g.dtype != torch.float32:
            if not g.dtype.is_floating_point:
                raise GdnDtypeError(f"g: dtype must be a floating-point type (read as float32), got {g.dtype}")
            plan["g"] = (f"dtype {g.dtype}: converted to float32, the log-decay the kernels read", torch.float32)
        else:
            why = _gates_why(g)
            if why is not None:
                plan["g"] = (why, g.dtype)
        why = _gates_why(beta)
        if why is not None:
            plan["beta"] = (why, beta.dtype)
        shape = q.shape
        if cu_seqlens is not None:
            if shape[0] != 1:
                raise GdnShapeError(f"q: batch size must be 1 with cu_seqlens, got {shape[0]}")
            if cu_seqlens.dim() != 1:
                raise GdnShapeError(f"cu_seqlens: must have 1 dim, got {cu_seqlens.dim()}")
            if cu_seqlens.dtype != torch.int32:
                if cu_seqlens.dtype not in (torch.int64, torch.int16, torch.uint8, torch.int8):
                    raise GdnDtypeError(f"cu_seqlens: dtype must be an integer type, got {cu_seqlens.dtype}")
                plan["cu_seqlens"] = (f"dtype {cu_seqlens.dtype}: converted to int32, the offsets the kernels read",
                                      torch.int32)
            else:
                why = _offsets_why(cu_seqlens)
                if why is not None:
                    plan["cu_seqlens"] = (why, torch.int32)
            self.N = cu_seqlens.shape[0] - 1
        else:
            cu_seqlens = _equal_lengths(shape[0], shape[1], q.device)
            self.N = shape[0]
        if initial_state is not None:
            if initial_state.dtype != torch.float32:
                # the kernels read fp32 states (FLA converts too)
                plan["initial_state"] = (f"dtype {initial_state.dtype}: converted to float32, the state the kernels "
                                         "read", torch.float32)
            elif initial_state.dim() == 4:
                why = _state_why(initial_state)
                if why is not None:
                    plan["initial_state"] = (why, torch.float32)
        self.plan = plan
        self.tensors: dict[str, Any] = {"q": q, "k": k, "v": v, "g": g, "beta": beta, "initial_state": initial_state,
                                        "cu_seqlens": cu_seqlens}

    @property
    def copies(self) -> dict[str, str]:
        return {name: why for name, (why, _) in self.plan.items()}

    def outputs(self) -> tuple[Tensor, Optional[Tensor]]:
        """One allocation per output: o [B, T, Hv, V] contiguous, the final state [N, Hv, K, V] fp32
        (a tensor of its own: the kernels read initial_state where it is and never write it)."""
        import torch
        q, k, v = self.tensors["q"], self.tensors["k"], self.tensors["v"]
        out = torch.empty_like(v, memory_format=torch.contiguous_format)
        final = None
        if self.output_final_state:
            final = torch.empty(self.N, v.shape[2], k.shape[-1], v.shape[-1], dtype=torch.float32, device=q.device)
        return out, final

    def materialise(self, out: Tensor, final: Optional[Tensor]) -> None:
        """Make the planned copies: each destination is allocated, the call with the destinations in
        place is checked by explain() (every rule prefill() applies, nothing launched), and only then
        are the copies made, so that a call prefill() would reject launches nothing."""
        import torch
        src = {name: self.tensors[name] for name in self.plan}
        for name, (_, dtype) in self.plan.items():
            self.tensors[name] = torch.empty(src[name].shape, dtype=dtype, device=src[name].device)
        self.check(out, final)
        for name in self.plan:
            self.tensors[name].copy_(src[name])
        if _log.isEnabledFor(logging.DEBUG):
            _log.debug("gdn_prefill: chunk_gated_delta_rule copied %s", "; ".join(
                f"{n}: {why}" for n, why in self.copies.items()))

    def check(self, out: Tensor, final: Optional[Tensor]) -> None:
        """prefill()'s rules on the call as planned (explain(): nothing is launched)."""
        t = self.tensors
        init = t["initial_state"]
        q, k, v, g, beta = (t[n].flatten(0, 1) for n in ("q", "k", "v", "g", "beta"))
        _explain(q, k, v, g, beta, out.flatten(0, 1), final, cu_seqlens=t["cu_seqlens"], scale=self.scale,
                 use_qk_l2norm=self.l2, spine=self.spine, initial_state=init, has_initial_state=init is not None,
                 state_layout=self.state_layout)

    def run(self, out: Tensor, final: Optional[Tensor]) -> None:
        t = self.tensors
        init = t["initial_state"]
        if self.state_layout == "kv":
            # prefill() on the [B, T, ...] tensors, viewed as [B * T, ...] by the extension; the
            # workspace from its per-stream cache
            ran = _ext._prefill_fla(  # type: ignore[attr-defined]  # a private entry: no stub
                t["q"], t["k"], t["v"], t["g"], t["beta"], out, final, init, init is not None, t["cu_seqlens"],
                self.scale, self.l2, self.spine)
            if ran is not None:
                return
        # state_v_first (prefill()'s "vk" pools), or [B, T] dims _prefill_fla could not view as one
        # (none: the plan copies those): prefill() on torch's [B * T] views
        q, k, v, g, beta = (t[n].flatten(0, 1) for n in ("q", "k", "v", "g", "beta"))
        _ext.prefill(q, k, v, g, beta, out.flatten(0, 1), final, cu_seqlens=t["cu_seqlens"], scale=self.scale,
                     use_qk_l2norm=self.l2, spine=self.spine, initial_state=init, has_initial_state=init is not None,
                     state_layout=self.state_layout)


def chunk_gated_delta_rule(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, scale: Optional[float] = None,
                           initial_state: Optional[Tensor] = None, output_final_state: bool = False,
                           cu_seqlens: Optional[Tensor] = None, use_qk_l2norm_in_kernel: bool = False, *,
                           spine: str = "auto", **kwargs: Any) -> tuple[Tensor, Optional[Tensor]]:
    """o, final_state = chunk_gated_delta_rule(q, k, v, g, beta, ...), as in FLA.

    q, k [B, T, Hk, K]; v [B, T, Hv, V]; g, beta [B, T, Hv]; with cu_seqlens, B must
    be 1 and the sequences are packed along T.  initial_state [N, Hv, K, V] fp32
    (N = B, or len(cu_seqlens) - 1).  Returns o [B, T, Hv, V] (dtype of v) and the
    final state [N, Hv, K, V] fp32 when output_final_state, else None.  Any strides: a tensor
    the kernels cannot read where it is gets one contiguous copy (explain_copies() lists them).
    FLA's other keywords: state_v_first=True (and its old name transpose_state_layout) stores
    the states [N, Hv, V, K]; cu_seqlens_cpu, chunk_indices, chunk_size, A_log and dt_bias are
    ignored; head_first, use_gate_in_kernel, use_beta_sigmoid_in_kernel and allow_neg_eigval must
    be false and cp_context None; any other keyword is rejected by name.  Inference only: under
    grad mode, an input that requires grad is rejected (GdnArgumentError naming it).  Pass the arguments after output_final_state by keyword: FLA
    0.6.0 orders them otherwise.  Every rejection is a GdnError subclass naming the argument,
    raised before anything is launched.
    """
    call = _Call(q, k, v, g, beta, scale, initial_state, output_final_state, cu_seqlens, use_qk_l2norm_in_kernel,
                 spine, kwargs)
    out, final = call.outputs()
    if call.plan:
        call.materialise(out, final)
    call.run(out, final)
    return out, final


def explain_copies(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, scale: Optional[float] = None,
                   initial_state: Optional[Tensor] = None, output_final_state: bool = False,
                   cu_seqlens: Optional[Tensor] = None, use_qk_l2norm_in_kernel: bool = False, *,
                   spine: str = "auto", **kwargs: Any) -> dict[str, str]:
    """The copies chunk_gated_delta_rule(same arguments) makes, without making them or launching
    anything: {argument: why}, empty when the kernels read every tensor where it is.

    A layout copy names the rule the tensor breaks (last dim not contiguous, strides or base
    TMA cannot read, [B, T] dims that are no view of one, a state block that is not contiguous);
    a conversion names the dtype (g to float32, initial_state to float32, cu_seqlens to int32).
    Raises what the call would raise, the device rules aside: the tensors may live on the CPU or
    be "meta" tensors, on one device (as for explain(); the planned copies are allocated there,
    not made).
    """
    call = _Call(q, k, v, g, beta, scale, initial_state, output_final_state, cu_seqlens, use_qk_l2norm_in_kernel,
                 spine, kwargs)
    out, final = call.outputs()
    if call.plan:
        import torch
        for name, (_, dtype) in call.plan.items():
            src = call.tensors[name]
            call.tensors[name] = torch.empty(src.shape, dtype=dtype, device=src.device)
    call.check(out, final)
    return call.copies


_EQUAL_LENGTHS: dict[tuple[int, int, Any], Tensor] = {}


def _equal_lengths(B: int, T: int, device: Any) -> Tensor:
    """cu_seqlens of B sequences of T tokens on `device`, made once (by a kernel: no host copy) and
    kept: read only, so every call and stream may share it."""
    key = (B, T, device)
    cu = _EQUAL_LENGTHS.get(key)
    if cu is None:
        import torch
        cu = torch.arange(0, (B + 1) * T, max(T, 1), dtype=torch.int32, device=device)[:B + 1]
        if len(_EQUAL_LENGTHS) >= 256:      # a bound on the shapes kept (each entry is B + 1 ints)
            _EQUAL_LENGTHS.clear()
        _EQUAL_LENGTHS[key] = cu
    return cu


def release_workspaces() -> None:
    """Drop the workspaces chunk_gated_delta_rule keeps, one per (device, stream) it ran on, each
    as large as its largest call needed (their memory returns to torch's caching allocator)."""
    _ext._release_fla_workspaces()  # type: ignore[attr-defined]  # a private entry: no stub
