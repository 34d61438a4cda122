#!/usr/bin/env bash
# Scratch device run 2: the ordered rS build (aot_ro) verified, the single plan's rule refitted,
# diagnostic builds (role alone d1, chains alone d2), ncu at 8x4K 16/32.
source tools/device_lib.sh
inst build/aot_ro ro
step smoke 60 python3 benchmarks/bench_fused.py --smoke; grep single "$OUT/smoke.log"
step tests 150 python3 -m pytest -m gpu tests/test_gpu_prefill.py tests/test_numerics_hard.py -k single -q -p no:cacheprovider -rfE
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/tests.log" | tail -4
for tool in memcheck racecheck synccheck; do
  step san_$tool 120 compute-sanitizer --tool $tool --error-exitcode 9 python3 benchmarks/bench_fused.py --smoke
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|single" "$OUT/san_$tool.log" | tail -2
done
step soak 120 python3 benchmarks/soak_streams.py --impls gdn --shape 8x2048 --heads 16/32 --runs 2 --iters 20 \
  --md "$OUT/soak.md" --json "$OUT/soak.json"
grep "^|" "$OUT/soak.md" || tail -5 "$OUT/soak.log"
R16="1x8K:16/32,2x4K:16/32,4x1K:16/32,4x4K:16/32,8x1K:16/32,16x1K:16/32,8x8K:16/32,64x512:16/32,varlen16:16/32"
R16="$R16,2048+2048+2048+1500+700+100:16/32,8192+1024+1024+512+512+256+256+128+128+64:16/32"
R8="8x2K:8/16,16x1K:8/16,4x4K:8/16,32x2K:8/16,2048+2048+2048+1500+700+100:8/16,32x2K:4/8,16x1K:4/8,32x512:4/8,8x2K:4/8"
step rule 200 python3 lab/ab.py --tag ro --two --reps 10 --rows "$R16,$R8"; grep ^AB "$OUT/rule.log"
for d in d1 d2; do
  inst build/aot_$d $d
  step ab_$d 40 python3 lab/ab.py --tag $d --rows 8x4K:16/32,16x512:8/16; grep ^AB "$OUT/ab_$d.log"
done
inst build/aot_ro ro
step ncu 150 ncu --clock-control none --set full --import-source no -k regex:Fused -c 1 -o /tmp/rep_ro \
  python3 benchmarks/bench_fused.py --shapes 8x4K --heads 16/32 --profile
ncu -i /tmp/rep_ro.ncu-rep --page source --csv --print-source sass > /tmp/src_ro.csv 2>/dev/null
ncu -i /tmp/rep_ro.ncu-rep --page details > "$OUT/ncu_details_ro.txt" 2>&1
python3 tools/ncu_hot.py /tmp/src_ro.csv --top 25 --sections > "$OUT/ncu_hot_ro.txt" 2>&1
grep -E "^ +(Duration|DRAM Throughput|Memory Throughput|L1/TEX Hit|Issue Slots Busy|Registers Per|Dynamic Shared)" "$OUT/ncu_details_ro.txt" | head -12
grep -A8 "per setmaxnreg section" "$OUT/ncu_hot_ro.txt"
echo "total $((SECONDS - T0)) s"
