"""The single plan (cute_kernels/single.py, one launch) against the two-launch plan, graph mode.

    python benchmarks/bench_single.py [--shapes 8x4K,4x2K] [--heads 16/32,4/8] [--reps 30] [--l2norm]

Each row captures one call of each plan in a CUDA graph and times --reps replays (CUDA events,
median): "two-launch" is what prefill() runs where the single plan's rule does not apply (the
serial or segmented plan, forced with fused=1), "single" the fused kernel (forced with fused=2).
"prefill()" names the plan prefill() picks for the row (max_seqlen given, as a serving engine
does), so the table shows where the rule (gdn_abi.h GDN_SINGLE_LAT_PCT) takes the faster one.  It also
gives the relative difference of the single plan's output and final state from the other's (both
are within the oracle's bound in the GPU suite; a large difference here flags a broken build).
Inputs: bf16 beta and pre-normed q, k unless --l2norm (the norms in the kernel, vLLM's call).

--smoke: instead, the single plan once on three small batches (one chunk; mixed lengths with an
empty sequence and partial chunks; two sequences with the norms in the kernel) against the fp64
oracle, nothing timed: the first thing a device run of a new build does (a protocol bug hangs
here, under the caller's timeout, before the suite and the timing).
--profile: one call of the single plan at the first shape and heads, nothing timed: for ncu.
"""
from __future__ import annotations

import argparse
import sys

import torch

# the last row: a mixed batch shortest first (the single plan's blocks take it longest first)
DEFAULT_SHAPES = "8x4K,32x2K,4x2K,16x512,8x2K,8x512,4x1K,1x8K,2x64+2x128+2x256+2x512+2x1K+2x2K"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default=DEFAULT_SHAPES)
    ap.add_argument("--heads", default="16/32,4/8")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--l2norm", action="store_true")
    ap.add_argument("--smoke", action="store_true", help="the single plan against the oracle on small batches")
    ap.add_argument("--profile", action="store_true", help="one call of the single plan, nothing timed (ncu)")
    a = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("no CUDA GPU: nothing to time (the objects: pytest tests/test_single_kernel.py)")
        return 0
    import gdn_prefill
    from gdn_prefill import _ext, bench
    from gdn_prefill import reference as ref
    if a.smoke:
        return _smoke()
    print(f"l2norm in the kernel: {a.l2norm}")
    print("| shape | Hk/Hv | two-launch µs | single µs | single / two-launch | prefill() | out diff | state diff |")
    print("|---|---|---|---|---|---|---|---|")
    for heads in a.heads.split(","):
        hk, hv = (int(x) for x in heads.split("/"))
        for s in a.shapes.split(","):
            lens = bench.parse_shape(s)
            inp = ref.make_inputs(lens, hk, hv, seed=0, device="cuda", state="dense", l2norm_inputs=not a.l2norm,
                                  beta_dtype=torch.bfloat16)
            T, N = sum(lens), len(lens)
            ws = torch.empty(gdn_prefill.workspace_bytes(T, N, hv), dtype=torch.uint8, device="cuda")
            base = dict(cu_seqlens=inp["cu_seqlens"], workspace=ws, use_qk_l2norm=a.l2norm, max_seqlen=max(lens))
            if a.profile:
                out = torch.empty(T, hv, 128, dtype=torch.bfloat16, device="cuda")
                _ext._launch_stages(("single",), inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], out,
                                    inp["state"].clone(), spine="wgmma", fused=2, **base)
                torch.cuda.synchronize()
                return 0
            out = torch.empty(T, hv, 128, dtype=torch.bfloat16, device="cuda")
            picked = gdn_prefill.explain(inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], out, inp["state"],
                                         **base)["plan"]["name"]
            runs = {}
            for name, fused in (("two-launch", 1), ("single", 2)):
                # the forced plan's launches: the single plan's one, or the segmented plan's four, or two
                builds = _ext._builds(inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], out, inp["state"],
                                      cu_seqlens=inp["cu_seqlens"], fused=fused, max_seqlen=max(lens))
                stages = ("single",) if fused == 2 else \
                    ("recompute_wu", "maps", "compose", "spine") if len(builds) == 4 else ("recompute_wu", "spine")
                out = torch.empty(T, hv, 128, dtype=torch.bfloat16, device="cuda")
                state = inp["state"].clone()
                args = (inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], out, state)
                call = lambda: _ext._launch_stages(stages, *args, spine="wgmma", fused=fused, **base)  # noqa: E731
                call()                                       # the result from the initial state
                torch.cuda.synchronize()
                result = (out.clone(), state.clone())
                runs[name] = (bench.one_call_graph(call, a.reps)[0], result)
            (t2, (o2, s2)), (t1, (o1, s1)) = runs["two-launch"], runs["single"]
            d_o = ref.rel_err(o1.double(), o2.double())
            d_s = ref.rel_err(s1.double(), s2.double())
            print(f"| {s} | {heads} | {t2:.1f} | {t1:.1f} | {t1 / t2:.3f} | {picked} | {d_o:.2e} | {d_s:.2e} |",
                  flush=True)
    return 0


def _smoke() -> int:
    import gdn_prefill
    from gdn_prefill import _ext
    from gdn_prefill import reference as ref
    for lens, l2 in (([64], False), ([1, 63, 64, 65, 0, 200], False), ([300, 1000], True)):
        inp = ref.make_inputs(lens, 2, 4, seed=1, device="cuda", state="dense", l2norm_inputs=not l2,
                              beta_dtype=torch.bfloat16)
        T = sum(lens)
        ws = torch.empty(gdn_prefill.workspace_bytes(T, len(lens), 4), dtype=torch.uint8, device="cuda")
        with torch.device("cuda"):
            o_ref, s_ref = ref.chunked(inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"],
                                       cu_seqlens=inp["cu_seqlens"], state=inp["state"], use_qk_l2norm=l2)
        out = torch.full_like(inp["v"], float("nan"))
        st = inp["state"].clone()
        _ext._launch_stages(("single",), inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], out, st,
                            cu_seqlens=inp["cu_seqlens"], spine="wgmma", workspace=ws, fused=2, use_qk_l2norm=l2)
        torch.cuda.synchronize()
        print("single", lens, "finite", bool(torch.isfinite(out).all()), "err o %.3e state %.3e"
              % (ref.rel_err(out.double(), o_ref), ref.rel_err(st.double(), s_ref)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
