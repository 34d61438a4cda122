#!/usr/bin/env bash
# Device run prepared in session 38 (not run): the norm warp's gate loads issued before its wait for
# the tiles (gp), and the folds by factors for pre-normed q, k (ffp), against main (rk3), in both
# settings. Slim tarballs in build/carry7 (rk3 = main's objects; gp = branches/single-gate-prefetch.patch;
# ffp = branches/single-folds-factored-prenormed.patch, whose fp8-pool builds spill: not timed here).
# Prediction (gp): engine style -2 to -5 % (the gates' global loads leave the path the role waits on),
# pre-normed 0 to -2 %.
source lab/device_lib.sh
for b in rk3 gp ffp; do tar xJf build/carry7/$b.tar.xz -C build; done
inst build/slim_gp gp
step smoke 60 python3 benchmarks/bench_fused.py --smoke; tail -2 "$OUT/smoke.log"
step tests 220 python3 -m pytest -m gpu tests/test_gpu_prefill.py tests/test_numerics_hard.py tests/test_fused_plan.py \
  tests/test_gpu_sanitizer.py -q -p no:cacheprovider -rfE -k "single or fused or sanitizer"
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/tests.log" | tail -12
R="8x4K:16/32,4x2K:16/32,16x512:16/32,8x4K:8/16"
for b in rk3 gp ffp rk3 gp ffp; do
  inst build/slim_$b $b
  step abl_$b 40 python3 lab/ab.py --tag $b --l2norm --rows "$R" --reps 15; grep ^AB "$OUT/abl_$b.log" | tee -a "$OUT/ab.txt"
  step abn_$b 40 python3 lab/ab.py --tag $b --rows "$R" --reps 15; grep ^AB "$OUT/abn_$b.log" | tee -a "$OUT/ab.txt"
done
(cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log)
echo "total $((SECONDS - T0)) s"
