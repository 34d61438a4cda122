#!/usr/bin/env bash
# run 104: stage 1's inverse merges (3.2, 3.3) on the tensor cores (mma.sync m16n8k8, 3xTF32;
# objects build/aot_mt) against main (build/aot); same tree otherwise (only recompute_wu differs).
#   carry: build/aot build/aot_mt build/run104.sh build/smoke_wu.py
set -u
REPO=$PWD; FINAL=$OUT; export OUT=/tmp/r104; mkdir -p $OUT; export PYTHONUNBUFFERED=1; t0=$SECONDS
fin() { tar -C /tmp -czf $FINAL/run104.tgz r104; exit $1; }
inst() { GDN_PREFILL_PREBUILT=$1 timeout -s KILL 90 python3 -m pip install -q --no-build-isolation --no-deps -e . >$OUT/build_$2.log 2>&1 || { tail -20 $OUT/build_$2.log; fin 1; }; }
pre() {  # tag
  mkdir -p $OUT/$1
  timeout -s KILL 70 python3 benchmarks/bench_prefill.py --shapes 8x4K,32x2K,varlen16,1x8K,1x64K --heads 16/32 \
    --modes graph --no-progress --no-plot --no-host-overhead --impls gdn:wgmma --out "$OUT/$1" --tag prefill >"$OUT/$1/bench.log" 2>&1
  echo "$1: $(grep -E "^\| (1x|8x|32x|varlen)" "$OUT/$1/prefill.md" | awk -F'|' '{printf "%s %s, ", $2, $6}')"
}
num() { timeout -s KILL 60 python3 benchmarks/bench_prefill.py --numerics-only --numerics-T 4096,16384 --impls gdn:wgmma,gdn:wgmma-4k --out $OUT/num_$1 --no-progress >$OUT/num_$1.log 2>&1
  grep -E "^\| " $OUT/num_$1/*numerics*.md 2>/dev/null | head -8; }
inst build/aot_mt mt
timeout -s KILL 60 python3 build/smoke_wu.py 2>&1 | tail -3
[ ${PIPESTATUS[0]} = 0 ] || { echo "smoke failed or hung"; fin 1; }
timeout -s KILL 150 python3 -m pytest -m gpu tests -q -p no:cacheprovider -x >$OUT/gpu_mt.txt 2>&1; tail -1 $OUT/gpu_mt.txt
grep -E "^(FAILED|ERROR)" $OUT/gpu_mt.txt | head -5
num mt
OUT=$OUT/ncu_mt timeout -s KILL 70 bash tools/ncu_stages.sh 8x4096 1x8192 2>&1 | grep -E "==|recompute|spine|sum"
timeout -s KILL 90 ncu --clock-control none --section SourceCounters --section SpeedOfLight --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --import-source no -k regex:recompute -c 1 -o $OUT/wu_mt python3 tools/profile_one.py 8x4096 fused >$OUT/ncu_wu.log 2>&1; tail -1 $OUT/ncu_wu.log
ncu -i $OUT/wu_mt.ncu-rep --page source --csv --print-source sass > $OUT/wu_src_mt.csv 2>/dev/null
ncu -i $OUT/wu_mt.ncu-rep --page details --csv 2>/dev/null | grep -E "L1/TEX Cache Throughput|Duration|Issue Slots Busy|Mem Busy" | cut -c1-20,150-260
echo "$((SECONDS-t0)) s"
inst build/aot main
timeout -s KILL 60 python3 build/smoke_wu.py 2>&1 | tail -3
num main
echo "$((SECONDS-t0)) s"
pre main1
inst build/aot_mt mt2; pre mt1
inst build/aot main2; pre main2
inst build/aot_mt mt3; pre mt2
echo "$((SECONDS-t0)) s"
fin 0
