#!/usr/bin/env bash
# Prepared in session 39 for the next device run (issue 53): the role's inverse in fp16 by doubling
# (branches/single-inverse-f16.patch; its lane-level numpy emulation reproduces (I + A)^-1 to fp16
# precision: branches/single-inverse-f16-emulation.py).  All 16 fused builds compile without local
# memory, setmaxnreg kept; the role's SASS 1,235 lines against 1,493, LDS 29 against 192, FFMA 28
# against 120.  Predicted: single plan 5-12 % faster in both settings (the role bounds the chunk).
# Before it may land: the contract's range check with an exact fallback (beta is not bounded by
# the API; fp16 overflows past 65504), test_fused_kernel's counts, DESIGN.md.
# Slim builds in build/carry9 (gp2 = main's objects, f16 = the patch's); needs lab/device_lib.sh and
# lab/ab.py (git show 3355726:benchmarks/results/2026-12-04/device38/...).
source lab/device_lib.sh
for b in gp2 f16; do tar xJf build/carry9/$b.tar.xz -C build; done
inst build/slim_f16 f16
step smoke 60 python3 benchmarks/bench_fused.py --smoke; tail -2 "$OUT/smoke.log"
step tests 220 python3 -m pytest -m gpu tests/test_gpu_prefill.py tests/test_numerics_hard.py tests/test_fused_plan.py \
  tests/test_gpu_sanitizer.py -q -p no:cacheprovider -rfE -k "single or fused or sanitizer"
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/tests.log" | tail -12
R="8x4K:16/32,4x2K:16/32,16x512:16/32,8x4K:8/16"
for b in gp2 f16 gp2 f16; do
  inst build/slim_$b $b
  step abl_$b 50 python3 lab/ab.py --tag $b --l2norm --pool --rows "$R" --reps 15; grep ^AB "$OUT/abl_$b.log" | tee -a "$OUT/ab.txt"
  step abn_$b 40 python3 lab/ab.py --tag $b --rows "$R" --reps 15; grep ^AB "$OUT/abn_$b.log" | tee -a "$OUT/ab.txt"
done
(cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log)
echo "total $((SECONDS - T0)) s"
