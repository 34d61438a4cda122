"""Typed use of the public API: `mypy --strict` must accept this file (see tests/test_typing.py).

Never executed by the tests (it needs a GPU); it exists to be type-checked, so each line
below pins a signature or a result type of the stubs in gdn_prefill/_ext.pyi.
"""
from __future__ import annotations

from typing import Literal, Optional

import torch
from torch import Tensor

import gdn_prefill
import gdn_prefill.ops
from gdn_prefill import GdnError, GdnSpineError, chunk_gated_delta_rule


def packed_prefill(qkv: Tensor, g: Tensor, beta: Tensor, out: Tensor, pool: Tensor, cu_seqlens: Tensor,
                   slots: Tensor, spine: str = "auto") -> Literal["scalar", "wgmma"]:
    """q/k/v as views of one packed projection buffer, a vLLM-style 'vk' state pool."""
    T = qkv.shape[0]
    q = qkv[:, :2048].view(T, 16, 128)
    k = qkv[:, 2048:4096].view(T, 16, 128)
    v = qkv[:, 4096:].view(T, 32, 128)
    ran = gdn_prefill.prefill(q, k, v, g, beta, out, pool, cu_seqlens=cu_seqlens, state_indices=slots,
                              state_layout="vk", scale=None, use_qk_l2norm=True, spine=spine,
                              stream=torch.cuda.current_stream())
    return ran


def planned_launches(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, out: Tensor) -> list[str]:
    plan = gdn_prefill.explain(q, k, v, g, beta, out, check_device=False)
    ws: int = plan["workspace_bytes"]
    verdicts: dict[str, str] = plan["spines"]
    assert ws >= 0 and "scalar" in verdicts
    return [f"{launch['name']} grid={launch['grid']} smem={launch['smem_bytes']}" for launch in plan["kernels"]]


def workspace_for(T: int, N: int, Hv: int) -> Tensor:
    nbytes: int = gdn_prefill.workspace_bytes(T, N, Hv)
    layout = gdn_prefill.workspace_layout(T, N, Hv)
    offset, shape, dtype = layout["h"]
    assert offset + len(shape) >= 0 and dtype
    return torch.empty(nbytes, dtype=torch.uint8, device="cuda")


def variants() -> list[str]:
    return gdn_prefill.compiled_variants()


def fla_style(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor,
              h0: Optional[Tensor]) -> tuple[Tensor, Optional[Tensor]]:
    o, final = chunk_gated_delta_rule(q, k, v, g, beta, initial_state=h0, output_final_state=True,
                                      use_qk_l2norm_in_kernel=True)
    return o, final


def as_custom_op(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, out: Tensor, state: Tensor,
                 cu_seqlens: Tensor, workspace: Tensor) -> None:
    gdn_prefill.ops.prefill_op(q, k, v, g, beta, out, state, cu_seqlens=cu_seqlens, workspace=workspace)
    torch.ops.gdn_prefill.prefill(q, k, v, g, beta, out, state, cu_seqlens=cu_seqlens)


def wgmma_or_reason(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, out: Tensor) -> str:
    try:
        return gdn_prefill.prefill(q, k, v, g, beta, out, spine="wgmma", stream=0)
    except GdnSpineError as e:
        return str(e)
    except GdnError:
        raise
