#!/usr/bin/env bash
# run 80: GDN_OVERLAP_MIN_SLOTS 16 -> 24 (run 79): 1x1K now runs the serial plan.
set -u
export PYTHONUNBUFFERED=1
GDN_PREFILL_PREBUILT=build/aot python3 -m pip install -q --no-build-isolation --no-deps -e . >/tmp/build.log 2>&1 || { tail -20 /tmp/build.log; exit 1; }
python3 -c "
import torch, gdn_prefill as g
from gdn_prefill import plan
for T in (1024, 1536, 2048): print(T, plan.overlap_split(T, 1, 32, 132))"
timeout 60 python3 benchmarks/bench_prefill.py --shapes 1x1K,1x2K,1x8K --heads 16/32 \
    --modes graph --rep-budget-s 0.2 --max-reps 50 --no-progress --no-plot --no-host-overhead \
    --impls gdn:wgmma --out /tmp/p80 --tag prefill >/tmp/p80.log 2>&1 || tail -5 /tmp/p80.log
grep -E "^\| 1x" /tmp/p80/prefill.md | awk -F'|' '{print $2, $6}'
