"""Where the bf16 roundings sit: a float64 model of the fused plan's chunk math, of FLA's, and of
candidate placements, against the fp64 oracle (issue 42's numerics contract).

    python tools/rounding_model.py [--kinds decay_underflow,parallel_keys,...] [--T 4096] [--heads 2/4]

Each model computes the chunked delta rule in float64 and rounds to bf16 exactly where its
kernels round (an MMA operand, a bf16 intermediate in HBM); fp32 accumulation and the TF32 merges
are taken as exact, so the model isolates the bf16 placements.  Models:

  ours      the fused plan with beta in Tu (recompute_wu _pqk + spine_rs): Tu = bf16(Tm diag(beta)),
            Y = V - diag(a) K S rounded, Vnew = Tu Y rounded, rS = bf16(S), P = bf16(scaled QK^T
            decay), S += bf16(Vnew coef) K, o = c Y_q + bf16(Vnew) P
  fold      the fused plan today, beta moved from Tu to Y: Tu = bf16(Tm),
            Y' = bf16(diag(beta) (V - diag(a) K S))
  unfused   the unfused plan (recompute_wu, spine_wgmma, fwd_o: unaligned inputs, spine="scalar"'s
            stage 1 and 3): Tw = bf16(Tm diag(beta e^gcum rk)), Tu = bf16(Tm),
            W = bf16(Tw K), U = bf16(Tu bf16(diag(beta) V)), h = bf16(S), Vnew = U - W h, vnew = bf16(Vnew),
            S = e^g_last S + K^T bf16(Vnew e^(g_last - gcum) rk), o = c (q h) + bf16(P) vnew
  unfused_tu  the unfused plan with beta in Tu: U = bf16(bf16(Tm diag(beta)) V), beta rounded in Tu
  f16inv    fold (today's placement) with Tm formed as the single plan forms it (cute_kernels/
            inverse_f16.py, FlashInfer's scheme): A in fp16, the 8 x 8 diagonal blocks of
            (I + A)^-1 rounded to fp16, then doubling 8 -> 16 -> 32 -> 64 (T21 = -T22 A21 T11, each
            product's operands fp16, accumulated exactly, rounded to fp16), on the chunks that pass
            the kernel's range check (f16_in_range), the exact Tm elsewhere; with --f16-stats the
            largest fp16 operand and the share of nonzero ones below fp16's normal range
  fla       FLA 0.6.0's chunk path: Tm = bf16((I + A)^-1), w = bf16(Tm bf16(beta e^g k)),
            u = bf16(Tm bf16(beta v)), h = bf16(S), vnew = bf16(u - w h), S = e^g_last S +
            k^T bf16(vnew e^(g_last - g)), o = bf16(q h) scale e^g + bf16(A_qk) vnew

It prints each model's relative errors of o and of the final state, and their ratio to the FLA
model's; the measured ratios (benchmarks/numerics_hard.py) say whether the model explains them.
CPU only (float64); T = 4096 at 2/4 takes a few seconds a kind.
"""
from __future__ import annotations

import argparse
import sys

import torch

from gdn_prefill import grids
from gdn_prefill import reference as ref
from gdn_prefill.hard_inputs import KINDS, hard_inputs

F64 = torch.float64
C = 64


def b16(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.bfloat16).to(F64)


def _chunk_common(k, g, beta, rk):
    """gcum [H, L], Tm = (I + A)^-1 (exact) and the strictly lower A, per head."""
    gcum = g.cumsum(-1)
    kk = (k * rk[..., None]) @ (k * rk[..., None]).transpose(-1, -2)
    L = g.shape[-1]
    low = torch.tril(torch.ones(L, L, dtype=torch.bool), -1)
    dec = (gcum[..., :, None] - gcum[..., None, :]).masked_fill(~low, float("-inf")).exp()
    A = beta[..., :, None] * kk * dec
    Tm = torch.linalg.inv(torch.eye(L, dtype=F64) + A)
    return gcum, Tm, A


F16_STATS = {"max": 0.0, "subnormal": 0, "nonzero": 0}


def f16(x: torch.Tensor) -> torch.Tensor:
    """x rounded to fp16 (inf past 65504), its magnitudes recorded in F16_STATS."""
    ax = x.abs()
    F16_STATS["max"] = max(F16_STATS["max"], float(ax.max()))
    nz = ax > 0
    F16_STATS["nonzero"] += int(nz.sum())
    F16_STATS["subnormal"] += int((nz & (ax < 2.0 ** -14)).sum())
    return x.to(torch.float16).to(F64)


