"""Hard inputs for the numerics contract: where a chunked delta rule loses precision or range.

The contract (docs/DESIGN.md §1, the numerics contract): on these inputs, as on the standard ones, the relative errors of
o and of the final state against the fp64 oracle are no worse than FLA 0.6.0's on the same inputs
(5 % allowance for rounding noise), no output is non-finite where the oracle is finite, and the
outputs are bitwise deterministic.  Each kind stresses one step of the algorithm:

  no_decay_beta1    g = 0, beta = 1: every token a full projection (I - k k^T) S + k v^T, nothing
                    forgotten; the in-chunk system (I + A) has its largest off-diagonal weights.
  parallel_keys     the keys of a head within 5 % of one direction: A's entries all near beta_i,
                    (I + A)^-1 alternating in sign, the state update a difference of near-equal
                    terms.
  large_values      v at 64x the standard scale (|v| up to ~300): the state and o at that scale,
                    where a half-precision intermediate of U, Vnew or o would lose range.
  tiny_keys_l2norm  raw keys of norm ~1e-2 normalised in the kernel (use_qk_l2norm): rsqrt(|k|^2 +
                    1e-6) amplifies bf16's rounding of k by ~100x relative to its own size.
  decay_underflow   log decays of -20 +- 10 per token: exp(gcum) underflows to 0 within a few tokens
                    of a chunk, so any form exp(gcum_i) * exp(-gcum_j) overflows.
  pure_delta_long   g = 0, beta ~ sigmoid(randn), 32K tokens: the state carries every token's
                    rounding across 512 chunks with no decay to damp it.

hard_inputs(kind, ...) returns what reference.make_inputs returns (one sequence, a dense fp32
initial state, use_qk_l2norm added), so the result splats into reference.chunked and prefill().
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

KINDS = ("no_decay_beta1", "parallel_keys", "large_values", "tiny_keys_l2norm", "decay_underflow",
         "pure_delta_long")

#: The length each kind is measured at by default (pure_delta_long is the long one by definition).
DEFAULT_T = {k: (32768 if k == "pure_delta_long" else 4096) for k in KINDS}


def hard_inputs(kind: str, T: int, Hk: int, Hv: int, *, seed: int, device="cpu", K: int = 128,
                V: int = 128) -> dict:
    """One sequence of T tokens of `kind` (KINDS), bf16 q / k / v, fp32 g and beta, a dense fp32
    initial state [1, Hv, K, V]; the dict of reference.make_inputs plus use_qk_l2norm."""
    if kind not in KINDS:
        raise ValueError(f"kind: expected one of {', '.join(KINDS)}, got {kind!r}")
    if T < 1 or Hk < 1 or Hv < 1 or Hv % Hk:
        raise ValueError(f"T >= 1, Hk >= 1 and Hv a multiple of Hk, got T={T}, Hk={Hk}, Hv={Hv}")
    gen = torch.Generator().manual_seed(int(seed))

    def rn(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float32)

    q, k, v = rn(T, Hk, K), rn(T, Hk, K), rn(T, Hv, V)
    g = F.logsigmoid(3.0 + 1.5 * rn(T, Hv))
    beta = torch.sigmoid(rn(T, Hv))
    l2 = False
    if kind == "no_decay_beta1":
        g, beta = torch.zeros(T, Hv), torch.ones(T, Hv)
    elif kind == "parallel_keys":
        k = rn(1, Hk, K) + 0.05 * k
    elif kind == "large_values":
        v = 64.0 * v
    elif kind == "tiny_keys_l2norm":
        k, l2 = 1e-3 * k, True
    elif kind == "decay_underflow":
        g = -(20.0 + 10.0 * rn(T, Hv)).abs()
    elif kind == "pure_delta_long":
        g = torch.zeros(T, Hv)
    if not l2:
        q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)
    state = rn(1, Hv, K, V) * K ** -0.5
    return dict(q=q.to(torch.bfloat16).to(device), k=k.to(torch.bfloat16).to(device),
                v=v.to(torch.bfloat16).to(device), g=g.to(device), beta=beta.to(device),
                cu_seqlens=torch.tensor([0, T], dtype=torch.int32, device=device),
                state=state.to(device), state_indices=None, state_layout="kv", use_qk_l2norm=l2)
