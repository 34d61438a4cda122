#!/usr/bin/env bash
# Session 39 device run 3: gp2 (gate loads branch-free, clamped rows, beta kept raw until after the
# norms; recompute_wu shares gate_rows/gate_cumsum) -- single-plan and two-launch GPU tests, then A/B
# with rk3 (main) alternated: engine (l2norm, --two), pre-normed, engine with a pool.
source lab/device_lib.sh
for b in rk3 gp2; do tar xJf build/carry8/$b.tar.xz -C build; done
inst build/slim_gp2 gp2
step smoke 60 python3 benchmarks/bench_fused.py --smoke; tail -2 "$OUT/smoke.log"
step tests 200 python3 -m pytest -m gpu tests/test_gpu_prefill.py tests/test_numerics_hard.py tests/test_fused_plan.py \
  tests/test_gpu_sanitizer.py tests/test_gpu_concurrency.py -q -p no:cacheprovider -rfE -k "single or fused or sanitizer or concurrent"
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/tests.log" | tail -12
R="8x4K:16/32,4x2K:16/32,16x512:16/32,8x4K:8/16"
for b in rk3 gp2 rk3 gp2; do
  inst build/slim_$b $b
  step abl_$b 50 python3 lab/ab.py --tag $b --l2norm --two --rows "$R" --reps 15; grep ^AB "$OUT/abl_$b.log" | tee -a "$OUT/ab.txt"
  step abn_$b 40 python3 lab/ab.py --tag $b --rows "$R" --reps 15; grep ^AB "$OUT/abn_$b.log" | tee -a "$OUT/ab.txt"
  step abp_$b 40 python3 lab/ab.py --tag $b --l2norm --pool --rows "8x4K:16/32,16x512:8/16" --reps 15; grep ^AB "$OUT/abp_$b.log" | tee -a "$OUT/ab.txt"
done
(cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log)
echo "total $((SECONDS - T0)) s"
