#!/usr/bin/env bash
# run 118: stage 1's k and q tiles by TMA (one mbarrier, warp 0 issues; rows >= L zeroed after landing)
# in build/aot_tma against main 82c1e7c (build/aot_nrm), alternated, pre-normed inputs and in-kernel
# l2norm; numerics both settings; the whole GPU suite (sanitizer included) on the TMA build.
#   carry: build/aot_nrm build/aot_tma build/run118.sh build/smoke_wu.py
set -u
export PYTHONUNBUFFERED=1; t0=$SECONDS
inst() { GDN_PREFILL_PREBUILT=$1 timeout -s KILL 90 python3 -m pip install -q --no-build-isolation --no-deps -e . >/tmp/build_$2.log 2>&1 || { tail -20 /tmp/build_$2.log; exit 1; }; }
pre() {  # tag [--qk-l2norm]
  mkdir -p /tmp/$1
  timeout -s KILL 60 python3 benchmarks/bench_prefill.py --shapes 8x4K,32x2K,varlen16,1x8K --heads 16/32 ${2:-} \
    --modes graph --no-progress --no-plot --no-host-overhead --impls gdn:wgmma --out "/tmp/$1" --tag prefill >"/tmp/$1/bench.log" 2>&1
  echo "$1: $(grep -E "^\| (1x|8x|32x|varlen)" "/tmp/$1/prefill.md" | awk -F'|' '{printf "%s %s, ", $2, $6}')" | tee -a $OUT/prefill_ab.txt
  cat /tmp/$1/prefill.md >> $OUT/prefill_tables.md 2>/dev/null
}
num() { timeout -s KILL 60 python3 benchmarks/bench_prefill.py --numerics-only --numerics-T 4096,16384 ${2:-} --impls gdn:wgmma --out /tmp/num_$1 --no-progress >/tmp/num_$1.log 2>&1
  { echo "== $1 ${2:-}"; grep -E "^\| " /tmp/num_$1/*numerics*.md 2>/dev/null | head -8; } | tee -a $OUT/numerics.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
inst build/aot_tma tma
timeout -s KILL 60 python3 build/smoke_wu.py 2>&1 | tail -3 | tee $OUT/smoke.txt
[ ${PIPESTATUS[0]} = 0 ] || { echo "smoke failed or hung"; exit 1; }
pre tma1; pre tma1_l2 --qk-l2norm; num tma; num tma_l2 --qk-l2norm
inst build/aot_nrm main; pre main1; pre main1_l2 --qk-l2norm
inst build/aot_tma tma2; pre tma2; pre tma2_l2 --qk-l2norm
inst build/aot_nrm main2; pre main2; pre main2_l2 --qk-l2norm
echo "$((SECONDS-t0)) s"
inst build/aot_tma tma3
timeout -s KILL 170 python3 -m pytest -m gpu tests -q -p no:cacheprovider >$OUT/gpu_tma.txt 2>&1; tail -1 $OUT/gpu_tma.txt
grep -E "(FAILED|ERROR)" $OUT/gpu_tma.txt | head -5
echo "$((SECONDS-t0)) s"