def f16_in_range(k: torch.Tensor, g: torch.Tensor, beta: torch.Tensor, rk: torch.Tensor) -> torch.Tensor:
    """The single plan's range check (inverse_f16's key_in_range, per row on the role's K K^T
    diagonal, and gates_in_range, a norm warp's vote) per head of one chunk [H, L, ...]: every
    row has 0 <= beta <= F16_INVERSE_BETA_MAX, g <= 0 and |k rk|^2 <= F16_INVERSE_KNORM2_MAX."""
    n2 = ((k * rk[..., None]) ** 2).sum(-1)
    ok = (beta >= 0) & (beta <= grids.F16_INVERSE_BETA_MAX) & (g <= 0) & (n2 <= grids.F16_INVERSE_KNORM2_MAX)
    return ok.all(-1)


def inverse_f16(A: torch.Tensor) -> torch.Tensor:
    """(I + A)^-1 for strictly lower A [..., L, L] by FlashInfer's scheme: fp16 A, the 8 x 8
    diagonal blocks inverted and rounded to fp16, then doubling with fp16 operands."""
    L = A.shape[-1]
    Ah = f16(A)
    T = torch.zeros_like(A)
    eye8 = torch.eye(8, dtype=F64)
    for b in range(0, L, 8):
        e = min(b + 8, L)
        T[..., b:e, b:e] = f16(torch.linalg.inv(eye8[:e - b, :e - b] + Ah[..., b:e, b:e]))
    s = 8
    while s < L:
        for b in range(0, L, 2 * s):
            m, e = b + s, min(b + 2 * s, L)
            if m >= L:
                continue
            X = f16(f16(T[..., m:e, m:e]) @ Ah[..., m:e, b:m])
            T[..., m:e, b:m] = -f16(X @ f16(T[..., b:m, b:m]))
        s *= 2
    return T


