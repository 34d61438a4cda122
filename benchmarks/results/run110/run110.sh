#!/usr/bin/env bash
# run 110: stage 1's TF32 split by mask (2 instructions per operand, was ~9) and its head divisions by
# precomputed divisors, the dual lead blocks' one scan (build/aot_new) against main ac64d40 (build/aot).
# Timing first (alternated), then numerics, then the whole GPU suite on the new build.
#   carry: build/aot build/aot_new build/run110.sh build/smoke_wu.py
set -u
export PYTHONUNBUFFERED=1; t0=$SECONDS
inst() { GDN_PREFILL_PREBUILT=$1 timeout -s KILL 90 python3 -m pip install -q --no-build-isolation --no-deps -e . >/tmp/build_$2.log 2>&1 || { tail -20 /tmp/build_$2.log; exit 1; }; }
pre() {  # tag
  mkdir -p /tmp/$1
  timeout -s KILL 70 python3 benchmarks/bench_prefill.py --shapes 8x4K,32x2K,varlen16,1x8K,1x64K --heads 16/32 \
    --modes graph --no-progress --no-plot --no-host-overhead --impls gdn:wgmma --out "/tmp/$1" --tag prefill >"/tmp/$1/bench.log" 2>&1
  echo "$1: $(grep -E "^\| (1x|8x|32x|varlen)" "/tmp/$1/prefill.md" | awk -F'|' '{printf "%s %s, ", $2, $6}')" | tee -a $OUT/prefill_ab.txt
  cat /tmp/$1/prefill.md >> $OUT/prefill_tables.md 2>/dev/null
}
num() { timeout -s KILL 60 python3 benchmarks/bench_prefill.py --numerics-only --numerics-T 4096,16384 --impls gdn:wgmma,gdn:wgmma-4k --out /tmp/num_$1 --no-progress >/tmp/num_$1.log 2>&1
  { echo "== $1"; grep -E "^\| " /tmp/num_$1/*numerics*.md 2>/dev/null | head -8; } | tee -a $OUT/numerics.txt; }
inst build/aot_new new
timeout -s KILL 60 python3 build/smoke_wu.py 2>&1 | tail -3
[ ${PIPESTATUS[0]} = 0 ] || { echo "smoke failed or hung"; exit 1; }
echo "$((SECONDS-t0)) s"
pre new1
inst build/aot main; pre main1; num main
inst build/aot_new new2; pre new2; num new
inst build/aot main2; pre main2
inst build/aot_new new3
echo "$((SECONDS-t0)) s"
timeout -s KILL 250 python3 -m pytest -m gpu tests -v -p no:cacheprovider --durations=15 >$OUT/gpu_new.txt 2>&1; tail -1 $OUT/gpu_new.txt
grep -E "(FAILED|ERROR)" $OUT/gpu_new.txt | head -5
echo "$((SECONDS-t0)) s"
