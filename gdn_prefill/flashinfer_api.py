"""FlashInfer-shaped API: `chunk_gated_delta_rule` with FlashInfer 0.7.2's signature, over prefill().

A serving backend that calls FlashInfer's SM90 GDN prefill switches by changing one import:

    # from flashinfer.gdn_prefill import chunk_gated_delta_rule
    from gdn_prefill.flashinfer_api import chunk_gated_delta_rule

Its conventions are FlashInfer's: q, k, v packed [T, H, 128]; `g` the decay factor alpha =
exp(log-decay), fp32 [T, Hv]; states [N, Hv, V, K] (our "vk" layout, used in place); `cu_seqlens`
required (int32, or int64 converted); preallocated `output` / `output_state`; with
`state_indices`, `initial_state` and `output_state` are a state pool (in place when they are the
same tensor).  The differences are deliberate and say so when they matter: the one conversion it
makes is alpha -> log(alpha) (one elementwise kernel over [T, Hv]; alpha is floored at the
smallest normal fp32, so that alpha = 0 gives a finite -87.3 rather than -inf, whose differences
would be NaN); strided inputs are used as they are; more q heads than v heads (FlashInfer's GQA
output heads) and FlashInfer's checkpoint buffers (`state_checkpoints`, `checkpoint_cu_starts`)
are rejected with an error naming the argument (prefill()'s checkpoints go into the state pool);
`use_cp` and `backend` are accepted for the signature's sake, and the plan (serial or segmented,
explain()["plan"]) is the library's own.  Every rejection is a GdnError raised before any launch.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional, Union

from . import _ext
from ._ext import _check_tensor  # type: ignore[attr-defined]  # a private helper: no stub
from .errors import GdnArgumentError, GdnDtypeError, GdnShapeError, GdnTypeError

if TYPE_CHECKING:
    from torch import Tensor

def _flag(name: str, x: object) -> bool:
    if isinstance(x, bool):
        return x
    raise GdnTypeError(f"{name}: must be a bool, got {type(x).__qualname__}")


def chunk_gated_delta_rule(q: Tensor, k: Tensor, v: Tensor, g: Optional[Tensor] = None,
                           beta: Optional[Tensor] = None, scale: Optional[float] = None,
                           initial_state: Optional[Tensor] = None, output_final_state: bool = False,
                           cu_seqlens: Optional[Tensor] = None, use_qk_l2norm_in_kernel: bool = False,
                           output: Optional[Tensor] = None, output_state: Optional[Tensor] = None,
                           state_checkpoints: Optional[Tensor] = None, checkpoint_cu_starts: Optional[Tensor] = None,
                           checkpoint_every_n_tokens: int = 0, use_cp: Any = "auto",
                           state_indices: Optional[Tensor] = None, _cp_chunk_len: Optional[int] = None,
                           backend: str = "auto", max_seqlen: Optional[int] = None,
                           ) -> Union[Tensor, tuple[Tensor, Tensor]]:
    """output, or (output, final_state) with output_final_state, as FlashInfer returns them.

    q, k [T, Hk, 128]; v [T, Hv, 128] bf16 (Hv a multiple of Hk); g (alpha) and beta fp32
    [T, Hv] (None: ones); cu_seqlens [N + 1]; initial_state [N, Hv, 128, 128] ("vk": S[v, k]),
    or with state_indices [N] a pool [P, Hv, 128, 128]; output [T, Hv, 128] and output_state as
    initial_state (allocated when None; with state_indices output_state is required when
    output_final_state).  The final state has the initial state's dtype (fp32 without one).
    """
    import torch

    for name, t in (("q", q), ("k", k), ("v", v)):
        _check_tensor(t, name)
    for name, opt in (("g", g), ("beta", beta), ("initial_state", initial_state), ("cu_seqlens", cu_seqlens),
                      ("output", output), ("output_state", output_state), ("state_indices", state_indices),
                      ("state_checkpoints", state_checkpoints), ("checkpoint_cu_starts", checkpoint_cu_starts)):
        if opt is not None:
            _check_tensor(opt, name)
    final = _flag("output_final_state", output_final_state)
    l2 = _flag("use_qk_l2norm_in_kernel", use_qk_l2norm_in_kernel)
    if cu_seqlens is None:
        raise GdnArgumentError("cu_seqlens: required (FlashInfer's convention: [N + 1] offsets of the packed "
                               "sequences)")
    if state_checkpoints is not None or checkpoint_cu_starts is not None or checkpoint_every_n_tokens:
        name = ("state_checkpoints" if state_checkpoints is not None else
                "checkpoint_cu_starts" if checkpoint_cu_starts is not None else "checkpoint_every_n_tokens")
        raise GdnArgumentError(f"{name}: FlashInfer's checkpoint buffers are not supported by this door; "
                               "gdn_prefill.prefill(checkpoint_every=..., checkpoints=...) writes checkpoints "
                               "into slots of the state pool")
    if use_cp not in ("auto", True, False) or isinstance(use_cp, int) and not isinstance(use_cp, bool):
        raise GdnArgumentError(f"use_cp: must be 'auto', True or False, got {use_cp!r}")
    if backend not in ("auto", "flashinfer"):
        raise GdnArgumentError(f"backend: must be 'auto' or 'flashinfer' (this library's kernels), got {backend!r}")
    if _cp_chunk_len is not None:
        raise GdnArgumentError("_cp_chunk_len: the segment length is the library's planner's (explain()['plan'])")
    if q.dim() == 3 and v.dim() == 3 and q.shape[1] > v.shape[1]:
        raise GdnShapeError(f"q: {q.shape[1]} q heads for {v.shape[1]} v heads; FlashInfer's GQA (output heads = "
                            "q heads) is not supported: v heads must be a multiple of the q / k heads")
    if final and state_indices is not None and output_state is None:
        raise GdnArgumentError("output_state: required with state_indices and output_final_state (the pool the "
                               "final states are written into)")
    if v.dim() != 3:
        raise GdnShapeError(f"v: must have 3 dims [T, Hv, 128], got {v.dim()}")
    T, Hv = v.shape[0], v.shape[1]
    if g is None:
        log_g = torch.zeros(T, Hv, dtype=torch.float32, device=v.device)
    else:
        if g.dtype != torch.float32:
            raise GdnDtypeError(f"g: the decay factor alpha must be float32, got {g.dtype}")
        log_g = torch.clamp_min(g, torch.finfo(torch.float32).tiny).log_()
    if beta is None:
        beta = torch.ones(T, Hv, dtype=torch.float32, device=v.device)
    cu = cu_seqlens if cu_seqlens.dtype != torch.int64 else cu_seqlens.to(torch.int32)
    out = output if output is not None else torch.empty(v.shape, dtype=v.dtype, device=v.device)
    state: Optional[Tensor] = None
    if final:
        state = output_state
        if state is None:
            N = cu.shape[0] - 1 if cu.dim() == 1 else 0
            state = torch.empty(N, Hv, v.shape[-1], v.shape[-1], device=v.device,
                                dtype=initial_state.dtype if initial_state is not None else torch.float32)
    in_place = state is not None and initial_state is state
    _ext.prefill(q, k, v, log_g, beta, out, state, cu_seqlens=cu, state_indices=state_indices, state_layout="vk",
                 scale=scale, use_qk_l2norm=l2, initial_state=None if in_place else initial_state,
                 has_initial_state=initial_state is not None, max_seqlen=max_seqlen)
    return (out, state) if final else out