def run(model: str, inp: dict, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """o [T, Hv, V] and the final state [Hv, K, V] of `model` over one sequence."""
    q, k, v = (inp[n].to(F64) for n in ("q", "k", "v"))
    g, beta = inp["g"].to(F64), inp["beta"].to(F64)
    T, Hk, K = q.shape
    Hv = v.shape[1]
    rep = Hv // Hk
    q, k = q.repeat_interleave(rep, 1), k.repeat_interleave(rep, 1)
    l2 = inp["use_qk_l2norm"]
    if l2:
        rq, rk = ref._l2norm_inv(q), ref._l2norm_inv(k)
    else:
        rq = rk = torch.ones(T, Hv, dtype=F64)
    S = inp["state"][0].to(F64).clone()                               # [Hv, K, V]
    o = torch.empty(T, Hv, v.shape[2], dtype=F64)
    for t0 in range(0, T, C):
        t1 = min(t0 + C, T)
        L = t1 - t0
        qc, kc, vc = (x[t0:t1].transpose(0, 1) for x in (q, k, v))    # [Hv, L, D]
        gc, bc = g[t0:t1].T, beta[t0:t1].T                           # [Hv, L]
        rqc, rkc = rq[t0:t1].T, rk[t0:t1].T
        gcum, Tm, A = _chunk_common(kc, gc, bc, rkc)
        if model == "f16inv":
            fast = f16_in_range(kc, gc, bc, rkc)
            if fast.any():
                Tm = Tm.clone()
                Tm[fast] = inverse_f16(A[fast])
        gl = gcum[:, -1:]
        incl = torch.tril(torch.ones(L, L, dtype=torch.bool))
        dec = (gcum[:, :, None] - gcum[:, None, :]).masked_fill(~incl, float("-inf")).exp()
        if model in ("ours", "fold", "f16inv"):
            a = gcum.exp() * rkc                                      # [Hv, L]
            coef = (gl - gcum).exp() * rkc
            c = scale * rqc * gcum.exp()
            P = b16(scale * rqc[:, :, None] * rkc[:, None, :] * (qc @ kc.transpose(-1, -2)) * dec)
            rS = b16(S)                                               # [Hv, K, V]
            Z = kc @ rS                                               # [Hv, L, V] (raw k)
            Y = vc - a[:, :, None] * Z
            if model == "ours":
                Tu = b16(Tm * bc[:, None, :])
                Vn = Tu @ b16(Y)
            else:
                Vn = b16(Tm) @ b16(bc[:, :, None] * Y)
            Vb = b16(Vn)
            Yq = qc @ rS
            o[t0:t1] = (c[:, :, None] * Yq + P @ Vb).transpose(0, 1)
            S = gl.exp()[:, :, None] * S + kc.transpose(-1, -2) @ b16(Vn * coef[:, :, None])
        elif model in ("unfused", "unfused_tu"):
            W = b16(b16(Tm * (bc * gcum.exp() * rkc)[:, None, :]) @ kc)
            if model == "unfused":                                    # beta on the V tile, rounded once
                U = b16(b16(Tm) @ b16(vc * bc[:, :, None]))
            else:                                                     # beta rounded inside Tu
                U = b16(b16(Tm * bc[:, None, :]) @ vc)
            h = b16(S)
            Vn = U - W @ h
            P = b16(scale * rqc[:, :, None] * rkc[:, None, :] * (qc @ kc.transpose(-1, -2)) * dec)
            o[t0:t1] = ((scale * rqc * gcum.exp())[:, :, None] * (qc @ h) + P @ b16(Vn)).transpose(0, 1)
            S = gl.exp()[:, :, None] * S + kc.transpose(-1, -2) @ b16(Vn * ((gl - gcum).exp() * rkc)[:, :, None])
        elif model == "fla":
            kn, qn = kc * rkc[..., None], qc * rqc[..., None]
            if l2:                                                    # FLA normalises q, k to bf16 first
                kn, qn = b16(kn), b16(qn)
            Tb = b16(Tm)
            w = b16(Tb @ b16(kn * (bc * gcum.exp())[:, :, None]))
            u = b16(Tb @ b16(vc * bc[:, :, None]))
            h = b16(S)
            vn = b16(u - w @ h)
            Aqk = b16(scale * (qn @ kn.transpose(-1, -2)) * dec)
            o[t0:t1] = ((qn @ h) * (scale * gcum.exp())[:, :, None] + Aqk @ vn).transpose(0, 1)
            S = gl.exp()[:, :, None] * S + kn.transpose(-1, -2) @ b16(vn * (gl - gcum).exp()[:, :, None])
        else:
            raise ValueError(model)
    return b16(o), S


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kinds", default=",".join(k for k in KINDS if k != "pure_delta_long"))
    ap.add_argument("--T", type=int, default=4096)
    ap.add_argument("--heads", default="2/4")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--models", default="ours,fold,fla")
    ap.add_argument("--f16-stats", action="store_true", help="f16inv: the largest fp16 operand, the share below 2^-14")
    a = ap.parse_args(argv)
    hk, hv = (int(x) for x in a.heads.split("/"))
    models = a.models.split(",")
    print(f"| kind | {' | '.join(f'{m} o / state' for m in models)} | {' | '.join(f'{m} / fla' for m in models if m != 'fla')} |")
    print("|---|" + "---|" * (2 * len(models) - 1))
    for kind in a.kinds.split(","):
        inp = hard_inputs(kind, a.T, hk, hv, seed=a.seed)
        scale = 128 ** -0.5
        o_ref, s_ref = ref.chunked(inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], cu_seqlens=inp["cu_seqlens"],
                                   state=inp["state"], use_qk_l2norm=inp["use_qk_l2norm"])
        errs = {}
        for m in models:
            F16_STATS.update(max=0.0, subnormal=0, nonzero=0)
            o, s = run(m, inp, scale)
            if m == "f16inv" and a.f16_stats:
                print(f"<!-- {kind}: largest fp16 operand {F16_STATS['max']:.4g}, "
                      f"{F16_STATS['subnormal'] / max(F16_STATS['nonzero'], 1):.2e} of nonzero ones below 2^-14 -->")
            errs[m] = (ref.rel_err(o, o_ref), ref.rel_err(s[None], s_ref))
        cells = [f"{errs[m][0]:.3e} / {errs[m][1]:.3e}" for m in models]
        ratios = [f"{errs[m][0] / errs['fla'][0]:.3f}, {errs[m][1] / errs['fla'][1]:.3f}"
                  for m in models if m != "fla" and "fla" in errs]
        print(f"| {kind} | {' | '.join(cells)} | {' | '.join(ratios)} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
