"""`torch.ops.gdn_prefill.prefill`: the prefill as a PyTorch custom operator.

Importing this module registers ``gdn_prefill::prefill`` with ``torch.library.custom_op``
so that the prefill can sit inside ``torch.compile(fullgraph=True)`` graphs, CUDA graphs
and ``torch.export`` programs without a graph break:

    import gdn_prefill.ops
    gdn_prefill.ops.prefill_op(q, k, v, g, beta, out, state, cu_seqlens=cu, state_layout="vk")
    # the op itself takes every argument (none has a default):
    torch.ops.gdn_prefill.prefill(q, k, v, g, beta, out, state, cu, None, "kv", None, False, "auto", None,
                                  None, None, None, True, None, None, None, False)

Schema (what the compiler sees):

    gdn_prefill::prefill(Tensor q, Tensor k, Tensor v, Tensor g, Tensor beta, Tensor(a5!) out,
        Tensor(a6!)? state, Tensor? cu_seqlens, Tensor? state_indices, str state_layout,
        float? scale, bool use_qk_l2norm, str spine, Tensor(a13!)? workspace,
        Tensor? checkpoints, SymInt? checkpoint_every, Tensor? initial_state, bool has_initial_state,
        SymInt? max_seqlen, Tensor(a19!)? checkpoint_pool, Tensor? has_initial,
        bool batch_invariant) -> ()

The operator writes ``out`` and updates ``state`` (and scratch ``workspace``) in place (the
checkpoints, when asked for, go into slots of ``checkpoint_pool``, or of ``state``) and
returns nothing; it runs on the current CUDA stream.  ``has_initial`` is prefill()'s per-sequence
``has_initial_state`` tensor (the schema's ``has_initial_state`` is the flag for every sequence;
prefill_op takes either as ``has_initial_state``).  Use ``gdn_prefill.prefill`` directly
when you want the name of the spine that ran (the operator cannot return a string).

The fake (meta) implementation runs the same validation as ``prefill`` whenever every
shape and stride is concrete, so a bad argument is rejected while a graph is traced, with
the same error class and message as at run time; with symbolic shapes it checks nothing
and the run-time call validates.
"""
from __future__ import annotations

from typing import Optional, Sequence

import torch
from torch import Tensor

from . import _ext
from ._ext import _check_tensor  # type: ignore[attr-defined]  # a private helper: no stub
from .errors import GdnDeviceError, GdnTypeError

__all__ = ["prefill_op", "OP_NAME"]

OP_NAME = "gdn_prefill::prefill"


# No argument has a default: torch 2.11 drops trailing arguments equal to their defaults
# when it normalises a call, then indexes the mutated ones by position (an IndexError seen
# on the H200 with `workspace=None`).  prefill_op() supplies every argument.
@torch.library.custom_op(OP_NAME, mutates_args=("out", "state", "workspace", "checkpoint_pool"))
def _prefill(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, out: Tensor,
             state: Optional[Tensor], cu_seqlens: Optional[Tensor],
             state_indices: Optional[Tensor], state_layout: str, scale: Optional[float],
             use_qk_l2norm: bool, spine: str, workspace: Optional[Tensor], checkpoints: Optional[Tensor],
             checkpoint_every: Optional[int], initial_state: Optional[Tensor], has_initial_state: bool,
             max_seqlen: Optional[int], checkpoint_pool: Optional[Tensor], has_initial: Optional[Tensor],
             batch_invariant: bool) -> None:
    # No device_types restriction: CPU tensors reach prefill(), which names the argument
    # ("q: must be a CUDA tensor ...") instead of a dispatcher "no kernel for CPU" error.
    _ext.prefill(q, k, v, g, beta, out, state, cu_seqlens=cu_seqlens, state_indices=state_indices,
                 state_layout=state_layout, scale=scale, use_qk_l2norm=use_qk_l2norm, spine=spine,
                 workspace=workspace, checkpoints=checkpoints, checkpoint_every=checkpoint_every,
                 initial_state=initial_state, has_initial_state=has_initial if has_initial is not None
                 else has_initial_state, max_seqlen=max_seqlen, checkpoint_pool=checkpoint_pool,
                 batch_invariant=batch_invariant)


