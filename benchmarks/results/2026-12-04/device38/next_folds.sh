#!/usr/bin/env bash
# Device run prepared in session 38 (not run): the folds by row and column factors in both settings.
# Builds (slim tarballs in build/carry6): rk3 = main 6e0c31c's objects; ffm = the folds patch on main
# (branches/single-folds-factored-main.patch, from the commit that brought this script);
# ffp = the same with the factors only for pre-normed q, k (single-folds-factored-prenormed.patch).
# Both spill one word in the role of the four fp8-pool builds (test_sass fails there): fix first.
# Question: ffm measured +3-9 % engine style (A/B) but -3 % pre-normed (ncu); which setting loses?
source lab/device_lib.sh
for b in rk3 ffm ffp; do tar xJf build/carry6/$b.tar.xz -C build; done
inst build/slim_ffp ffp
step smoke 60 python3 benchmarks/bench_fused.py --smoke; tail -2 "$OUT/smoke.log"
step tests 220 python3 -m pytest -m gpu tests/test_gpu_prefill.py tests/test_numerics_hard.py tests/test_fused_plan.py \
  tests/test_gpu_sanitizer.py -q -p no:cacheprovider -rfE -k "single or fused or sanitizer"
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/tests.log" | tail -12
R="8x4K:16/32,4x2K:16/32,16x512:16/32,8x4K:8/16"
for b in rk3 ffm ffp rk3 ffm ffp; do
  inst build/slim_$b $b
  step abl_$b 40 python3 lab/ab.py --tag $b --l2norm --rows "$R" --reps 15; grep ^AB "$OUT/abl_$b.log" | tee -a "$OUT/ab.txt"
  step abn_$b 40 python3 lab/ab.py --tag $b --rows "$R" --reps 15; grep ^AB "$OUT/abn_$b.log" | tee -a "$OUT/ab.txt"
done
(cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log)
echo "total $((SECONDS - T0)) s"
