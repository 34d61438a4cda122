#!/usr/bin/env bash
# Run 166 (session 32; tree: branch fused-intra; objects carried: build/aot_ic3 = the branch now,
# build/aot_ic = the branch at c9c6bd3, run 165's builds).
# After run 165 phase 4 (intra_chunk_smem_lg, the gates on the load warp: 3.16 / 3.00 us per chunk at
# 1x8K / 1x64K without l2norm, 0.99 below intra_chunk_smem where 0.3-0.5 was predicted; with l2norm
# in the kernel 5.77, the norms +2.6 us): the branch keeps the load-warp gates in both builds
# (intra_chunk, intra_chunk_smem; the pipelined and register-capped builds, refuted, are gone), and
# the norms become one reduce-scatter over the row group, computed while the products run.
# Predictions: without l2norm, intra_chunk_smem within 0.1 us of run 165's smem_lg (3.0-3.2);
# with l2norm, 3.5-4.0 us per chunk at 1x8K (the norms +0.4-0.8 instead of +2.6).
set -u
source tools/device_lib.sh
inst build/aot_ic3 ic3
step ic_tests 240 python3 -m pytest tests/test_intra_chunk.py -q -p no:cacheprovider -rfE
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/ic_tests.log" | tail -12
step ic3 200 python3 benchmarks/bench_intra_chunk.py --shapes 1x8K,1x64K,8x4K --heads 16/32
step ic3_l2 200 python3 benchmarks/bench_intra_chunk.py --shapes 1x8K,8x4K --heads 16/32 --l2norm
inst build/aot_ic ic
step ic_old 100 python3 benchmarks/bench_intra_chunk.py --shapes 1x8K --heads 16/32
step ic_old_l2 100 python3 benchmarks/bench_intra_chunk.py --shapes 1x8K --heads 16/32 --l2norm
inst build/aot_ic3 ic3
b=intra_chunk_smem
timeout -s KILL 150 ncu --clock-control none --set full --import-source no -k regex:intra -c 1 -o "/tmp/ncu_$b" \
  python3 benchmarks/bench_intra_chunk.py --profile $b --shapes 1x8K --l2norm >"$OUT/ncu_$b.log" 2>&1
ncu -i "/tmp/ncu_$b.ncu-rep" --page source --csv --print-source sass >"/tmp/ncu_${b}_source.csv" 2>/dev/null
ncu -i "/tmp/ncu_$b.ncu-rep" --page details >"/tmp/ncu_${b}_details.txt" 2>&1
python3 tools/ncu_hot.py "/tmp/ncu_${b}_source.csv" --top 30 --phases --cubin build/aot_ic3/cubin/$b/*.cubin \
  >"/tmp/ncu_${b}_hot.txt" 2>&1
{ echo "== $b"; grep -E "^ +Duration|Registers Per|Warp Cycles Per Issued|Issue Slots Busy" "/tmp/ncu_${b}_details.txt"
  grep -A30 "segment" "/tmp/ncu_${b}_hot.txt" | head -32; } >"$OUT/ncu_summary.txt"
echo "== new (aot_ic3)"; grep -E "^\|" "$OUT/ic3.log" "$OUT/ic3_l2.log" | sed 's/.*log://'
echo "== old (aot_ic)"; grep -E "^\| 1x" "$OUT/ic_old.log" "$OUT/ic_old_l2.log" | sed 's/.*log://'
cat "$OUT/ncu_summary.txt"; echo "total $((SECONDS - T0)) s"
