"""A vLLM plugin: vLLM's Gated DeltaNet prefill served by gdn_prefill (vLLM 0.33).

Installing gdn-prefill is the switch: its `vllm.general_plugins` entry point
(`gdn_prefill = "gdn_prefill.integrations.vllm:register"`) is loaded by vLLM in every process
(`vllm.plugins.load_general_plugins`), and register() replaces two classes of vLLM by their
out-of-tree (OOT) registries, which vLLM consults each time it builds one:

- the op: `ChunkGatedDeltaRule`, the CustomOp vLLM's Qwen GDN layer calls for the chunked
  prefill (its `--gdn-prefill-backend`), by `CustomOp.register_oot`.  GdnChunkGatedDeltaRule
  takes the op's exact call (q, k, v [1, T, H, 128], g log-decay and beta fp32 [1, T, Hv],
  initial_state [N, Hv, V, K], cu_seqlens, ...) and returns what it returns ((o [1, T, Hv, V],
  final_state [N, Hv, V, K] or None)), through `chunk_gated_delta_rule()` below;
- the layer: `QwenGatedDeltaNetAttention` (Qwen3-Next, Qwen3.5), by `PluggableLayer.register_oot`.
  GdnQwenGatedDeltaNetAttention runs a prefill batch without speculative decoding straight into
  vLLM's state pool (`prefill_pool()` below): the pool and its slot indices go to prefill(), the
  per-sequence has_initial_state mask and the q / k l2norm into the kernel, the output into
  vLLM's output buffer.  Where the op is called (the layer's own path), vLLM gathers the pool's
  slots, zeroes the fresh ones, and scatters the final states back; this path does none of that.
  Every other batch (decode only, speculative decoding, FlashInfer checkpoint plans) runs vLLM's
  own code, which calls the op.  It is registered on vLLM 0.33.x only, the version whose
  `_forward_core` it was written against (other versions get the op alone, and a log line).

The op decides, once per layer when vLLM builds it, whose kernels run (vLLM's choice is read from
its `additional_config["gdn_prefill_backend"]`, which `--gdn-prefill-backend` sets):

- "auto" (vLLM's default): gdn_prefill's on a Hopper GPU (sm_90) with 128-dim key and value heads
  and a bf16 model; anywhere else vLLM's own backend, with a WARNING naming the reason;
- a backend of vLLM's ("flashinfer", "triton", ...): vLLM's own, as asked (INFO line);
- "gdn_prefill" (`--additional-config '{"gdn_prefill_backend": "gdn_prefill"}'`; vLLM's CLI flag
  only takes its own names): gdn_prefill's, or a GdnError naming the reason where it cannot run.

The layer follows the op's decision: when the op is vLLM's, the layer is vLLM's too.
`VLLM_PLUGINS` (vLLM's allow-list of plugin names) leaves the plugin out altogether;
`GDN_PREFILL_VLLM_LAYER=0` (read by register()) keeps the op and leaves the layer vLLM's.

vLLM is imported by register() and by the two class names (module attributes built on first
access), never when this module is imported; the functions chunk_gated_delta_rule() and
prefill_pool() need neither vLLM nor a GPU to be imported.  The vLLM facts this relies on, with
file and line numbers of vLLM 0.33.0: docs/INTEGRATIONS.md.
"""
from __future__ import annotations

import functools
import inspect
import logging
import os
import threading
from typing import TYPE_CHECKING, Any, Optional

import gdn_prefill

from ..errors import (GdnArgumentError, GdnDeviceError, GdnDtypeError, GdnLayoutError, GdnShapeError,
                      GdnTypeError)

if TYPE_CHECKING:
    from torch import Tensor

