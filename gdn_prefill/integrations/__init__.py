"""Integrations of gdn_prefill into other libraries' models; each is imported on its own.

- `gdn_prefill.integrations.transformers`: routes the prefill of transformers' Gated DeltaNet
  layers (Qwen3-Next, Qwen3.5, and any modeling module defining `torch_chunk_gated_delta_rule`)
  to `gdn_prefill.chunk_gated_delta_rule` (docs/INTEGRATIONS.md).
- `gdn_prefill.integrations.vllm`: vLLM's plugin (its `vllm.general_plugins` entry point): vLLM
  0.33's GDN prefill op, and its Qwen GDN layer's prefill on the state pool in place, served by
  gdn_prefill.prefill (docs/INTEGRATIONS.md).

The libraries integrated with are not dependencies of gdn_prefill: each integration imports its
library when it is used.
"""
