#!/usr/bin/env bash
# run 115: stage 1's row norms by a reduce-scatter over each row's 16 threads and packed bf16 widening
# (build/aot_nrm) against main f502a1f (build/aot): alternated timing, numerics, the whole GPU suite on
# the new build; then two timing-only probes of the overlap plan's second part beside the spine
# (build/aot_nostore: part 2 stores neither P nor Tu; build/aot_noload: part 2 loads no k/q rows).
#   carry: build/aot build/aot_nrm build/aot_nostore build/aot_noload build/run115.sh build/smoke_wu.py
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
parts() { { echo "== $1"; timeout -s KILL 60 python3 tools/overlap_parts.py 1x8192 1x65536 --reps 40 2>&1 | grep -v -i warn; } >> $OUT/parts.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
inst build/aot_nrm nrm
timeout -s KILL 60 python3 build/smoke_wu.py 2>&1 | tail -3 | tee $OUT/smoke.txt
[ ${PIPESTATUS[0]} = 0 ] || { echo "smoke failed or hung"; exit 1; }
pre nrm1
inst build/aot main; pre main1
inst build/aot_nrm nrm2; pre nrm2; num nrm
inst build/aot main2; pre main2
echo "$((SECONDS-t0)) s"
inst build/aot_nrm nrm3
timeout -s KILL 200 python3 -m pytest -m gpu tests -v -p no:cacheprovider --durations=15 >$OUT/gpu_nrm.txt 2>&1; tail -1 $OUT/gpu_nrm.txt
grep -E "(FAILED|ERROR)" $OUT/gpu_nrm.txt | head -5
echo "$((SECONDS-t0)) s"
parts nrm
inst build/aot_nostore nostore; parts nostore
inst build/aot_noload noload; parts noload
grep -E "^==|chain|span|p50" $OUT/parts.txt | head -40
echo "$((SECONDS-t0)) s"
