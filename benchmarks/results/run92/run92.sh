#!/usr/bin/env bash
# run 92: branch spine-rs-dual with the sequences longest first in the spine's grid and the wave-model
# rule.  Smoke first (a hang stops the run), the prefill on the branch, the GPU suite, the prefill on
# main (same call), the branch's prefill again.
set -u
REPO=$PWD; FINAL=$OUT; export OUT=/tmp/r92; mkdir -p $OUT; export PYTHONUNBUFFERED=1; t0=$SECONDS
fin() { tar -C /tmp -czf $FINAL/run92.tgz r92; exit $1; }
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
timeout -s KILL 150 python3 -m pytest -m gpu tests -q -p no:cacheprovider -x >$OUT/dual_gpu.txt 2>&1; tail -2 $OUT/dual_gpu.txt
grep -E "^(FAILED|ERROR)" $OUT/dual_gpu.txt | head -5
echo "suite $((SECONDS-t0)) s"
mkdir -p /tmp/wt_main && tar -xzf build/src_main.tgz -C /tmp/wt_main && cd /tmp/wt_main
GDN_PREFILL_PREBUILT=$REPO/build/aot python3 -m pip install -q --no-build-isolation --no-deps -e . >$OUT/build_main.log 2>&1 || { tail -20 $OUT/build_main.log; fin 1; }
pre main; echo "$((SECONDS-t0)) s"
cd $REPO && GDN_PREFILL_PREBUILT=build/aot_dual python3 -m pip install -q --no-build-isolation --no-deps -e . >$OUT/build_dual2.log 2>&1 || fin 1
pre dual2; echo "$((SECONDS-t0)) s"
fin 0