BACKEND = "gdn_prefill"
"""The op's `gdn_prefill_backend` when gdn_prefill's kernels run, and the additional_config value
that insists on them."""
OP_CLASS = "ChunkGatedDeltaRule"
"""The OOT registry key of the op: CustomOp.__new__ looks its class's __name__ up there."""
LAYER_CLASS = "QwenGatedDeltaNetAttention"
"""The OOT registry key of the layer (PluggableLayer.__new__, likewise by class name)."""
LAYER_VLLM = "0.33."
"""The vLLM releases whose QwenGatedDeltaNetAttention._forward_core the layer replacement mirrors."""
OP_PARAMETERS = ("q", "k", "v", "g", "beta", "initial_state", "output_final_state", "cu_seqlens", "chunk_indices",
                 "chunk_offsets", "use_qk_l2norm_in_kernel", "core_attn_out", "aiter_prefill_metadata")
"""The parameters of vLLM 0.33's ChunkGatedDeltaRule.forward_cuda / forward_native (self aside), in
order; register() refuses a vLLM whose op takes others."""

_log = logging.getLogger("gdn_prefill")
_lock = threading.Lock()
_classes: dict[str, type] = {}
_logged: set[str] = set()


def _log_once(level: int, msg: str) -> None:
    """Log msg once per process: vLLM builds the op once per GDN layer (dozens per model)."""
    if msg not in _logged:
        _logged.add(msg)
        _log.log(level, msg)


# The argument rules below are flashinfer_api's and _ext's; this module imports neither, because vLLM
# imports it in each of its processes (the API server's too) and the extension checks the CUDA driver
# when imported (gdn_prefill/_driver.py).
def _flag(name: str, x: object) -> bool:
    if isinstance(x, bool):
        return x
    raise GdnTypeError(f"{name}: must be a bool, got {type(x).__qualname__}")


def _tensor(name: str, x: object) -> Tensor:
    import torch
    if not isinstance(x, torch.Tensor):
        raise GdnTypeError(f"{name}: must be a torch.Tensor, got {type(x).__qualname__}")
    return x


