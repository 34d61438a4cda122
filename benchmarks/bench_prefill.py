"""The whole prefill against FLA (and FlashInfer when importable) on a Hopper GPU.

    python benchmarks/bench_prefill.py                   # full sweep: 6 shapes x 3 head configs, graph + eager
    python benchmarks/bench_prefill.py --quick           # 1x1K, 1x8K, 8x4K, varlen16 at Hk/Hv 16/32
    python benchmarks/bench_prefill.py --shapes '1x*' --heads 16/32,8/8 --impls gdn:wgmma,fla
    python benchmarks/bench_prefill.py --numerics        # + numerics report (fp64 oracle, T = 4K, 64K)
    python benchmarks/bench_prefill.py --numerics-only
    python benchmarks/bench_prefill.py --list            # the cases with their FLOP / HBM floors (no GPU needed)

Writes <out>/prefill_<date>.{json,md,png} (and numerics_<date>.{json,md}); --out defaults
to benchmarks/results/.  The harness lives in gdn_prefill/bench/ (its docstring has the
methodology and the FLOP / byte formulas); `python -m gdn_prefill` runs its --quick form.
"""
from __future__ import annotations

import os
import sys

from gdn_prefill.bench import main

if __name__ == "__main__":
    sys.exit(main(default_out=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")))
