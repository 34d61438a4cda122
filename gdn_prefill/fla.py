"""FLA-shaped API: `chunk_gated_delta_rule` with FLA's [B, T, H, D] shapes, over prefill().

A user of fla.ops.gated_delta_rule switches by changing one import.  Differences
from FLA are deliberate and documented: q/k/v must be bf16 with K = V = 128, and
strided inputs are used as they are (never copied).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from . import _ext
from .errors import GdnArgumentError, GdnShapeError

if TYPE_CHECKING:
    from torch import Tensor


def chunk_gated_delta_rule(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, scale: Optional[float] = None,
                           initial_state: Optional[Tensor] = None, output_final_state: bool = False,
                           cu_seqlens: Optional[Tensor] = None, use_qk_l2norm_in_kernel: bool = False, *,
                           spine: str = "auto", **unused: Any) -> tuple[Tensor, Optional[Tensor]]:
    """o, final_state = chunk_gated_delta_rule(q, k, v, g, beta, ...), as in FLA.

    q, k [B, T, Hk, K]; v [B, T, Hv, V]; g, beta [B, T, Hv]; with cu_seqlens, B must
    be 1 and the sequences are packed along T.  initial_state [N, Hv, K, V] fp32
    (N = B, or len(cu_seqlens) - 1).  Returns o [B, T, Hv, V] (dtype of v) and the
    final state [N, Hv, K, V] fp32 when output_final_state, else None.
    """
    import torch

    for name in unused:
        if name not in ("cu_seqlens_cpu", "head_first"):
            raise GdnArgumentError(f"{name}: not an argument of chunk_gated_delta_rule")
    if unused.get("head_first"):
        raise GdnArgumentError("head_first: only head_first=False ([B, T, H, D]) is supported")
    if q.dim() != 4:
        raise GdnShapeError(f"q: must be [B, T, H, K], got {q.dim()} dims")
    B, T = q.shape[0], q.shape[1]
    if cu_seqlens is not None:
        if B != 1:
            raise GdnShapeError(f"q: batch size must be 1 with cu_seqlens, got {B}")
        if cu_seqlens.dtype != torch.int32:
            cu_seqlens = cu_seqlens.to(torch.int32)
        N = cu_seqlens.shape[0] - 1
    else:
        # B equal-length sequences: offsets made on the device, no host copy.
        cu_seqlens = torch.arange(0, (B + 1) * T, T, dtype=torch.int32, device=q.device)
        N = B
    Hv = v.shape[2]

    def flat(x: Tensor) -> Tensor:  # [B, T, ...] -> [B*T, ...], a view when possible
        return x.flatten(0, 1)

    out = torch.empty_like(v)
    state = None
    if initial_state is not None or output_final_state:
        if initial_state is None:
            state = torch.zeros(N, Hv, k.shape[-1], v.shape[-1], dtype=torch.float32, device=q.device)
        else:
            # FLA leaves initial_state untouched: the kernel updates a copy in place.
            state = initial_state.to(torch.float32, copy=True)
    if g.dtype != torch.float32:
        g = g.float()  # an exact upcast; the kernels read fp32 log-decay
    _ext.prefill(flat(q), flat(k), flat(v), flat(g), flat(beta), flat(out), state, cu_seqlens=cu_seqlens,
                 scale=scale, use_qk_l2norm=use_qk_l2norm_in_kernel, spine=spine)
    return out, (state if output_final_state else None)
