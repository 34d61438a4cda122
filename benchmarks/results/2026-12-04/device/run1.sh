#!/usr/bin/env bash
# Scratch device run: rS-in-registers builds of the single plan's kernel against main's.
source tools/device_lib.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
for b in r ro r3; do
  inst build/aot_$b $b
  step smoke_$b 60 python3 benchmarks/bench_fused.py --smoke; grep single "$OUT/smoke_$b.log" | sed "s/^/$b /"
  grep -q "err o" "$OUT/smoke_$b.log" || { tail -5 "$OUT/smoke_$b.log"; continue; }
  extra=""; [ $b = r ] && extra="--two"
  step ab_$b 100 python3 lab/ab.py --tag $b $extra; grep ^AB "$OUT/ab_$b.log"
  [ $b = r ] && { step abl_$b 60 python3 lab/ab.py --tag $b --l2norm --rows 8x4K:16/32,16x512:8/16; grep ^AB "$OUT/abl_$b.log"; }
done
inst build/aot base
step ab_base 120 python3 lab/ab.py --tag base --two; grep ^AB "$OUT/ab_base.log"
step abl_base 60 python3 lab/ab.py --tag base --l2norm --rows 8x4K:16/32,16x512:8/16; grep ^AB "$OUT/abl_base.log"
inst build/aot_r r
step tests_r 150 python3 -m pytest -m gpu tests/test_gpu_prefill.py tests/test_numerics_hard.py -k single -q -p no:cacheprovider -rfE -x
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/tests_r.log" | tail -5
echo "total $((SECONDS - T0)) s"
