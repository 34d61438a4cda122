#!/usr/bin/env bash
# run 100: branch wu-fold-exp2 (recompute_wu's fold: select + one MUFU.EX2 per element; objects
# build/aot_fx) against main (build/aot), same working tree (only the kernel objects differ).
# GPU suite on the branch, numerics report on both, ncu of the stages at 8x4K on both, the
# prefill alternated main / branch / main / branch (warm harness), gdn:wgmma only.
#   carry: build/aot build/aot_fx build/run100.sh build/smoke_dual.py
set -u
REPO=$PWD; FINAL=$OUT; export OUT=/tmp/r100; mkdir -p $OUT; export PYTHONUNBUFFERED=1; t0=$SECONDS
fin() { tar -C /tmp -czf $FINAL/run100.tgz r100; exit $1; }
inst() { GDN_PREFILL_PREBUILT=$1 timeout -s KILL 90 python3 -m pip install -q --no-build-isolation --no-deps -e . >$OUT/build_$2.log 2>&1 || { tail -20 $OUT/build_$2.log; fin 1; }; }
pre() {  # tag
  mkdir -p $OUT/$1
  timeout -s KILL 70 python3 benchmarks/bench_prefill.py --shapes 8x4K,32x2K,varlen16,1x8K,1x64K --heads 16/32 \
    --modes graph --no-progress --no-plot --no-host-overhead --impls gdn:wgmma --out "$OUT/$1" --tag prefill >"$OUT/$1/bench.log" 2>&1
  echo "$1: $(grep -E "^\| (1x|8x|32x|varlen)" "$OUT/$1/prefill.md" | awk -F'|' '{printf "%s %s, ", $2, $6}')"
}
inst build/aot_fx fx
timeout -s KILL 40 python3 build/smoke_dual.py 2>&1 | tail -1
[ ${PIPESTATUS[0]} = 0 ] || { echo "smoke failed or hung"; fin 1; }
timeout -s KILL 150 python3 -m pytest -m gpu tests -q -p no:cacheprovider -x >$OUT/gpu_fx.txt 2>&1; tail -1 $OUT/gpu_fx.txt
grep -E "^(FAILED|ERROR)" $OUT/gpu_fx.txt | head -5
timeout -s KILL 60 python3 benchmarks/bench_prefill.py --numerics-only --numerics-T 4096,16384 --impls gdn:wgmma,gdn:wgmma-4k --out $OUT/num_fx --no-progress >$OUT/num_fx.log 2>&1
grep -E "^\| " $OUT/num_fx/*numerics*.md 2>/dev/null | head -8
OUT=$OUT/ncu_fx timeout -s KILL 70 bash tools/ncu_stages.sh 8x4096 2>&1 | grep -E "recompute|spine|sum"
echo "$((SECONDS-t0)) s"
inst build/aot main
timeout -s KILL 60 python3 benchmarks/bench_prefill.py --numerics-only --numerics-T 4096,16384 --impls gdn:wgmma,gdn:wgmma-4k --out $OUT/num_main --no-progress >$OUT/num_main.log 2>&1
grep -E "^\| " $OUT/num_main/*numerics*.md 2>/dev/null | head -8
OUT=$OUT/ncu_main timeout -s KILL 70 bash tools/ncu_stages.sh 8x4096 2>&1 | grep -E "recompute|spine|sum"
echo "$((SECONDS-t0)) s"
pre main1
inst build/aot_fx fx2; pre fx1
inst build/aot main2; pre main2
inst build/aot_fx fx3; pre fx2
echo "$((SECONDS-t0)) s"
fin 0
