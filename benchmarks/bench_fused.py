"""Issue 42's fused kernel (cute_kernels/fused.py) against the plan prefill() picks, graph mode.

    python benchmarks/bench_fused.py [--shapes 8x4K,32x2K] [--heads 16/32,4/8] [--reps 30] [--l2norm]

Each row captures one call of each in a CUDA graph (prefill() with its own rule; the fused kernel
through the stage hook, in place of the serial fused plan's two launches) and times --reps
replays (CUDA events, median).  It also gives the relative difference of the fused kernel's output
and final state from prefill()'s (both are within the oracle's bound in the GPU suite; here a
large difference flags a broken build without the oracle's cost at these sizes).
Inputs: bf16 beta and pre-normed q, k unless --l2norm (the norms in the kernel, vLLM's call).

--smoke: instead, the fused build and each --extra build once on three small batches (one chunk;
mixed lengths with an empty sequence and partial chunks; two sequences with the norms in the
kernel) against the fp64 oracle, nothing timed: the first thing a device run of a new build does
(a protocol bug hangs here, under the caller's timeout, before the suite and the timing).
"""
from __future__ import annotations

import argparse
import statistics
import sys

import torch

DEFAULT_SHAPES = "8x4K,32x2K,4x2K,16x512,varlen16,1x8K"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default=DEFAULT_SHAPES)
    ap.add_argument("--heads", default="16/32")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--l2norm", action="store_true")
    ap.add_argument("--extra", default="",
                    help="(branches fused-diag, fused-fi) more fused builds by name, timed alike")
    ap.add_argument("--smoke", action="store_true", help="the builds against the oracle on small batches")
    ap.add_argument("--profile", metavar="BUILD",
                    help="(branches fused-diag, fused-fi) one call of BUILD ('fused' or another build's name) at "
                    "the first shape and heads, nothing timed: for ncu")
    a = ap.parse_args(argv)
    extra = [x for x in a.extra.split(",") if x]
    if not torch.cuda.is_available():
        print("no CUDA GPU: nothing to time (the objects: pytest tests/test_sass.py -k fused)")
        return 0
    import gdn_prefill
    from gdn_prefill import _ext, bench_cases
    from gdn_prefill import reference as ref
    if a.smoke:
        return _smoke(["fused", *extra])
    print(f"l2norm in the kernel: {a.l2norm}")
    print("| shape | Hk/Hv | prefill() µs | fused µs | fused / prefill | out diff | state diff |"
          + "".join(f" {x} µs |" for x in extra))
    print("|---|---|---|---|---|---|---|" + "---|" * len(extra))
    for heads in a.heads.split(","):
        hk, hv = (int(x) for x in heads.split("/"))
        for s in a.shapes.split(","):
            lens = bench_cases.parse_shape(s)
            inp = ref.make_inputs(lens, hk, hv, seed=0, device="cuda", state="dense", l2norm_inputs=not a.l2norm,
                                  beta_dtype=torch.bfloat16)
            T, N = sum(lens), len(lens)
            ws = torch.empty(gdn_prefill.workspace_bytes(T, N, hv), dtype=torch.uint8, device="cuda")
            if a.profile:
                out = torch.empty(T, hv, 128, dtype=torch.bfloat16, device="cuda")
                _ext._launch_stages((a.profile,), inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], out,
                                    inp["state"].clone(), cu_seqlens=inp["cu_seqlens"], workspace=ws, spine="wgmma",
                                    fused=1, overlap_split=0, use_qk_l2norm=a.l2norm)
                torch.cuda.synchronize()
                return 0
            runs = {}
            for name in ("prefill", "fused", *extra):
                out = torch.empty(T, hv, 128, dtype=torch.bfloat16, device="cuda")
                state = inp["state"].clone()
                args = (inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], out, state)
                kw = dict(cu_seqlens=inp["cu_seqlens"], workspace=ws, use_qk_l2norm=a.l2norm)
                if name == "prefill":
                    call = lambda: gdn_prefill.prefill(*args, **kw)                      # noqa: E731
                else:
                    call = lambda name=name: _ext._launch_stages((name,), *args, spine="wgmma",  # noqa: E731
                                                                 fused=1, overlap_split=0, **kw)
                call()                                       # the result from the initial state
                torch.cuda.synchronize()
                result = (out.clone(), state.clone())
                side = torch.cuda.Stream()
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    call()
                torch.cuda.current_stream().wait_stream(side)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    call()
                for _ in range(3):
                    graph.replay()
                ts = []
                for _ in range(a.reps):
                    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    e0.record()
                    graph.replay()
                    e1.record()
                    torch.cuda.synchronize()
                    ts.append(e0.elapsed_time(e1) * 1e3)
                runs[name] = (statistics.median(ts), result)
            (tp, (op, sp)), (tf, (of, sf)) = runs["prefill"], runs["fused"]
            d_o = ref.rel_err(of.double(), op.double())
            d_s = ref.rel_err(sf.double(), sp.double())
            print(f"| {s} | {heads} | {tp:.1f} | {tf:.1f} | {tf / tp:.3f} | {d_o:.2e} | {d_s:.2e} |"
                  + "".join(f" {runs[x][0]:.1f} |" for x in extra), flush=True)
    return 0


def _smoke(builds) -> int:
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
        for b in builds:
            out = torch.full_like(inp["v"], float("nan"))
            st = inp["state"].clone()
            _ext._launch_stages((b,), inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], out, st,
                                cu_seqlens=inp["cu_seqlens"], spine="wgmma", workspace=ws, fused=1,
                                overlap_split=0, use_qk_l2norm=l2)
            torch.cuda.synchronize()
            print(b, lens, "finite", bool(torch.isfinite(out).all()), "err o %.3e state %.3e"
                  % (ref.rel_err(out.double(), o_ref), ref.rel_err(st.double(), s_ref)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
