"""FlashInfer-shaped API: `chunk_gated_delta_rule` with FlashInfer 0.7.2's signature, over prefill().

A serving backend that calls FlashInfer's SM90 GDN prefill switches by changing one import:

    # from flashinfer.gdn_prefill import chunk_gated_delta_rule
    from gdn_prefill.flashinfer_api import chunk_gated_delta_rule

Its conventions are FlashInfer's: q, k, v packed [T, H, 128]; `g` the decay factor alpha =
exp(log-decay), fp32 [T, Hv]; states [N, Hv, V, K] (our "vk" layout, used in place); `cu_seqlens`
required (int32, or int64 converted on the device); preallocated `output` / `output_state`; with
`state_indices` (int32 or int64), `initial_state` and `output_state` are a state pool (in place
when they are the same tensor).  Checkpoints as FlashInfer writes them: with
checkpoint_every_n_tokens = c > 0, sequence n's j-th state after every c tokens (j < its length //
c, the last the final state when the length is a multiple of c) goes into row
checkpoint_cu_starts[n] + j of `state_checkpoints` [total, Hv, V, K] (the pools' dtype); the rows
become prefill()'s checkpoint table on the device (no host sync) and the kernels write the rows
directly.  The differences are deliberate and say so when they matter: the conversion it makes is
alpha -> log(alpha) (one elementwise kernel over [T, Hv]; alpha is floored at the smallest normal
fp32, so that alpha = 0 gives a finite -87.3 rather than -inf, whose differences would be NaN);
strided inputs are used as they are; more q heads than v heads (FlashInfer's GQA output heads)
are rejected with an error naming the argument; `use_cp` and `backend` are accepted for the
signature's sake, and the plan (serial or segmented, explain()["plan"]) is the library's own.
Every rejection is a GdnError raised before any launch.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional, Union

from . import _ext
from ._ext import _check_tensor  # type: ignore[attr-defined]  # a private helper: no stub
from .errors import GdnArgumentError, GdnDeviceError, GdnDtypeError, GdnError, GdnShapeError, GdnTypeError

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
    every = _checkpoint_every(checkpoint_every_n_tokens, state_checkpoints, checkpoint_cu_starts)
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
    cu = cu_seqlens            # int64 offsets: prefill() converts them on the device
    table = None
    if every:
        table = _checkpoint_table(checkpoint_cu_starts, state_checkpoints, cu, every, T, v.device)
    out = output if output is not None else torch.empty(v.shape, dtype=v.dtype, device=v.device)
    state: Optional[Tensor] = None
    if final:
        state = output_state
        if state is None:
            N = cu.shape[0] - 1 if cu.dim() == 1 else 0
            state = torch.empty(N, Hv, v.shape[-1], v.shape[-1], device=v.device,
                                dtype=initial_state.dtype if initial_state is not None else torch.float32)
    in_place = state is not None and initial_state is state
    try:
        _ext.prefill(q, k, v, log_g, beta, out, state, cu_seqlens=cu, state_indices=state_indices,
                     state_layout="vk", scale=scale, use_qk_l2norm=l2,
                     initial_state=None if in_place else initial_state,
                     has_initial_state=initial_state is not None, max_seqlen=max_seqlen,
                     checkpoint_every=every or None, checkpoints=table,
                     checkpoint_pool=state_checkpoints if every else None)
    except GdnError as e:
        raise _in_flashinfer_names(e) from None
    return (out, state) if final else out


# prefill()'s names of the arguments this door builds from FlashInfer's own
_PREFILL_NAMES = {"checkpoint_pool": "state_checkpoints", "checkpoints": "checkpoint_cu_starts (the table made "
                  "from it)", "state": "output_state"}


def _in_flashinfer_names(e: Exception) -> Exception:
    """A rejection raised by prefill(), naming the argument as this door's caller passed it."""
    head, sep, rest = str(e).partition(": ")
    if sep and head in _PREFILL_NAMES:
        return type(e)(f"{_PREFILL_NAMES[head]}: {rest}")
    return e


def _checkpoint_every(every: Any, buffers: Optional[Tensor], cu_starts: Optional[Tensor]) -> int:
    """FlashInfer's checkpoint arguments checked: the interval in tokens (0: none), given with both
    buffers, or without either."""
    if isinstance(every, bool) or not isinstance(every, int):
        raise GdnTypeError(f"checkpoint_every_n_tokens: must be an int, got {type(every).__qualname__}")
    if every < 0 or every % 64:
        raise GdnArgumentError(f"checkpoint_every_n_tokens: must be 0 or a positive multiple of 64 (the chunk), "
                               f"got {every}")
    if every == 0:
        for name, x in (("state_checkpoints", buffers), ("checkpoint_cu_starts", cu_starts)):
            if x is not None:
                raise GdnArgumentError(f"{name}: given with checkpoint_every_n_tokens=0 (no checkpoints); pass the "
                                       "interval, or leave the buffer out")
        return 0
    for name, x in (("state_checkpoints", buffers), ("checkpoint_cu_starts", cu_starts)):
        if x is None:
            raise GdnArgumentError(f"{name}: required with checkpoint_every_n_tokens={every}")
    return every


def _checkpoint_table(cu_starts: Tensor, buffers: Tensor, cu_seqlens: Tensor, every: int, T: int,
                      device: Any) -> Tensor:
    """prefill()'s checkpoint table [N, J] int32 from FlashInfer's prefix sums: entry (n, j) is row
    cu_starts[n] + j of state_checkpoints for j < cu_starts[n + 1] - cu_starts[n], else -1.  Made on
    the device (three small elementwise kernels, no host sync); J bounds any sequence's count by
    the call's tokens and the buffer's rows.  A sequence writes only rows of its own range."""
    import torch

    if cu_starts.dim() != 1 or cu_starts.shape[0] != cu_seqlens.shape[0]:
        raise GdnShapeError(f"checkpoint_cu_starts: must be [N + 1] = [{cu_seqlens.shape[0]}] (cu_seqlens' shape), "
                            f"got {list(cu_starts.shape)}")
    if cu_starts.dtype not in (torch.int32, torch.int64):
        raise GdnDtypeError(f"checkpoint_cu_starts: dtype must be int32 or int64, got {cu_starts.dtype}")
    if cu_starts.device != device:
        raise GdnDeviceError(f"checkpoint_cu_starts: is on {cu_starts.device} but the other tensors are on {device}; "
                             "all tensors must be on one device")
    if buffers.dim() != 4:
        raise GdnShapeError(f"state_checkpoints: must be [total, Hv, 128, 128], got {buffers.dim()} dims")
    J = max(1, min(int(buffers.shape[0]), T // every))
    j = torch.arange(J, dtype=cu_starts.dtype, device=device)
    first = cu_starts[:-1, None]
    rows = first + j
    return torch.where(rows < cu_starts[1:, None], rows, -1).to(torch.int32)
