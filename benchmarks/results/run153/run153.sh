#!/usr/bin/env bash
# Run 153: compose v4 (coalesced row reads of A_j, the S slice in registers, a warp reduce-scatter):
# the segmented plan's tests, timeline, sweep; ncu of compose.
set -u
source tools/device_lib.sh
inst build/aot run153
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout -s KILL "$limit" "$@" >"$OUT/$name.log" 2>&1; echo "$name: rc=$? at $((SECONDS - t0)) s"; }
step seg_tests 200 python3 -m pytest -m gpu tests/test_gpu_prefill.py -q -p no:cacheprovider -k "seg"
tail -3 "$OUT/seg_tests.log"
step timeline 120 python3 tools/plan_timeline.py 1x32768 1x8192 --heads 2/4
grep -v -i warn "$OUT/timeline.log"
step sweep_few 230 python3 benchmarks/bench_segments.py --shapes 1x8K,1x32K --heads 2/4,4/8 --segments 4,8,16,32 \
  --md "$OUT/sweep_few.md" --json "$OUT/sweep_few.json"
grep "^|" "$OUT/sweep_few.md" || tail -5 "$OUT/sweep_few.log"
OUT=$OUT bash tools/ncu_kernel.sh compose compose 1x32768 rule 2/4 2>&1 | head -40
