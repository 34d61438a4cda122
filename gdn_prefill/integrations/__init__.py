"""Integrations of gdn_prefill into other libraries' models; each is imported on its own.

- `gdn_prefill.integrations.transformers`: routes the prefill of transformers' Gated DeltaNet
  layers (Qwen3-Next, Qwen3.5, and any modeling module defining `torch_chunk_gated_delta_rule`)
  to `gdn_prefill.chunk_gated_delta_rule` (docs/INTEGRATIONS.md).

The libraries integrated with are not dependencies of gdn_prefill: each integration imports its
library when it is used.
"""