# ----------------------------------------------------------------------------- the op's call
def chunk_gated_delta_rule(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor,
                           initial_state: Optional[Tensor], output_final_state: bool,
                           cu_seqlens: Optional[Tensor] = None, chunk_indices: Optional[Tensor] = None,
                           chunk_offsets: Optional[Tensor] = None, use_qk_l2norm_in_kernel: bool = True,
                           core_attn_out: Optional[Tensor] = None,
                           aiter_prefill_metadata: object = None, *,
                           batch_invariant: bool = False) -> tuple[Tensor, Optional[Tensor]]:
    """vLLM 0.33's ChunkGatedDeltaRule.forward (FLA's conventions), over prefill().

    q, k [B, T, Hk, 128], v [B, T, Hv, 128] bf16; g (log-space decay) and beta fp32 [B, T, Hv];
    with cu_seqlens ([N + 1], int32 or int64) B = 1 and the N sequences are packed along T, without
    it each of the B rows is a sequence; initial_state [N, Hv, V, K] (vLLM's and FlashInfer's
    state layout, prefill()'s "vk") of fp32, bf16, fp16 or fp8 e4m3, or None (start from zero).
    Returns (o [B, T, Hv, V] in v's dtype, final_state [N, Hv, V, K] or None without
    output_final_state).  q, k, v, g and beta are read where they are (a view of each row 0; vLLM
    passes contiguous tensors), the initial state is read as it is and left unchanged.

    Deliberate differences from vLLM's own backends, each for a reason:
    - the final state has the initial state's dtype (fp32 without one; FLA returns fp32 always):
      the layer converts it to its pool's dtype, which is the initial state's, so that conversion
      costs nothing and the state is rounded once, in the kernel, to nearest even as torch rounds;
    - with core_attn_out, the output is written into its first B * T * Hv * V elements directly
      and o is a view of them (FlashInfer's route computes o and copies it there); core_attn_out
      must then be contiguous and of v's dtype (vLLM's copy through reshape(-1) would write into
      a temporary otherwise);
    - chunk_indices, chunk_offsets (FLA's chunk tables) and aiter_prefill_metadata (ROCm's) are
      ignored: the kernels read cu_seqlens on the device and derive their own.
    batch_invariant (not vLLM's parameter: the op binds it from VLLM_BATCH_INVARIANT) is prefill()'s.
    Errors (GdnError subclasses naming the argument) are raised before any launch.
    """
    import torch
    final = _flag("output_final_state", output_final_state)
    l2 = _flag("use_qk_l2norm_in_kernel", use_qk_l2norm_in_kernel)
    ranks = (("q", q, 4), ("k", k, 4), ("v", v, 4), ("g", g, 3), ("beta", beta, 3))
    for name, x, rank in ranks:
        if _tensor(name, x).dim() != rank:
            raise GdnShapeError(f"{name}: must have {rank} dims ([B, T, ...], vLLM's layout), got {x.dim()}")
    B, T, Hv, V = v.shape
    for name, x, _ in ranks:
        if x.shape[0] != B:
            raise GdnShapeError(f"{name}: batch size {x.shape[0]}, v has {B}")
    if cu_seqlens is not None:
        if _tensor("cu_seqlens", cu_seqlens).dim() != 1:
            raise GdnShapeError(f"cu_seqlens: must have 1 dim [N + 1], got {cu_seqlens.dim()}")
        if B != 1:
            raise GdnShapeError(f"v: batch size {B} with cu_seqlens; packed sequences come as one row, B = 1 "
                                "(FLA's rule)")
        N = cu_seqlens.shape[0] - 1
        cu: Optional[Tensor] = cu_seqlens
    else:
        N = B
        cu = None if B == 1 else torch.arange(0, (B + 1) * T, T, dtype=torch.int32, device=v.device)
    qp, kp, vp, gp, bp = (_rows(name, x, B, T) for name, x, _ in ranks)
    out = (torch.empty((B * T, Hv, V), dtype=v.dtype, device=v.device) if core_attn_out is None
           else _output_view(core_attn_out, B * T, Hv, V, v.dtype))
    state: Optional[Tensor] = None
    if initial_state is not None:
        _tensor("initial_state", initial_state)
    if final:
        state = torch.empty((N, Hv, V, k.shape[-1]), device=v.device,
                            dtype=torch.float32 if initial_state is None else initial_state.dtype)
    gdn_prefill.prefill(qp, kp, vp, gp, bp, out, state, cu_seqlens=cu, state_layout="vk", use_qk_l2norm=l2,
                        initial_state=initial_state, has_initial_state=initial_state is not None,
                        batch_invariant=batch_invariant)
    return out.view(B, T, Hv, V), state


def _rows(name: str, x: Tensor, B: int, T: int) -> Tensor:
    """x [B, T, ...] as prefill()'s packed [B * T, ...]: row 0 for B = 1, else a view of the merged
    [B, T] dims (no copy: a layout that has none is refused by name)."""
    if B == 1:
        return x[0]
    try:
        return x.view(B * T, *x.shape[2:])
    except RuntimeError:
        raise GdnLayoutError(f"{name}: strides {tuple(x.stride())}: the [B, T] dims are no view of one [B * T] "
                             "dim; pass contiguous rows, or pack the sequences with cu_seqlens") from None


def _output_view(buf: Tensor, rows: int, Hv: int, V: int, dtype: Any) -> Tensor:
    """core_attn_out's first rows * Hv * V elements as [rows, Hv, V] (where vLLM's backends put o)."""
    _tensor("core_attn_out", buf)
    if buf.dtype != dtype:
        raise GdnDtypeError(f"core_attn_out: dtype {buf.dtype}; the output is v's, {dtype}")
    if not buf.is_contiguous():
        raise GdnLayoutError(f"core_attn_out: strides {tuple(buf.stride())}; the output goes into its first "
                             "T * Hv * V elements, which needs contiguous memory")
    if buf.numel() < rows * Hv * V:
        raise GdnShapeError(f"core_attn_out: {buf.numel()} elements, the output needs {rows * Hv * V} "
                            f"([{rows}, {Hv}, {V}])")
    return buf.view(-1)[:rows * Hv * V].view(rows, Hv, V)


