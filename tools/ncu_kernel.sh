#!/usr/bin/env bash
# ncu's view of one kernel of a prefill (tools/profile_one.py, default 1x8192) on the H200: its key
# metrics and the SASS instructions with the most warp-stall samples (tools/ncu_hot.py).
#   bash tools/ncu_kernel.sh REGEX TAG [BxT [fused|unfused|rule [Hk/Hv]]]   (e.g. spine spine; recompute_wu wu 8x4096;
#   fwd_o fwd_o; spine_wgmma sw 1x16384 unfused)
#   SKIP=3 bash tools/ncu_kernel.sh recompute_wu wu2   (skips 3 matches: profile_one.py runs the
#   prefill twice, so at 1x8192 this is the second call's stage-1 part 2 of the overlap plan, the
#   launch that publishes the ready flags; ncu runs the launches one after another)
#   CUBIN=build/aot/cubin/spine_wgmma_kv/*.cubin bash tools/ncu_kernel.sh spine_wgmma sw 1x16384 unfused
#   (the profiled kernel's cubin: ncu_hot.py names the instructions each hot one waits for)
# Needs an installed gdn_prefill; writes $OUT/ncu_TAG_{source.csv,hot.txt,details.txt}.
set -u
OUT=${OUT:-/tmp/gdn_out}; mkdir -p "$OUT"
re=$1; tag=$2; shape=${3:-1x8192}
timeout 200 ncu --clock-control none --set full --import-source no -k "regex:$re" --launch-skip "${SKIP:-0}" -c 1 -o "/tmp/ncu_$tag" \
  python3 tools/profile_one.py "$shape" ${4:-} ${5:-} >"$OUT/ncu_$tag.log" 2>&1 || tail -5 "$OUT/ncu_$tag.log"
ncu -i "/tmp/ncu_$tag.ncu-rep" --page source --csv --print-source sass >"$OUT/ncu_${tag}_source.csv" 2>/dev/null
ncu -i "/tmp/ncu_$tag.ncu-rep" --page details >"$OUT/ncu_${tag}_details.txt" 2>&1
echo "== $tag"
grep -E "^ +Duration|Registers Per|Warp Cycles Per Issued|L2 Cache Throughput|DRAM Throughput|Issue Slots Busy|Achieved Occupancy|Dynamic Shared" \
  "$OUT/ncu_${tag}_details.txt"
python3 tools/ncu_hot.py "$OUT/ncu_${tag}_source.csv" --top 25 --phases ${CUBIN:+--cubin $CUBIN} >"$OUT/ncu_${tag}_hot.txt"; cat "$OUT/ncu_${tag}_hot.txt"
