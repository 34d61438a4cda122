#!/usr/bin/env bash
# run 84: branch wu-p-arrive (recompute_wu's pqk builds: the barrier before P's staging is a named
# barrier the other warpgroup arrived on right after its Q K^T, not a CTA barrier after both folds).
# Only kernel objects differ from main: both link against this tree.  GPU tests + racecheck on pa,
# ncu per kernel (8x4096, 32x2048, 1x8192) and the prefill table on pa, main, pa.
set -u
FINAL=$OUT; export OUT=/tmp/r84; mkdir -p $OUT; export PYTHONUNBUFFERED=1; t0=$SECONDS
inst() { GDN_PREFILL_PREBUILT=build/$1 python3 -m pip install -q --no-build-isolation --no-deps -e . >$OUT/build_$1.log 2>&1 || { tail -20 $OUT/build_$1.log; exit 1; }; }
pre() {  # tag
  mkdir -p $OUT/$1
  timeout 80 python3 benchmarks/bench_prefill.py --shapes 1x1K,1x8K,8x4K,32x2K,varlen16,1x64K --heads 16/32 \
    --modes graph --rep-budget-s 0.2 --max-reps 50 --no-progress --no-plot --no-host-overhead \
    --impls gdn:wgmma --out "$OUT/$1" --tag prefill >"$OUT/$1/bench.log" 2>&1
  echo "$1: $(grep -E "^\| (1x|8x|32x|varlen)" "$OUT/$1/prefill.md" | awk -F'|' '{printf "%s %s, ", $2, $6}')"
}
inst aot_pa
timeout 120 python3 -m pytest -m gpu -q -p no:cacheprovider --timeout 60 tests/test_gpu_prefill.py tests/test_gpu_overlap.py >$OUT/pa_tests.txt 2>&1; tail -1 $OUT/pa_tests.txt
timeout 100 python3 -m pytest -m gpu -q -p no:cacheprovider --timeout 90 tests/test_gpu_sanitizer.py -k "racecheck or synccheck" >$OUT/pa_san.txt 2>&1; tail -1 $OUT/pa_san.txt
echo "tests $((SECONDS-t0)) s"
OUT=$OUT/pa_ncu timeout 100 bash tools/ncu_stages.sh 8x4096 32x2048 1x8192 2>&1 | grep -E "==|recompute|sum"
pre pa1; echo "$((SECONDS-t0)) s"
inst aot
OUT=$OUT/main_ncu timeout 100 bash tools/ncu_stages.sh 8x4096 32x2048 1x8192 2>&1 | grep -E "==|recompute|sum"
pre main; echo "$((SECONDS-t0)) s"
inst aot_pa; pre pa2; echo "$((SECONDS-t0)) s"
tar -C /tmp -czf $FINAL/run84.tgz r84
