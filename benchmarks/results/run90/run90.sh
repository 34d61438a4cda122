#!/usr/bin/env bash
# run 90: branch spine-rs-dual (working tree) against main (build/src_main.tgz + build/aot).
# GPU suite on the dual build; the fused spine's three builds at B = 1..8 (T = 4K); ncu of the
# spine at 8x4K; the whole prefill (graph) on both.
set -u
REPO=$PWD; FINAL=$OUT; export OUT=/tmp/r90; mkdir -p $OUT; export PYTHONUNBUFFERED=1; t0=$SECONDS
pre() {  # tag
  mkdir -p $OUT/$1
  timeout 80 python3 benchmarks/bench_prefill.py --shapes 1x1K,1x8K,8x4K,32x2K,varlen16,1x64K --heads 16/32 \
    --modes graph --rep-budget-s 0.2 --max-reps 50 --no-progress --no-plot --no-host-overhead \
    --impls gdn:wgmma --out "$OUT/$1" --tag prefill >"$OUT/$1/bench.log" 2>&1
  echo "$1: $(grep -E "^\| (1x|8x|32x|varlen)" "$OUT/$1/prefill.md" | awk -F'|' '{printf "%s %s, ", $2, $6}')"
}
GDN_PREFILL_PREBUILT=build/aot_dual python3 -m pip install -q --no-build-isolation --no-deps -e . >$OUT/build_dual.log 2>&1 || { tail -20 $OUT/build_dual.log; exit 1; }
timeout 170 python3 -m pytest -m gpu tests -q -p no:cacheprovider --timeout 100 >$OUT/dual_gpu.txt 2>&1; tail -3 $OUT/dual_gpu.txt
grep -E "^(FAILED|ERROR)" $OUT/dual_gpu.txt | head -5
echo "suite $((SECONDS-t0)) s"
timeout 120 python3 benchmarks/bench_spine.py --rs-crossover --md $OUT/rs_crossover.md --json $OUT/rs_crossover.json >$OUT/rs_crossover.log 2>&1 || tail -5 $OUT/rs_crossover.log
cat $OUT/rs_crossover.md; echo "$((SECONDS-t0)) s"
pre dual; echo "$((SECONDS-t0)) s"
OUT=$OUT/dual_ncu timeout 60 bash tools/ncu_stages.sh 8x4096 2>&1 | grep -E "==|recompute|spine|sum"
mkdir -p /tmp/wt_main && tar -xzf build/src_main.tgz -C /tmp/wt_main && cd /tmp/wt_main
GDN_PREFILL_PREBUILT=$REPO/build/aot python3 -m pip install -q --no-build-isolation --no-deps -e . >$OUT/build_main.log 2>&1 || { tail -20 $OUT/build_main.log; exit 1; }
pre main; echo "$((SECONDS-t0)) s"
tar -C /tmp -czf $FINAL/run90.tgz r90