# ----------------------------------------------------------------------------- the layer's call
def prefill_pool(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, out: Tensor, ssm_state: Tensor, *,
                 cu_seqlens: Tensor, state_indices: Tensor, has_initial_state: Tensor,
                 use_qk_l2norm: bool = True, max_seqlen: Optional[int] = None,
                 batch_invariant: bool = False) -> None:
    """A prefill batch of vLLM's GDN layer straight into its state pool, in place.

    q, k [T, Hk, 128], v [T, Hv, 128] bf16, g and beta fp32 [T, Hv] (vLLM's fused_post_conv_prep,
    run without its l2norm: use_qk_l2norm=True normalises q and k in the kernel); out [T, Hv, 128]
    (a row range of vLLM's core_attn_out); ssm_state the layer's pool [num_blocks, Hv, V, K] ("vk";
    its slot stride is the page size of vLLM's hybrid KV cache, free here); cu_seqlens [N + 1],
    state_indices [N] (int32 or int64: the metadata's prefill_query_start_loc and
    prefill_state_indices) and has_initial_state [N] (bool: prefill_has_initial_state; a false
    entry starts that sequence from zero, its slot's old contents unread).  Sequence n reads and
    writes slot state_indices[n]; max_seqlen is a host bound on the longest sequence (prefill()'s
    planning hint); batch_invariant is prefill()'s (the layer passes VLLM_BATCH_INVARIANT).

    vLLM's op route moves each sequence's state four more times (a gather of the slots, a
    fill of the fresh ones, a scatter of the final states, through a temporary) and copies the
    output once more; here the kernel reads and writes the slots themselves.  The one copy this
    makes: state_indices, where it is strided (vLLM takes them from column 0 of a
    [N, 1 + num_speculative_blocks] block table: with speculative decoding on, that column is
    strided, and prefill() reads index vectors contiguous), N integers.
    """
    if not _tensor("state_indices", state_indices).is_contiguous():
        state_indices = state_indices.contiguous()
    gdn_prefill.prefill(q, k, v, g, beta, out, ssm_state, cu_seqlens=cu_seqlens, state_indices=state_indices,
                        state_layout="vk", use_qk_l2norm=use_qk_l2norm, has_initial_state=has_initial_state,
                        max_seqlen=max_seqlen, batch_invariant=batch_invariant)


# ----------------------------------------------------------------------------- whose kernels run
def requested_backend(vllm_config: Any) -> str:
    """vLLM's gdn_prefill_backend setting, read as vLLM reads it (additional_config, lower-cased,
    "auto" when unset)."""
    extra = getattr(vllm_config, "additional_config", None)
    value = extra.get("gdn_prefill_backend", "auto") if isinstance(extra, dict) else "auto"
    return str(value).strip().lower()


def why_not_here(vllm_config: Any) -> Optional[tuple[type, str]]:
    """None where gdn_prefill's kernels can serve this model on this device, else (the GdnError
    class, the reason): vLLM's platform CUDA with a Hopper GPU (the kernels are sm_90a code),
    128-dim key and value heads and a bf16 model (the kernels' q, k, v)."""
    import torch
    from vllm.platforms import current_platform
    if not current_platform.is_cuda():
        return GdnDeviceError, f"vLLM's platform is {type(current_platform).__name__}, not CUDA"
    cap = current_platform.get_device_capability()
    if cap is None or (cap.major, cap.minor) != (9, 0):
        got = "unknown" if cap is None else f"sm_{cap.major}{cap.minor}"
        return GdnDeviceError, f"the GPU is {got}; the kernels are built for sm_90a (H100, H200) only"
    model = getattr(vllm_config, "model_config", None)
    hf = getattr(model, "hf_text_config", None)
    dims = (getattr(hf, "linear_key_head_dim", None), getattr(hf, "linear_value_head_dim", None))
    if dims != (128, 128):
        return GdnShapeError, f"linear_key_head_dim / linear_value_head_dim are {dims[0]} / {dims[1]}; the kernels " \
                              "take 128 / 128"
    dtype = getattr(model, "dtype", None)
    if dtype != torch.bfloat16:
        return GdnDtypeError, f"the model dtype is {dtype}; the kernels take bf16 q, k, v"
    return None


