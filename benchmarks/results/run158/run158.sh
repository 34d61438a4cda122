#!/usr/bin/env bash
# Run 158: compose_f32 on the tensor cores (mma.sync m16n8k8, three TF32 passes) against the FMA
# walk of runs 153-157; gdn_prefill.distributed on the MAPS pass and compose_f32.  Phase a: the
# segmented plan's and distributed's tests, the segment sweep (the cost model's
# data), the old walk at the same shape in the same run.  Phase b: numerics, ncu of the new walk.
set -u
source tools/device_lib.sh
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout -s KILL "$limit" "$@" >"$OUT/$name.log" 2>&1; echo "$name: rc=$? at $((SECONDS - t0)) s"; }
if [ "${1:-a}" = a ]; then
  inst build/aot run158
  step seg_tests 200 python3 -m pytest -m gpu tests/test_gpu_prefill.py tests/test_fused_plan.py -q -p no:cacheprovider -k "seg or fused_plan_the_guard"
  tail -3 "$OUT/seg_tests.log"
  step cp_tests 200 python3 -m pytest -m gpu tests/test_distributed.py -q -p no:cacheprovider
  tail -3 "$OUT/cp_tests.log"
  step sweep 230 python3 benchmarks/bench_segments.py --shapes 1x8K,1x32K --heads 2/4,4/8 --segments 4,8,16,32 \
    --md "$OUT/sweep.md" --json "$OUT/sweep.json"
  grep "^|" "$OUT/sweep.md" || tail -5 "$OUT/sweep.log"
  # (in run 158 this folder was under /tmp, which setup.py refuses: the A/B did not run)
  rm -rf build/aot_prev && cp -r build/aot build/aot_prev && cp -r build/compose_old/* build/aot_prev/
  inst build/aot_prev run158old
  step sweep_old 120 python3 benchmarks/bench_segments.py --shapes 1x8K,1x32K --heads 2/4 --segments 16 \
    --md "$OUT/sweep_old.md" --json "$OUT/sweep_old.json"
  grep "^|" "$OUT/sweep_old.md" || tail -5 "$OUT/sweep_old.log"
else
  inst build/aot run158
  step numerics 150 python3 benchmarks/numerics_plans.py --T 4096,32768,65536 --heads 2/4,16/32 --md "$OUT/numerics.md" \
    --json "$OUT/numerics.json"
  grep "^|" "$OUT/numerics.md" || tail -5 "$OUT/numerics.log"
  OUT=$OUT bash tools/ncu_kernel.sh compose compose 1x32768 rule 2/4 > "$OUT/ncu_compose_summary.txt" 2>&1
  head -40 "$OUT/ncu_compose_summary.txt"
fi
