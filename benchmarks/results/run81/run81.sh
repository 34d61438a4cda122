#!/usr/bin/env bash
# run 81: branch spine-rs-pq (the fused spine computes P in a P warpgroup; stage 1 plain _a16)
# against main.  pq: sanitizer + fused/overlap GPU tests, ncu per kernel, whole prefill graph;
# main: ncu per kernel, whole prefill graph.  One tarball back.
set -u
REPO=$PWD; FINAL=$OUT; export OUT=/tmp/r81; mkdir -p $OUT; export PYTHONUNBUFFERED=1
mkdir -p /tmp/wt_pq && tar -xzf build/src_pq.tgz -C /tmp/wt_pq
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t0=$SECONDS
cd /tmp/wt_pq
GDN_PREFILL_PREBUILT=$REPO/build/aot_pq python3 -m pip install -q --no-build-isolation --no-deps -e . >$OUT/build_pq.log 2>&1 || { tail -20 $OUT/build_pq.log; exit 1; }
echo "pq installed $((SECONDS-t0)) s"
timeout 200 python3 -m pytest -m gpu -q -p no:cacheprovider --timeout 100 tests/test_gpu_prefill.py tests/test_gpu_overlap.py >$OUT/pq_tests.txt 2>&1; tail -3 $OUT/pq_tests.txt
echo "pq tests $((SECONDS-t0)) s"
timeout 240 python3 -m pytest -m gpu -q -p no:cacheprovider --timeout 200 tests/test_gpu_sanitizer.py >$OUT/pq_san.txt 2>&1; tail -3 $OUT/pq_san.txt
echo "pq sanitizer $((SECONDS-t0)) s"
bench() {  # tag
  OUT=$OUT/$1 timeout 100 bash tools/ncu_stages.sh 1x8192 8x4096 2>&1 | grep -E "==|recompute|spine|fwd_o|sum"
  timeout 80 python3 benchmarks/bench_prefill.py --shapes 1x1K,1x8K,8x4K,32x2K,varlen16,1x64K --heads 16/32 \
    --modes graph --rep-budget-s 0.2 --max-reps 50 --no-progress --no-plot --no-host-overhead \
    --impls gdn:wgmma --out "$OUT/$1" --tag prefill >"$OUT/$1/bench.log" 2>&1
  grep -E "^\| (1x|8x|32x|varlen)" "$OUT/$1/prefill.md" | awk -F'|' '{printf "%s %s, ", $2, $6} END {print ""}' || tail -5 "$OUT/$1/bench.log"
}
mkdir -p $OUT/pq $OUT/main
bench pq; echo "pq bench $((SECONDS-t0)) s"
cd $REPO
GDN_PREFILL_PREBUILT=build/aot python3 -m pip install -q --no-build-isolation --no-deps -e . >$OUT/build_main.log 2>&1 || { tail -20 $OUT/build_main.log; exit 1; }
bench main; echo "main bench $((SECONDS-t0)) s"
tar -C /tmp -czf $FINAL/run81.tgz r81