def decide(requested: str, why_not: Optional[tuple[type, str]]) -> bool:
    """Whether gdn_prefill's kernels serve the op (True) or vLLM's own backend does (False), from
    the requested backend and why_not_here(); raises where "gdn_prefill" was asked for and cannot
    run (no fallback the user did not ask for), logs the reason where "auto" cannot."""
    if requested == BACKEND:
        if why_not is not None:
            raise why_not[0](f"gdn_prefill_backend: {BACKEND!r} was requested (vLLM's additional_config), but "
                             f"{why_not[1]}")
        return True
    if requested != "auto":
        _log_once(logging.INFO, f"gdn_prefill: vLLM's GDN prefill backend {requested!r} was requested; vLLM's own "
                                "kernels run")
        return False
    if why_not is not None:
        _log_once(logging.WARNING, f"gdn_prefill: vLLM's own GDN prefill backend runs: {why_not[1]}")
        return False
    return True


def vllm_batch_invariant() -> bool:
    """vLLM's deterministic-serving switch (VLLM_BATCH_INVARIANT=1, read through vllm.envs as
    vLLM 0.33 reads it): then every prefill of ours runs with batch_invariant=True."""
    from vllm import envs
    return bool(getattr(envs, "VLLM_BATCH_INVARIANT", False))


# ----------------------------------------------------------------------------- vLLM's classes
def _build_op_class() -> type:
    from vllm.config import get_current_vllm_config
    from vllm.model_executor.custom_op import CustomOp
    from vllm.model_executor.layers.mamba.gdn.qwen_gdn_linear_attn import ChunkGatedDeltaRule

    class GdnChunkGatedDeltaRule(ChunkGatedDeltaRule):  # type: ignore[misc]  # vLLM is untyped here
        """vLLM's ChunkGatedDeltaRule whose forward is gdn_prefill's chunk_gated_delta_rule, where
        decide() says so; vLLM's own, built as vLLM builds it, where it does not.

        A subclass, so that Python runs this __init__ on the object CustomOp.__new__ returns for
        ChunkGatedDeltaRule().  `gdn_prefill_backend` (which the layer copies) is "gdn_prefill"
        when ours runs: the layer's FlashInfer-only branches (align-mode checkpoint plans, its
        FlashInfer warm-up) then stay off, and its warm-up calls this op."""

        def __init__(self) -> None:
            vllm_config = get_current_vllm_config()
            requested = requested_backend(vllm_config)
            why_not = None if requested not in ("auto", BACKEND) else why_not_here(vllm_config)
            if not decide(requested, why_not):
                ChunkGatedDeltaRule.__init__(self)
                return
            from gdn_prefill import _ext  # noqa: F401  # a broken install fails here, not at the first prefill
            CustomOp.__init__(self)
            self.gdn_prefill_backend = BACKEND
            self._forward_method = (functools.partial(chunk_gated_delta_rule, batch_invariant=True)
                                    if vllm_batch_invariant() else chunk_gated_delta_rule)
            _log_once(logging.INFO, "gdn_prefill: vLLM's GDN prefill runs gdn_prefill's kernels (sm_90a)")

    GdnChunkGatedDeltaRule.__module__ = __name__
    return GdnChunkGatedDeltaRule


# a one-entry cache of the longest sequence's bound per metadata object: every GDN layer of a step
# reads the same GDNAttentionMetadata (one per KV-cache group); holding it keeps its id unique
_seqlen: list[Any] = [None, None]


def _max_seqlen(md: Any) -> Optional[int]:
    """A host bound on the longest sequence of the batch, for prefill()'s planner, from vLLM's
    causal-conv1d metadata: nums_dict[8]["nums"], a CPU tensor of ceil(length / 8) per non-spec
    sequence (gdn_attn.py builds it from the host copy of the offsets; no device sync)."""
    if _seqlen[0] is md:
        return _seqlen[1]  # type: ignore[no-any-return]
    entry = (getattr(md, "nums_dict", None) or {}).get(8)
    nums = None if entry is None else entry.get("nums")
    value = int(nums.max()) * 8 if nums is not None and nums.numel() else None
    _seqlen[:] = [md, value]
    return value


