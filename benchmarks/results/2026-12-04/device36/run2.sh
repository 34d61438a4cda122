#!/usr/bin/env bash
# Scratch device run 2 (session 36): pools + spine_rs ring build: GPU suite; spine_rs ring A/B against
# the pools build (spine_rs as main's); pool numerics.
source lab/device_lib.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
R="1x8K:16/32,8x4K:16/32,16x512:16/32,8x4K:4/8,16x512:4/8,1x8K:4/8"
inst build/slim_ring ring
step smoke 60 python3 benchmarks/bench_fused.py --smoke; tail -2 "$OUT/smoke.log"
step suite 330 python3 -m pytest -m gpu tests -q -p no:cacheprovider -rfE
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/suite.log" | tail -20
for b in pools ring pools ring; do
  inst build/slim_$b $b
  step ab_$b 45 python3 lab/ab.py --tag $b --two --rows $R --reps 15; grep ^AB "$OUT/ab_$b.log" | tee -a "$OUT/ab.txt"
  segrows $b
done
step numst 120 python3 benchmarks/numerics_state_dtype.py --md "$OUT/numerics_state_dtype.md"; tail -25 "$OUT/numst.log"
(cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log)
echo "total $((SECONDS - T0)) s"