def _concrete(x: Optional[Tensor]) -> bool:
    if x is None:
        return True
    return all(isinstance(d, int) for d in (*x.shape, *x.stride(), x.storage_offset()))


# Each distinct storage gets its own (fake) base address, _SPACING bytes apart: 256-byte
# aligned like a CUDA allocation, and far enough apart that unrelated tensors never overlap.
_SPACING = 1 << 40
_NAMES = ("q", "k", "v", "g", "beta", "out", "state", "cu_seqlens", "state_indices", "workspace", "checkpoints",
          "initial_state", "checkpoint_pool", "has_initial_state")


def _storage_key(x: Tensor) -> object:
    try:
        from torch.multiprocessing.reductions import StorageWeakRef
        return StorageWeakRef(x.untyped_storage())  # type: ignore[no-untyped-call]
    except Exception:  # a tensor subclass without a storage: treat it as its own
        return id(x)


def _meta_views(tensors: Sequence[Optional[Tensor]]) -> list[Optional[Tensor]]:
    """Plain meta tensors with the dtypes, shapes, strides and storage offsets of `tensors`.

    A meta tensor's data_ptr() is its storage offset in bytes, so each view is placed at
    base + offset in one large meta storage per distinct input storage: the alignment guards
    see the alignment a real view at that offset would have (from a 256-byte aligned
    allocation), and the aliasing guards see views of one storage overlap and views of
    different storages not.
    """
    bases: dict[object, int] = {}
    views: list[Optional[Tensor]] = []
    for x in tensors:
        if x is None:
            views.append(None)
            continue
        slot = bases.setdefault(_storage_key(x), len(bases) + 1)
        es = x.element_size()
        offset = slot * (_SPACING // es) + x.storage_offset()
        extent = offset + 1 + sum((n - 1) * s for n, s in zip(x.shape, x.stride()) if n > 0)
        base = torch.empty(extent, dtype=x.dtype, device="meta")
        views.append(base.as_strided(tuple(x.shape), tuple(x.stride()), offset))
    return views


@_prefill.register_fake
def _prefill_fake(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, out: Tensor,
                  state: Optional[Tensor], cu_seqlens: Optional[Tensor],
                  state_indices: Optional[Tensor], state_layout: str, scale: Optional[float],
                  use_qk_l2norm: bool, spine: str, workspace: Optional[Tensor], checkpoints: Optional[Tensor],
                  checkpoint_every: Optional[int], initial_state: Optional[Tensor], has_initial_state: bool,
                  max_seqlen: Optional[int], checkpoint_pool: Optional[Tensor], has_initial: Optional[Tensor],
                  batch_invariant: bool) -> None:
    tensors = (q, k, v, g, beta, out, state, cu_seqlens, state_indices, workspace, checkpoints, initial_state,
               checkpoint_pool, has_initial)
    # prefill()'s order: each tensor's kind (a sparse one has no strides to make a view of), then
    # the devices.
    for name, x in zip(_NAMES, tensors):
        if x is not None:
            _check_tensor(x, name)
    # The dispatcher also lands here for a real call with one meta tensor among CUDA ones (the Meta
    # key wins): prefill()'s one-device rule, or that call would return having written nothing.
    devices = [(name, x.device) for name, x in zip(_NAMES, tensors) if x is not None]
    for name, dev in devices[1:]:
        if dev != devices[0][1]:
            raise GdnDeviceError(f"{name}: is on {dev} but {devices[0][0]} is on {devices[0][1]}; "
                                 "all tensors must be on one device")
    if not all(_concrete(x) for x in tensors):
        return None  # symbolic shapes: the run-time call validates
    from torch._subclasses.fake_tensor import unset_fake_temporarily
    with unset_fake_temporarily():
        views = _meta_views(tensors)
        required = [x for x in views[:6] if x is not None]
        mq, mk, mv, mg, mb, mo = required
        ms, mc, mi, mw, mck, minit, mpool, mmask = views[6:]
        # the workspace too: its size, dtype, alignment and no bytes shared with a tensor
        _ext.explain(mq, mk, mv, mg, mb, mo, ms, cu_seqlens=mc, state_indices=mi, state_layout=state_layout,
                     scale=scale, use_qk_l2norm=use_qk_l2norm, spine=spine, workspace=mw, checkpoints=mck,
                     checkpoint_every=checkpoint_every, initial_state=minit,
                     has_initial_state=mmask if mmask is not None else has_initial_state,
                     max_seqlen=max_seqlen, check_device=False, checkpoint_pool=mpool,
                     batch_invariant=batch_invariant)
    return None


def prefill_op(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, out: Tensor,
               state: Optional[Tensor] = None, *, cu_seqlens: Optional[Tensor] = None,
               state_indices: Optional[Tensor] = None, state_layout: str = "kv", scale: Optional[float] = None,
               use_qk_l2norm: bool = False, spine: str = "auto", workspace: Optional[Tensor] = None,
               checkpoint_every: Optional[int] = None, checkpoints: Optional[Tensor] = None,
               initial_state: Optional[Tensor] = None, has_initial_state: bool | Tensor = True,
               max_seqlen: Optional[int] = None, checkpoint_pool: Optional[Tensor] = None,
               batch_invariant: bool = False) -> None:
    """``torch.ops.gdn_prefill.prefill`` with prefill()'s signature (no ``stream``: the
    current stream is used).  Writes ``out`` and updates ``state`` in place; returns None.
    Arguments of the wrong type raise GdnTypeError naming the argument (the operator's own
    schema check would raise torch's RuntimeError)."""
    for name, x, required in (("q", q, True), ("k", k, True), ("v", v, True), ("g", g, True),
                              ("beta", beta, True), ("out", out, True), ("state", state, False),
                              ("cu_seqlens", cu_seqlens, False), ("state_indices", state_indices, False),
                              ("workspace", workspace, False), ("checkpoints", checkpoints, False),
                              ("initial_state", initial_state, False), ("checkpoint_pool", checkpoint_pool, False)):
        # plain isinstance, not _ext._check_tensor: torch.compile traces this wrapper, and a call into
        # the extension would break its graph (the op's fake implementation applies the full rule)
        if not isinstance(x, Tensor) and (required or x is not None):
            raise GdnTypeError(f"{name}: must be a torch.Tensor{'' if required else ' or None'}, "
                               f"got {type(x).__qualname__}")
    for name, opt in (("state_layout", state_layout), ("spine", spine)):
        if not isinstance(opt, str):
            raise GdnTypeError(f"{name}: must be a str, got {type(opt).__qualname__}")
    if scale is not None and (isinstance(scale, bool) or not isinstance(scale, (int, float))):
        raise GdnTypeError(f"scale: must be a real number or None, got {type(scale).__qualname__}")
    for name, flag in (("use_qk_l2norm", use_qk_l2norm), ("batch_invariant", batch_invariant)):
        if not isinstance(flag, bool):
            raise GdnTypeError(f"{name}: must be a bool, got {type(flag).__qualname__}")
    mask = has_initial_state if isinstance(has_initial_state, Tensor) else None
    if mask is None and not isinstance(has_initial_state, bool):
        raise GdnTypeError(f"has_initial_state: must be a bool or a per-sequence tensor [N], "
                           f"got {type(has_initial_state).__qualname__}")
    if checkpoint_every is not None and (isinstance(checkpoint_every, bool) or not isinstance(checkpoint_every, int)):
        raise GdnTypeError(f"checkpoint_every: must be an int (tokens) or None, got {type(checkpoint_every).__qualname__}")
    if max_seqlen is not None and (isinstance(max_seqlen, bool) or not isinstance(max_seqlen, int)):
        raise GdnTypeError(f"max_seqlen: must be an int (tokens) or None, got {type(max_seqlen).__qualname__}")
    torch.ops.gdn_prefill.prefill(q, k, v, g, beta, out, state, cu_seqlens, state_indices, state_layout,
                                  scale, use_qk_l2norm, spine, workspace, checkpoints, checkpoint_every, initial_state,
                                  True if mask is not None else has_initial_state, max_seqlen, checkpoint_pool, mask,
                                  batch_invariant)
