#!/usr/bin/env bash
# run 91: branch spine-rs-dual with the register budget fixed (224 / 56; run 90's 232 / 48 asked for
# more than the I/O warpgroup gave back and hung).  Smoke first (a hang stops the run), then the GPU
# suite, the three fused-spine builds at B = 1..8, the prefill on both, ncu of the dual at 8x4K.
set -u
REPO=$PWD; FINAL=$OUT; export OUT=/tmp/r91; mkdir -p $OUT; export PYTHONUNBUFFERED=1; t0=$SECONDS
fin() { tar -C /tmp -czf $FINAL/run91.tgz r91; exit $1; }
pre() {  # tag
  mkdir -p $OUT/$1
  timeout -s KILL 80 python3 benchmarks/bench_prefill.py --shapes 1x1K,1x8K,8x4K,32x2K,varlen16,1x64K --heads 16/32 \
    --modes graph --rep-budget-s 0.2 --max-reps 50 --no-progress --no-plot --no-host-overhead \
    --impls gdn:wgmma --out "$OUT/$1" --tag prefill >"$OUT/$1/bench.log" 2>&1
  echo "$1: $(grep -E "^\| (1x|8x|32x|varlen)" "$OUT/$1/prefill.md" | awk -F'|' '{printf "%s %s, ", $2, $6}')"
}
GDN_PREFILL_PREBUILT=build/aot_dual python3 -m pip install -q --no-build-isolation --no-deps -e . >$OUT/build_dual.log 2>&1 || { tail -20 $OUT/build_dual.log; fin 1; }
timeout -s KILL 40 python3 build/smoke_dual.py 2>&1 | tail -3
[ ${PIPESTATUS[0]} = 0 ] || { echo "smoke failed or hung"; fin 1; }
pre dual; echo "$((SECONDS-t0)) s"
timeout -s KILL 100 python3 benchmarks/bench_spine.py --rs-crossover --md $OUT/rs_crossover.md --json $OUT/rs_crossover.json >$OUT/rs_crossover.log 2>&1 || tail -5 $OUT/rs_crossover.log
cat $OUT/rs_crossover.md; echo "$((SECONDS-t0)) s"
timeout -s KILL 150 python3 -m pytest -m gpu tests -q -p no:cacheprovider -x >$OUT/dual_gpu.txt 2>&1; tail -2 $OUT/dual_gpu.txt
grep -E "^(FAILED|ERROR)" $OUT/dual_gpu.txt | head -5
echo "suite $((SECONDS-t0)) s"
OUT=$OUT/dual_ncu timeout -s KILL 60 bash tools/ncu_stages.sh 8x4096 2>&1 | grep -E "==|recompute|spine|sum"
mkdir -p /tmp/wt_main && tar -xzf build/src_main.tgz -C /tmp/wt_main && cd /tmp/wt_main
GDN_PREFILL_PREBUILT=$REPO/build/aot python3 -m pip install -q --no-build-isolation --no-deps -e . >$OUT/build_main.log 2>&1 || { tail -20 $OUT/build_main.log; fin 1; }
pre main; echo "$((SECONDS-t0)) s"
fin 0
