#!/usr/bin/env bash
# Run 152: compose v3 (the k halves in separate warps, partial sums through shared memory), empty
# sequences one segment: the segmented plan's tests, timeline, sweep and numerics.
set -u
source tools/device_lib.sh
inst build/aot run152
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout -s KILL "$limit" "$@" >"$OUT/$name.log" 2>&1; echo "$name: rc=$? at $((SECONDS - t0)) s"; }
step seg_tests 200 python3 -m pytest -m gpu tests/test_gpu_prefill.py -q -p no:cacheprovider -k "seg"
tail -3 "$OUT/seg_tests.log"
step timeline 120 python3 tools/plan_timeline.py 1x32768 1x8192 --heads 2/4
grep -v -i warn "$OUT/timeline.log"
step sweep_few 230 python3 benchmarks/bench_segments.py --shapes 1x8K,1x32K --heads 2/4,4/8 --segments 4,8,16,32 \
  --md "$OUT/sweep_few.md" --json "$OUT/sweep_few.json"
grep "^|" "$OUT/sweep_few.md" || tail -5 "$OUT/sweep_few.log"
step numerics 200 python3 benchmarks/numerics_plans.py --T 4096,32768,65536 --heads 2/4,16/32 --md "$OUT/numerics.md" \
  --json "$OUT/numerics.json"
grep "^|" "$OUT/numerics.md" || tail -5 "$OUT/numerics.log"
