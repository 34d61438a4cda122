#!/usr/bin/env bash
# run 76: wu-four-ctas in the overlap plan.  aot_r4q: stage 1 at four CTAs per SM except the
# overlap plan's second part (the launch that publishes ready flags), launched with 72,704 B of
# dynamic shared memory (three CTAs per SM, a runtime launch value); aot_r4p: every launch at 72,704 B.
set -u
OUT=${OUT:-/tmp/gdn_out}; mkdir -p "$OUT"; export PYTHONUNBUFFERED=1
inst() { GDN_PREFILL_PREBUILT=$1 python3 -m pip install -q --no-build-isolation --no-deps -e . >"$OUT/build_$(basename $1).log" 2>&1 || { tail -5 "$OUT/build_$(basename $1).log"; exit 1; }; }
inst build/aot_r4q
echo "### r4q launches (ncu)"
timeout 60 ncu --metrics launch__shared_mem_per_block_dynamic,launch__occupancy_limit_shared_mem,gpu__time_duration.sum -k regex:recompute_wu \
  python3 tools/profile_one.py 1x8192 2>&1 | grep -E "recompute_wu_kernel|shared_mem|occupancy_limit|duration" | sed 's/kernel_cutlass_recompute_wu_kernel.*/wu/' | head -16
echo "### r4q tests"
timeout 120 python3 -m pytest -m gpu -q -p no:cacheprovider --timeout 60 tests/test_gpu_overlap.py tests/test_gpu_prefill.py tests/test_gpu_sanitizer.py 2>&1 | tail -2
for d in aot_r4q aot aot_r4p; do
  inst build/$d
  sh=1x8K,1x64K; [ $d = aot_r4p ] && sh=1x8K
  timeout 100 python3 benchmarks/bench_overlap.py --shapes $sh --md "$OUT/overlap_$d.md" >"$OUT/overlap_$d.log" 2>&1 || tail -3 "$OUT/overlap_$d.log"
  timeout 60 python3 benchmarks/bench_prefill.py --shapes 1x1K,1x8K,8x4K,32x2K,varlen16,1x64K --heads 16/32 \
    --modes graph --rep-budget-s 0.2 --max-reps 50 --no-progress --no-plot --no-host-overhead \
    --impls gdn:wgmma --out "$OUT/prefill_$d" --tag prefill >"$OUT/prefill_$d.log" 2>&1 || tail -3 "$OUT/prefill_$d.log"
done
for d in aot_r4q aot aot_r4p; do
  echo "### $d overlap"; grep -E '^\| 1x' "$OUT/overlap_$d.md" | awk -F'|' '{printf "%s%s:%s ", $2, $3, $5} END {print ""}'
  echo "### $d prefill"; grep -E "^\| (1x|8x|32x|varlen)" "$OUT/prefill_$d/prefill.md" | awk -F'|' '{printf "%s %s, ", $2, $6} END {print ""}'
done
