"""Outputs and final states of fixed inputs, saved by one build and compared with another's.

    python tools/bitwise_outputs.py --save /tmp/a.pt      (with build A installed)
    python tools/bitwise_outputs.py --save /tmp/b.pt      (with build B installed)
    python tools/bitwise_outputs.py --compare /tmp/a.pt /tmp/b.pt

For a change that should move instructions and not arithmetic (a schedule, a select replaced by
zeroed operands): the same inputs (fixed seeds) through the register-state spine's solo, pair and dual builds
(forced through the stage hook, serial plan) and through prefill() itself (which runs the overlap
plan where it would), on partial chunks, empty sequences, pool padding, both state layouts and the
in-kernel l2norm (--runs: which of prefill, solo, pair, dual; all by default; a build whose shared
memory no longer fits a CTA, as in a prototype, is left out this way).  --compare prints, per case,
whether the bits agree and else the largest difference; it exits 1 if any value differs (a signed
zero against an unsigned one counts as the same value but is reported).  Needs a Hopper GPU.
"""
from __future__ import annotations

import argparse
import sys

import torch

import gdn_prefill
from gdn_prefill import _ext
from gdn_prefill import reference as ref

# name: (T_list, Hk, Hv, make_inputs kwargs, prefill kwargs)
CASES = {
    "varlen_edges_kv": ([1, 63, 64, 65, 1000, 8192, 0], 2, 4, dict(l2norm_inputs=True, state="dense"), {}),
    "pool_pad_vk": ([70, 1, 129, 64, 5, 640], 2, 4,
                    dict(l2norm_inputs=True, state="pool", pad_every=3, state_layout="vk"), {}),
    "l2norm_16_32": ([3000, 1500, 77], 16, 32, dict(state="dense"), dict(use_qk_l2norm=True)),
    "one_8k_16_32": ([8192], 16, 32, dict(l2norm_inputs=True, state="dense"), {}),
}
RS_BUILDS = ("solo", "pair", "dual")


def _run(inp, kw, rs_build=None):
    T, Hv = inp["v"].shape[0], inp["v"].shape[1]
    out = torch.full((T, Hv, 128), float("nan"), dtype=torch.bfloat16, device="cuda")
    state = inp["state"].clone()
    args = (inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], out, state)
    common = dict(cu_seqlens=inp["cu_seqlens"], state_indices=inp["state_indices"],
                  state_layout=inp["state_layout"], **kw)
    if rs_build is None:
        gdn_prefill.prefill(*args, spine="wgmma", **common)
    else:
        N = inp["cu_seqlens"].numel() - 1
        ws = torch.empty(gdn_prefill.workspace_bytes(T, N, Hv), dtype=torch.uint8, device="cuda")
        _ext._launch_stages(("recompute_wu", "spine"), *args, spine="wgmma", workspace=ws, fused=1,
                            overlap_wu_ctas=0, rs_build=RS_BUILDS.index(rs_build), **common)
    torch.cuda.synchronize()
    return out.cpu(), state.cpu()


def save(path: str, runs=("prefill", *RS_BUILDS)) -> None:
    res = {}
    for name, (T_list, Hk, Hv, mk, kw) in CASES.items():
        inp = ref.make_inputs(T_list, Hk, Hv, seed=11, device="cuda", **mk)
        for b in runs:
            res[f"{name}/{b}"] = _run(inp, kw, None if b == "prefill" else b)
    torch.save(res, path)
    print(f"saved {len(res)} results -> {path}")


def compare(a: str, b: str) -> int:
    A, B = torch.load(a), torch.load(b)
    if set(A) != set(B):
        print(f"only in one of the two, not compared: {sorted(set(A) ^ set(B))}")
    keys = [k for k in A if k in B]
    bad = 0
    for key in keys:
        (oa, sa), (ob, sb) = A[key], B[key]
        same_bits = torch.equal(oa.view(torch.int16), ob.view(torch.int16)) and torch.equal(sa.view(torch.int32),
                                                                                           sb.view(torch.int32))
        live = ~oa.isnan()
        same_vals = torch.equal(live, ~ob.isnan()) and torch.equal(oa[live], ob[live]) and torch.equal(sa, sb)
        d_o = (oa[live].float() - ob[live].float()).abs().max().item() if live.any() else 0.0
        d_s = (sa - sb).abs().max().item()
        print(f"{key:28s} bits {'same' if same_bits else 'DIFFER'}  values {'same' if same_vals else 'DIFFER'}"
              f"  max|do| {d_o:.3e}  max|ds| {d_s:.3e}")
        bad += not same_vals
    print(f"{len(keys) - bad} of {len(keys)} results have the same values")
    return 1 if bad else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--save", metavar="PATH")
    ap.add_argument("--compare", nargs=2, metavar=("A", "B"))
    ap.add_argument("--runs", default=",".join(("prefill", *RS_BUILDS)),
                    help="comma list of prefill, solo, pair, dual (default: all)")
    a = ap.parse_args(argv)
    runs = tuple(a.runs.split(","))
    unknown = set(runs) - {"prefill", *RS_BUILDS}
    if unknown:
        ap.error(f"--runs: unknown {sorted(unknown)} (prefill, {', '.join(RS_BUILDS)})")
    if a.save:
        save(a.save, runs)
        return 0
    if a.compare:
        return compare(*a.compare)
    ap.error("--save or --compare")
    return 2


if __name__ == "__main__":
    sys.exit(main())
