#!/usr/bin/env bash
# run 108: branch wu-l2-prefetch (stage 1 prefetches the k / q rows 16 slots ahead into L2; objects
# build/aot_pf) against main b9e9060 + split 5 % (build/aot); ncu stages and the prefill alternated.
#   carry: build/aot build/aot_pf build/run108.sh build/smoke_wu.py
set -u
REPO=$PWD; FINAL=$OUT; export OUT=/tmp/r108; mkdir -p $OUT; export PYTHONUNBUFFERED=1; t0=$SECONDS
fin() { tar -C /tmp -czf $FINAL/run108.tgz r108; exit $1; }
inst() { GDN_PREFILL_PREBUILT=$1 timeout -s KILL 90 python3 -m pip install -q --no-build-isolation --no-deps -e . >$OUT/build_$2.log 2>&1 || { tail -20 $OUT/build_$2.log; fin 1; }; }
pre() {  # tag
  mkdir -p $OUT/$1
  timeout -s KILL 60 python3 benchmarks/bench_prefill.py --shapes 8x4K,varlen16,1x8K,1x64K --heads 16/32 \
    --modes graph --no-progress --no-plot --no-host-overhead --impls gdn:wgmma --out "$OUT/$1" --tag prefill >"$OUT/$1/bench.log" 2>&1
  echo "$1: $(grep -E "^\| (1x|8x|32x|varlen)" "$OUT/$1/prefill.md" | awk -F'|' '{printf "%s %s, ", $2, $6}')"
}
inst build/aot_pf pf
timeout -s KILL 60 python3 build/smoke_wu.py 2>&1 | tail -2
[ ${PIPESTATUS[0]} = 0 ] || { echo "smoke failed or hung"; fin 1; }
OUT=$OUT/ncu_pf timeout -s KILL 50 bash tools/ncu_stages.sh 8x4096 2>&1 | grep -E "==|recompute|spine"
pre pf1
inst build/aot main; pre main1
inst build/aot_pf pf2; pre pf2
echo "$((SECONDS-t0)) s"
fin 0
