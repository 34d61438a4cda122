"""The fp16 inverse's key check, with l2norm in the kernel: ||k rk||^2 read as K K^T's diagonal
times rk^2 is S / (S' + eps), S and S' two fp32 sums of the same 128 bf16 squares (the tensor
cores' accumulation, the norm warps' two running sums).  Emulated here in every summation order
and rounding the two may use, with rsqrt's error at its worst: the ratio stays within 1 + 2^-14
for every finite key, far inside the check's limit, so with l2norm the role need not check keys
(kl)."""
from __future__ import annotations

import torch

from gdn_prefill import grids

EPS = 1e-6            # cute_kernels.intra_chunk.L2_EPS
BOUND = 1.0 + 2.0 ** -14
RSQRT_REL = 2.0 ** -22  # MUFU.RSQ's relative error bound, taken at its worst side


def _keys(n=3000, seed=0):
    g = torch.Generator().manual_seed(seed)
    rows = []
    for scale in (1e-8, 1e-4, 1e-2, 1.0, 30.0, 1e4, 1e12):
        rows.append(torch.randn(n, 128, generator=g) * scale)
        spike = torch.randn(n, 128, generator=g) * scale * 1e-3     # one dominant entry a row
        spike[:, 0] = scale
        rows.append(spike)
        rows.append(torch.rand(n, 128, generator=g) * scale)        # all of one sign
    return torch.cat(rows).to(torch.bfloat16)


def _toward_zero(x64: torch.Tensor) -> torch.Tensor:
    """float64 -> float32 rounded toward zero (an accumulator that truncates)."""
    x32 = x64.to(torch.float32)
    over = x32.double().abs() > x64.abs()
    return torch.where(over, torch.nextafter(x32, torch.zeros_like(x32)), x32)


def _sums(sq: torch.Tensor) -> dict:
    """The ways the diagonal of K K^T could sum a row's 128 squares in fp32."""
    n = sq.shape[1]
    out = {}
    s = torch.zeros(sq.shape[0])
    for j in range(n):
        s = s + sq[:, j]
    out["in order"] = s
    s = torch.zeros(sq.shape[0])
    for j in reversed(range(n)):
        s = s + sq[:, j]
    out["reversed"] = s
    t = sq.clone()
    while t.shape[1] > 1:
        t = t[:, 0::2] + t[:, 1::2]
    out["pairwise"] = t[:, 0]
    acc = torch.zeros(sq.shape[0])
    for j in range(n):
        acc = _toward_zero(acc.double() + sq[:, j].double())
    out["truncating"] = acc
    return out


def _norm_warps(sq: torch.Tensor) -> torch.Tensor:
    """The norm warps' sum: two running fp32 sums (the upper and the lower bf16 halves of each
    32-bit word, i.e. odd and even columns), FMAs in order (a bf16 square is exact in fp32)."""
    hi = torch.zeros(sq.shape[0])
    lo = torch.zeros(sq.shape[0])
    for j in range(0, sq.shape[1], 2):
        lo = lo + sq[:, j]
        hi = hi + sq[:, j + 1]
    return hi + lo


def test_with_l2norm_the_kernels_own_keys_pass_the_key_check():
    k = _keys()
    sq = k.float() ** 2                                      # exact: 8-bit mantissas
    finite = torch.isfinite(sq).all(dim=1)
    s2 = _norm_warps(sq)
    rk = (1.0 / torch.sqrt(s2.double() + EPS)) * (1.0 + RSQRT_REL)
    worst = 0.0
    for name, s in _sums(sq).items():
        ratio = (s.double() * rk * rk * (1.0 + 2.0 ** -23) ** 2)[finite]   # v * r * r, two roundings
        worst = max(worst, ratio.max().item())
        assert ratio.max().item() <= BOUND, (name, ratio.max().item())
    assert BOUND < grids.F16_INVERSE_KNORM2_MAX
    assert worst > 1.0 - 2.0 ** -10          # the rows that matter (|k|^2 >> eps) come close to 1


def test_a_key_whose_squares_overflow_is_not_finite_in_either_sum():
    k = torch.full((1, 128), 2.0 ** 70).to(torch.bfloat16)   # 2^140 per square: past fp32's range
    sq = k.float() ** 2
    assert not torch.isfinite(_norm_warps(sq)).all()
    assert not torch.isfinite(_sums(sq)["in order"]).all()
