#!/usr/bin/env bash
# run 117: stage 1's row norms by reduce-scatter, now skipped entirely for pre-normed inputs (run 116: the
# run-115 build summed squares even with use_qk_l2norm = 0, +726 warp instructions per CTA in the
# benchmarks' setting).  build/aot_nrm against main (build/aot), alternated, pre-normed inputs (the
# README's setting) and in-kernel l2norm (--qk-l2norm, vLLM's); numerics with l2norm; GPU suite on nrm.
#   carry: build/aot build/aot_nrm build/run117.sh build/smoke_wu.py
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
num() { timeout -s KILL 60 python3 benchmarks/bench_prefill.py --numerics-only --numerics-T 4096,16384 --qk-l2norm --impls gdn:wgmma --out /tmp/num_$1 --no-progress >/tmp/num_$1.log 2>&1
  { echo "== $1 (use_qk_l2norm)"; grep -E "^\| " /tmp/num_$1/*numerics*.md 2>/dev/null | head -8; } | tee -a $OUT/numerics.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
inst build/aot_nrm nrm
timeout -s KILL 60 python3 build/smoke_wu.py 2>&1 | tail -3 | tee $OUT/smoke.txt
pre nrm1; pre nrm1_l2 --qk-l2norm; num nrm
inst build/aot main; pre main1; pre main1_l2 --qk-l2norm; num main
inst build/aot_nrm nrm2; pre nrm2; pre nrm2_l2 --qk-l2norm
inst build/aot main2; pre main2; pre main2_l2 --qk-l2norm
echo "$((SECONDS-t0)) s"
inst build/aot_nrm nrm3
timeout -s KILL 150 python3 -m pytest -m gpu tests -q -p no:cacheprovider >$OUT/gpu_nrm.txt 2>&1; tail -1 $OUT/gpu_nrm.txt
grep -E "(FAILED|ERROR)" $OUT/gpu_nrm.txt | head -5
echo "$((SECONDS-t0)) s"
