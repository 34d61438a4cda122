"""FLA-shaped API: `chunk_gated_delta_rule` with FLA's [B, T, H, D] shapes, over prefill().

A user of fla.ops.gated_delta_rule switches by changing one import.  Differences
from FLA are deliberate and documented: q/k/v must be bf16 with K = V = 128, and
strided inputs are used as they are (never copied).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from . import _ext
from ._ext import _check_tensor  # type: ignore[attr-defined]  # a private helper: no stub
from .errors import GdnArgumentError, GdnDtypeError, GdnLayoutError, GdnShapeError, GdnTypeError

if TYPE_CHECKING:
    from torch import Tensor


_RANKS = (("q", 4), ("k", 4), ("v", 4), ("g", 3), ("beta", 3))


def _numpy_bool(x: object) -> bool:
    """numpy.bool_ (prefill()'s flags take it; it has no __index__ since numpy 2)."""
    return type(x).__module__ == "numpy" and getattr(x, "ndim", None) == 0 and getattr(x, "dtype", None) == bool


def chunk_gated_delta_rule(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, scale: Optional[float] = None,
                           initial_state: Optional[Tensor] = None, output_final_state: bool = False,
                           cu_seqlens: Optional[Tensor] = None, use_qk_l2norm_in_kernel: bool = False, *,
                           spine: str = "auto", **unused: Any) -> tuple[Tensor, Optional[Tensor]]:
    """o, final_state = chunk_gated_delta_rule(q, k, v, g, beta, ...), as in FLA.

    q, k [B, T, Hk, K]; v [B, T, Hv, V]; g, beta [B, T, Hv]; with cu_seqlens, B must
    be 1 and the sequences are packed along T.  initial_state [N, Hv, K, V] fp32
    (N = B, or len(cu_seqlens) - 1).  Returns o [B, T, Hv, V] (dtype of v) and the
    final state [N, Hv, K, V] fp32 when output_final_state, else None.  Every rejection is a
    GdnError subclass naming the argument, raised before anything is launched.
    """
    import torch

    for name in unused:
        if name not in ("cu_seqlens_cpu", "head_first"):
            raise GdnArgumentError(f"{name}: not an argument of chunk_gated_delta_rule")
    if unused.get("head_first"):
        raise GdnArgumentError("head_first: only head_first=False ([B, T, H, D]) is supported")
    # prefill()'s rule for a tensor's kind, before this layer reshapes or copies the tensors
    args: dict[str, Tensor] = dict(q=q, k=k, v=v, g=g, beta=beta)
    for name, rank in _RANKS:
        t = args[name]
        _check_tensor(t, name)
        if t.dim() != rank:
            raise GdnShapeError(f"{name}: must have {rank} dims ({'[B, T, H, D]' if rank == 4 else '[B, T, H]'}), "
                                f"got {t.dim()}")
    for name, opt in (("initial_state", initial_state), ("cu_seqlens", cu_seqlens)):
        if opt is not None:
            _check_tensor(opt, name)
    for name, flag in (("output_final_state", output_final_state),
                       ("use_qk_l2norm_in_kernel", use_qk_l2norm_in_kernel)):
        if not isinstance(flag, bool) and not (isinstance(flag, int) and flag in (0, 1)) and not _numpy_bool(flag):
            raise GdnTypeError(f"{name}: must be a bool, got {type(flag).__qualname__}")
    B, T = q.shape[0], q.shape[1]
    if cu_seqlens is not None:
        if B != 1:
            raise GdnShapeError(f"q: batch size must be 1 with cu_seqlens, got {B}")
        if cu_seqlens.dim() != 1:
            raise GdnShapeError(f"cu_seqlens: must have 1 dim, got {cu_seqlens.dim()}")
        if cu_seqlens.dtype != torch.int32:
            if cu_seqlens.dtype not in (torch.int64, torch.int16, torch.uint8, torch.int8):
                raise GdnDtypeError(f"cu_seqlens: dtype must be an integer type, got {cu_seqlens.dtype}")
            cu_seqlens = cu_seqlens.to(torch.int32)
        N = cu_seqlens.shape[0] - 1
    else:
        cu_seqlens = _equal_lengths(B, T, q.device)
        N = B
    if g.dtype != torch.float32:
        if not g.dtype.is_floating_point:
            raise GdnDtypeError(f"g: dtype must be a floating-point type (read as float32), got {g.dtype}")
        g = g.float()  # an exact upcast; the kernels read fp32 log-decay
    if initial_state is not None and initial_state.dtype != torch.float32:
        initial_state = initial_state.float()   # the kernels read fp32 states (FLA converts too)
    # one allocation per output; the kernels read initial_state where it is (FLA leaves it untouched)
    # and write the final state into a tensor of its own
    out = torch.empty_like(v, memory_format=torch.contiguous_format)
    final = None
    if output_final_state:
        final = torch.empty(N, v.shape[2], k.shape[-1], v.shape[-1], dtype=torch.float32, device=q.device)
    try:
        _run(q, k, v, g, beta, out, final, initial_state, cu_seqlens, scale, use_qk_l2norm_in_kernel, spine)
    except GdnLayoutError as err:
        if initial_state is None or not str(err).startswith("initial_state:"):
            raise
        # FLA takes any strides and offsets; the kernels read each head's 128 x 128 block whole and
        # 16-byte aligned: a fresh contiguous copy
        _run(q, k, v, g, beta, out, final, initial_state.clone(memory_format=torch.contiguous_format), cu_seqlens,
             scale, use_qk_l2norm_in_kernel, spine)
    return out, final


def _run(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, out: Tensor, final: Optional[Tensor],
         initial_state: Optional[Tensor], cu_seqlens: Tensor, scale: Optional[float], use_qk_l2norm: bool,
         spine: str) -> None:
    """prefill() on FLA's [B, T, ...] tensors: viewed as [B * T, ...] by the extension, or, where
    that is no view, flattened by torch (a copy, as FLA's own flatten makes)."""
    ran = _ext._prefill_fla(  # type: ignore[attr-defined]  # a private entry: no stub
        q, k, v, g, beta, out, final, initial_state, initial_state is not None, cu_seqlens, scale, use_qk_l2norm, spine)
    if ran is None:
        _ext.prefill(q.flatten(0, 1), k.flatten(0, 1), v.flatten(0, 1), g.flatten(0, 1), beta.flatten(0, 1),
                     out.flatten(0, 1), final, cu_seqlens=cu_seqlens, scale=scale, use_qk_l2norm=use_qk_l2norm,
                     spine=spine, initial_state=initial_state, has_initial_state=initial_state is not None)


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
