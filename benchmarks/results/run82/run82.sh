#!/usr/bin/env bash
# run 82: branch spine-rs-coresident (spine_rs with 2 ring slots, 149.5 KB: one stage-1 CTA fits
# beside each spine CTA, so the overlap plan may run at any batch).  GPU tests (fused, overlap,
# sanitizer), the overlap split swept at B = 8 / 32 and B = 1, the prefill table (rule: 35 %
# wherever >= 24 slots), and main's prefill table in the same call.
set -u
REPO=$PWD; FINAL=$OUT; export OUT=/tmp/r82; mkdir -p $OUT; export PYTHONUNBUFFERED=1
mkdir -p /tmp/wt_co && tar -xzf build/src_co.tgz -C /tmp/wt_co
t0=$SECONDS
pre() {  # tag
  timeout 80 python3 benchmarks/bench_prefill.py --shapes 1x1K,1x8K,8x4K,32x2K,varlen16,1x64K --heads 16/32 \
    --modes graph --rep-budget-s 0.2 --max-reps 50 --no-progress --no-plot --no-host-overhead \
    --impls gdn:wgmma --out "$OUT/$1" --tag prefill >"$OUT/$1/bench.log" 2>&1
  echo "$1: $(grep -E "^\| (1x|8x|32x|varlen)" "$OUT/$1/prefill.md" | awk -F'|' '{printf "%s %s, ", $2, $6}')"
}
mkdir -p $OUT/co $OUT/main
cd /tmp/wt_co
GDN_PREFILL_PREBUILT=$REPO/build/aot_co python3 -m pip install -q --no-build-isolation --no-deps -e . >$OUT/build_co.log 2>&1 || { tail -20 $OUT/build_co.log; exit 1; }
timeout 150 python3 -m pytest -m gpu -q -p no:cacheprovider --timeout 100 tests/test_gpu_prefill.py tests/test_gpu_overlap.py >$OUT/co_tests.txt 2>&1; tail -2 $OUT/co_tests.txt
timeout 120 python3 -m pytest -m gpu -q -p no:cacheprovider --timeout 100 tests/test_gpu_sanitizer.py -k racecheck >$OUT/co_san.txt 2>&1; tail -1 $OUT/co_san.txt
echo "tests $((SECONDS-t0)) s"
pre co; echo "co prefill $((SECONDS-t0)) s"
timeout 240 python3 benchmarks/bench_overlap.py --shapes 8x4K,32x2K,1x8K,1x64K --md $OUT/co/overlap.md --json $OUT/co/overlap.json >$OUT/co/overlap.log 2>&1 || tail -3 $OUT/co/overlap.log
grep -E 'split' $OUT/co/overlap.log | grep us | sed -E 's/ \(slot.*\)//' | tr -s ' ' | paste -sd ';'
echo "co overlap $((SECONDS-t0)) s"
cd $REPO
GDN_PREFILL_PREBUILT=build/aot python3 -m pip install -q --no-build-isolation --no-deps -e . >$OUT/build_main.log 2>&1 || { tail -20 $OUT/build_main.log; exit 1; }
pre main; echo "main $((SECONDS-t0)) s"
tar -C /tmp -czf $FINAL/run82.tgz r82
