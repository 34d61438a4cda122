"""Issue 42's go / no-go: the one-warpgroup stage 1 (cute_kernels/intra_chunk.py), µs per chunk.

    python benchmarks/bench_intra_chunk.py [--shapes 1x8K,1x64K,8x4K] [--heads 16/32] [--reps 20] [--l2norm]
    ncu -k regex:intra -c 1 python benchmarks/bench_intra_chunk.py --profile intra_chunk_smem --shapes 1x8K

--l2norm: the norms in the kernel (vLLM's call), else pre-normed q, k.  --profile BUILD: one
recompute_wu and one launch of BUILD at the first shape, nothing timed (for a profiler).

Each row times, through the stage hook (eager, CUDA events, median of --reps), recompute_wu alone
and recompute_wu followed by each intra_chunk build over the same workspace; the difference is the
one-warpgroup stage 1.  Its CTAs (one per sequence and head) walk their chunks in order, so the µs
per chunk is that difference over the longest sequence's chunks: at 1x8K and 1x64K one CTA per SM,
at 8x4K 256 CTAs at two per SM.  The fused kernel runs at the slower of this and its chains
(~2.2 µs per chunk); the _smem build leaves P and Tu in shared memory, as the fused kernel would.
Every intra_chunk build the installed objects hold is timed (older branches' builds as well).
"""
from __future__ import annotations

import argparse
import statistics
import sys

import torch


def _shape(s):
    b, t = s.lower().split("x")
    return int(b), int(t.replace("k", "")) * (1024 if "k" in t else 1)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="1x8K,1x64K,8x4K")
    ap.add_argument("--heads", default="16/32")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--l2norm", action="store_true")
    ap.add_argument("--profile", metavar="BUILD")
    a = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("no CUDA GPU: nothing to time (the objects' SASS: pytest tests/test_intra_chunk.py)")
        return 0
    import gdn_prefill
    from gdn_prefill import _ext
    from gdn_prefill import reference as ref
    # every intra_chunk build the objects hold (older objects' builds too, for an A / B)
    builds = sorted(v for v in gdn_prefill.compiled_variants() if v.startswith("intra_chunk"))
    hk, hv = (int(x) for x in a.heads.split("/"))
    if not a.profile:
        print(f"l2norm in the kernel: {a.l2norm}")
        print("| shape | Hk/Hv | recompute_wu µs | build | + intra µs | chunks per CTA | µs per chunk |")
        print("|---|---|---|---|---|---|---|")
    for s in a.shapes.split(","):
        B, L = _shape(s)
        inp = ref.make_inputs([L] * B, hk, hv, seed=0, device="cuda", state="dense", l2norm_inputs=not a.l2norm,
                              beta_dtype=torch.bfloat16)
        T = B * L
        ws = torch.empty(gdn_prefill.workspace_bytes(T, B, hv, fused=True), dtype=torch.uint8, device="cuda")
        out = torch.empty(T, hv, 128, dtype=torch.bfloat16, device="cuda")
        args = (inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], out, inp["state"].clone())
        kw = dict(cu_seqlens=inp["cu_seqlens"], workspace=ws, fused=1, overlap_split=0, use_qk_l2norm=a.l2norm)
        if a.profile:
            _ext._launch_stages(("recompute_wu",), *args, **kw)
            _ext._launch_stages((a.profile,), *args, **kw)
            torch.cuda.synchronize()
            return 0

        def timed(stages):
            for _ in range(3):
                _ext._launch_stages(stages, *args, **kw)
            ts = []
            for _ in range(a.reps):
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                _ext._launch_stages(stages, *args, **kw)
                e1.record()
                torch.cuda.synchronize()
                ts.append(e0.elapsed_time(e1) * 1e3)
            return statistics.median(ts)

        base = timed(("recompute_wu",))
        chunks = (L + 63) // 64
        for b in builds:
            t = timed(("recompute_wu", b)) - base
            print(f"| {s} | {a.heads} | {base:.1f} | {b} | {t:.1f} | {chunks} | {t / chunks:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
