#!/usr/bin/env bash
# Session 39 device run 1: gp (gate loads before the tile wait) single-plan GPU tests, then one A/B
# round rk3/gp/ffp in both settings (engine: l2norm in kernel; pre-normed).
source lab/device_lib.sh
for b in rk3 gp ffp; do tar xJf build/carry7/$b.tar.xz -C build; done
inst build/slim_gp gp
step smoke 60 python3 benchmarks/bench_fused.py --smoke; tail -2 "$OUT/smoke.log"
step tests 220 python3 -m pytest -m gpu tests/test_gpu_prefill.py tests/test_numerics_hard.py tests/test_fused_plan.py \
  tests/test_gpu_sanitizer.py tests/test_gpu_concurrency.py -q -p no:cacheprovider -rfE -k "single or fused or sanitizer or concurrent"
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/tests.log" | tail -12
R="8x4K:16/32,4x2K:16/32,16x512:16/32,8x4K:8/16"
for b in ${ORDER:-rk3 gp ffp}; do
  inst build/slim_$b $b
  step abl_$b 40 python3 lab/ab.py --tag $b --l2norm --rows "$R" --reps 15; grep ^AB "$OUT/abl_$b.log" | tee -a "$OUT/ab.txt"
  step abn_$b 40 python3 lab/ab.py --tag $b --rows "$R" --reps 15; grep ^AB "$OUT/abn_$b.log" | tee -a "$OUT/ab.txt"
done
(cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log)
echo "total $((SECONDS - T0)) s"
