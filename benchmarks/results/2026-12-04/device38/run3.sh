#!/usr/bin/env bash
# Scratch device run 3: rk2 (ranking up to 64 sequences; the ranking lane forwards bounds and pool
# slot) — its single-plan GPU tests, then A/B against lf (main) alternating, dense and pool.
source lab/device_lib.sh
for b in lf rk2; do tar xJf build/carry/$b.tar.xz -C build; done
inst build/slim_rk2 rk2
step smoke 60 python3 benchmarks/bench_fused.py --smoke; tail -2 "$OUT/smoke.log"
step tests 220 python3 -m pytest -m gpu tests/test_gpu_prefill.py tests/test_numerics_hard.py tests/test_fused_plan.py \
  tests/test_gpu_sanitizer.py tests/test_gpu_concurrency.py tests/test_state_pools.py -q -p no:cacheprovider -rfE \
  -k "single or fused or sanitizer or concurrent"
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/tests.log" | tail -12
source lab/rows.sh
P="8x4K:16/32,16x512:16/32,32x256:16/32,64x256:16/32,$M41:16/32,$M16r:16/32,16x512:4/8"
for b in lf rk2 lf rk2; do
  inst build/slim_$b $b
  step ab_$b 70 python3 lab/ab.py --tag $b --l2norm --rows "$R" --reps 15; grep ^AB "$OUT/ab_$b.log" | tee -a "$OUT/ab.txt"
  step abp_$b 50 python3 lab/ab.py --tag $b --l2norm --pool --rows "$P" --reps 15; grep ^AB "$OUT/abp_$b.log" | tee -a "$OUT/ab.txt"
done
(cd "$OUT" && tar czf logs3.tgz *.log && rm -f *.log)
echo "total $((SECONDS - T0)) s"
