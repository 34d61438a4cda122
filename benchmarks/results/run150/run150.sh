#!/usr/bin/env bash
# Run 150 (session 27's first device call): the segmented plan's first GPU run.  Its tests against
# the fp64 oracle (every form at 1 and 3 chunks per segment, checkpoints, initial states, bf16 pools),
# the segment-count sweep with each pass alone (the cost model's fit), the numerics table.
set -u
source tools/device_lib.sh
inst build/aot run150
echo "commit $(git rev-parse --short HEAD 2>/dev/null), $(date -u +%F)"
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout -s KILL "$limit" "$@" >"$OUT/$name.log" 2>&1; echo "$name: rc=$? at $((SECONDS - t0)) s"; }
step seg_tests 170 python3 -m pytest -m gpu tests/test_gpu_prefill.py -q -p no:cacheprovider -k "seg" -x
tail -3 "$OUT/seg_tests.log"
step sweep_few 230 python3 benchmarks/bench_segments.py --shapes 1x8K,1x32K --heads 2/4,4/8 --segments 4,8,16,32 \
  --md "$OUT/sweep_few.md" --json "$OUT/sweep_few.json"
grep "^|" "$OUT/sweep_few.md" || tail -5 "$OUT/sweep_few.log"
step sweep_many 120 python3 benchmarks/bench_segments.py --shapes 1x8K,1x64K --heads 16/32 --segments 2,4 --no-passes \
  --md "$OUT/sweep_many.md" --json "$OUT/sweep_many.json"
grep "^|" "$OUT/sweep_many.md" || tail -5 "$OUT/sweep_many.log"
step numerics 100 python3 benchmarks/numerics_plans.py --T 4096,32768 --heads 2/4 --md "$OUT/numerics.md"
grep "^|" "$OUT/numerics.md" || tail -5 "$OUT/numerics.log"
