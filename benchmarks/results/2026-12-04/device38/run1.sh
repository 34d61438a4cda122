#!/usr/bin/env bash
# Scratch device run 1 (session 38, FlashInfer part 1 staged): the prepared single-plan patches.
# Builds: lf (main), ff (folds by row/column factors), rk (ranking up to 64 sequences), both.
# The single-plan GPU tests on `both`, then one A/B alternation of all four (engine style, l2norm in kernel).
source lab/device_lib.sh
bash .peer1/stage.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
for b in lf ff rk both; do tar xJf build/carry/$b.tar.xz -C build; done
inst build/slim_both both
step smoke 60 python3 benchmarks/bench_fused.py --smoke; tail -2 "$OUT/smoke.log"
step tests 240 python3 -m pytest -m gpu tests/test_gpu_prefill.py tests/test_numerics_hard.py tests/test_fused_plan.py \
  tests/test_gpu_sanitizer.py tests/test_gpu_concurrency.py -q -p no:cacheprovider -rfE \
  -k "single or fused or sanitizer or concurrent"
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/tests.log" | tail -12
source lab/rows.sh
for b in lf ff rk both; do
  inst build/slim_$b $b
  step ab_$b 70 python3 lab/ab.py --tag $b --l2norm --rows "$R" --reps 15; grep ^AB "$OUT/ab_$b.log" | tee -a "$OUT/ab.txt"
done
(cd "$OUT" && tar czf logs1.tgz *.log && rm -f *.log)
echo "total $((SECONDS - T0)) s"