def _build_layer_class() -> type:
    from vllm.model_executor.layers.mamba.gdn import qwen_gdn_linear_attn as qwen

    class GdnQwenGatedDeltaNetAttention(qwen.QwenGatedDeltaNetAttention):  # type: ignore[misc]
        """vLLM's Qwen GDN layer whose prefill batches (no speculative decoding, no FlashInfer
        checkpoint plan) run prefill_pool(): the state pool in place, the fresh-sequence mask and
        the q / k l2norm in the kernel, the output straight into core_attn_out.  Every other batch,
        and every batch when the op is vLLM's own, runs vLLM's _forward_core unchanged.

        The override mirrors vLLM 0.33's _forward_core for that case (qwen_gdn_linear_attn.py
        1556-1912), calling the functions it calls, by their names in its module: the causal
        convolution over the whole batch, the decode rows first through the recurrent kernel, then
        fused_post_conv_prep (without its l2norm) and prefill_pool() for the prefill rows."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._gdn_pool_in_place = self.chunk_gated_delta_rule.gdn_prefill_backend == BACKEND
            self._gdn_batch_invariant = vllm_batch_invariant()

        def _forward_core(self, mixed_qkv: Any, b: Any, a: Any, core_attn_out: Any) -> None:
            raw = qwen.get_forward_context().attn_metadata
            md = raw.get(self.prefix) if isinstance(raw, dict) else None
            if (not self._gdn_pool_in_place or md is None or md.spec_sequence_masks is not None
                    or md.num_prefills == 0 or md.flashinfer_checkpoint_plan is not None):
                super()._forward_core(mixed_qkv=mixed_qkv, b=b, a=a, core_attn_out=core_attn_out)
                return
            conv_state = self.kv_cache[0] if qwen.is_conv_state_dim_first() else self.kv_cache[0].transpose(-1, -2)
            ssm_state = self.kv_cache[1]
            n, d = md.num_actual_tokens, md.num_decode_tokens
            w = self.conv1d.weight
            x = qwen.causal_conv1d_fn(mixed_qkv[:n].transpose(0, 1), w.view(w.size(0), w.size(2)), self.conv1d.bias,
                                      activation=self.activation, conv_states=conv_state,
                                      has_initial_state=md.has_initial_state,
                                      cache_indices=md.non_spec_state_indices_tensor,
                                      query_start_loc=md.non_spec_query_start_loc, metadata=md).transpose(0, 1)
            if md.num_decodes > 0:      # decode rows first, as vLLM orders them (the recurrent kernel)
                qd, kd, vd = self.rearrange_mixed_qkv(x[:d])
                od, _ = qwen.fused_sigmoid_gating_delta_rule_update(
                    A_log=self.A_log, a=a[:d], b=b[:d], dt_bias=self.dt_bias, q=qd, k=kd, v=vd,
                    initial_state=ssm_state, inplace_final_state=True,
                    cu_seqlens=md.non_spec_query_start_loc[:md.num_decodes + 1],
                    ssm_state_indices=md.non_spec_state_indices_tensor, use_qk_l2norm_in_kernel=True)
                core_attn_out[:d] = od.squeeze(0)
            q, k, v, g, beta = qwen.fused_post_conv_prep(
                conv_output=x[d:], a=a[d:n], b=b[d:n], A_log=self.A_log, dt_bias=self.dt_bias,
                num_k_heads=self.num_k_heads // self.tp_size, head_k_dim=self.head_k_dim,
                head_v_dim=self.head_v_dim, apply_l2norm=False, output_g_exp=False)
            prefill_pool(q, k, v, g, beta, core_attn_out[d:n], ssm_state, cu_seqlens=md.prefill_query_start_loc,
                         state_indices=md.prefill_state_indices, has_initial_state=md.prefill_has_initial_state,
                         use_qk_l2norm=True, max_seqlen=_max_seqlen(md), batch_invariant=self._gdn_batch_invariant)

    GdnQwenGatedDeltaNetAttention.__module__ = __name__
    return GdnQwenGatedDeltaNetAttention


_BUILDERS = {"GdnChunkGatedDeltaRule": _build_op_class, "GdnQwenGatedDeltaNetAttention": _build_layer_class}


def __getattr__(name: str) -> Any:
    # The classes subclass vLLM's, so they exist only where vLLM does: built (importing vLLM) on
    # first access, once.
    if name not in _BUILDERS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    with _lock:
        if name not in _classes:
            _classes[name] = _BUILDERS[name]()
    return _classes[name]


# ----------------------------------------------------------------------------- the entry point
def _claim(registry: dict[str, type], key: str, cls: type, register: Any) -> bool:
    """Register cls under key unless it is there already (vLLM may load the plugins more than once
    per process); a class of someone else's there is a conflict the user must settle."""
    held = registry.get(key)
    if held is cls:
        return False
    if held is not None:
        raise GdnArgumentError(f"VLLM_PLUGINS: vLLM's {key} is already replaced by {held.__module__}."
                               f"{held.__qualname__} (another plugin); load one of the two (VLLM_PLUGINS lists the "
                               "plugins vLLM loads)")
    register(cls)
    return True


