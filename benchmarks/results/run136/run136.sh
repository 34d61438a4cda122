#!/usr/bin/env bash
# run 136 (session 24): issue 32 on the H200.  Carry build/aot (57c7c85's kernels: O(1) sequence
# lookup in the fused spine), build/aot_base (9997cc9's, the before), .whl (fla-core 0.6.0, einops).
# Predictions (written before the run):
#  - GPU suite: all pass at the default (serial) plan; concurrency tests: 0 hangs, 0 mismatches.
#  - many sequences, Hk/Hv 2/4, 4 tokens each, fused plan: before, ~0.17 ms at 1K and ~47 ms at 16K
#    (issue 32's numbers); after, linear: 16K ~1-2 ms, 128K ~8-15 ms (a spine CTA of ~2-3 us per
#    (sequence, head) on 132 SMs x 2: the 1 ms target is below one CTA per sequence-head).
set -u
t0=$SECONDS
source tools/device_lib.sh
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
inst build/aot new
timeout -s KILL 300 python3 -m pytest -m gpu tests -q -p no:cacheprovider -x >"$OUT/gpu_suite.txt" 2>&1; tail -3 "$OUT/gpu_suite.txt"
echo "suite done $((SECONDS-t0)) s"
timeout -s KILL 120 python3 benchmarks/bench_many_seqs.py --ns 1K,16K,128K,1M --reps 5 --md "$OUT/many_new.md" \
  >"$OUT/many_new.log" 2>&1; echo "many new rc=$?"; grep "^|" "$OUT/many_new.md"
inst build/aot_base base
timeout -s KILL 90 python3 benchmarks/bench_many_seqs.py --ns 1K,16K --spines wgmma --reps 3 --md "$OUT/many_base.md" \
  >"$OUT/many_base.log" 2>&1; echo "many base rc=$?"; grep "^|" "$OUT/many_base.md"
echo "$((SECONDS-t0)) s"