def register() -> None:
    """vLLM's general-plugin entry point: replace vLLM's ChunkGatedDeltaRule op (and, on vLLM
    0.33.x, its QwenGatedDeltaNetAttention layer) by gdn_prefill's.  Safe to call more than once.

    Raises GdnArgumentError where this vLLM's op takes other parameters than vLLM 0.33's
    (OP_PARAMETERS: a call the replacement would misread) or another plugin holds the op."""
    try:
        import vllm
        from vllm.model_executor.custom_op import op_registry_oot
        from vllm.model_executor.layers.mamba.gdn.qwen_gdn_linear_attn import ChunkGatedDeltaRule
    except ImportError as e:
        raise ImportError("gdn_prefill.integrations.vllm.register: vLLM is not importable (pip install vllm); "
                          "the plugin replaces vLLM 0.33's GDN prefill") from e
    params = tuple(inspect.signature(ChunkGatedDeltaRule.forward_cuda).parameters)[1:]
    if params != OP_PARAMETERS:
        raise GdnArgumentError(f"VLLM_PLUGINS: vLLM {vllm.__version__}'s ChunkGatedDeltaRule takes {params}; "
                               f"gdn_prefill's plugin takes vLLM 0.33's {OP_PARAMETERS}; leave the plugin out "
                               "(VLLM_PLUGINS) or use a gdn-prefill release for this vLLM")
    op = __getattr__("GdnChunkGatedDeltaRule")
    with _lock:
        new = _claim(op_registry_oot, OP_CLASS, op, lambda c: ChunkGatedDeltaRule.register_oot(c))
    layer_off = os.environ.get("GDN_PREFILL_VLLM_LAYER", "1") == "0"
    if layer_off or not vllm.__version__.startswith(LAYER_VLLM):
        if new:
            _log.info("gdn_prefill: vLLM's GDN op replaced; its Qwen GDN layer left as it is (%s)",
                      "GDN_PREFILL_VLLM_LAYER=0" if layer_off else
                      f"vLLM {vllm.__version__}: the layer replacement mirrors vLLM {LAYER_VLLM}x")
        return
    layer = __getattr__("GdnQwenGatedDeltaNetAttention")
    base = layer.__mro__[1]
    with _lock:
        new = _claim(op_registry_oot, LAYER_CLASS, layer, lambda c: base.register_oot(c)) or new
    if new:
        _log.info("gdn_prefill: vLLM's GDN op (%s) and Qwen GDN layer (%s) replaced", OP_CLASS, LAYER_CLASS)
