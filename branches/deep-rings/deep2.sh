#!/usr/bin/env bash
# Issue 53 candidates (41st session), call 2 of 3: dp's GPU tests (single plan, sanitizers,
# concurrency), then which part did what: A/B sk, sp, dr (each with main's and dp's rows from call
# 1 beside them; one pass, so read within ~1-2 %), engine style and pre-normed.
source lab/device_lib.sh
[ -d build/slim_f16b ] || tar xJf build/carry10/f16b.tar.xz -C build
for b in sk sp dr dp; do [ -d build/slim_$b ] || tar xJf build/carry12/$b.tar.xz -C build; done
inst build/slim_dp dp
step tests 240 python3 -m pytest -m gpu tests/test_gpu_prefill.py tests/test_numerics_hard.py tests/test_fused_plan.py \
  tests/test_gpu_sanitizer.py tests/test_gpu_concurrency.py -q -p no:cacheprovider -rfE -k "single or fused or sanitizer or concurrent"
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/tests.log" | tail -12
R="8x4K:16/32,16x512:16/32,8x4K:8/16"
for b in sk sp dr f16b; do
  inst build/slim_$b $b
  step abl_$b 45 python3 lab/ab.py --tag $b --l2norm --pool --rows "$R" --reps 15; grep ^AB "$OUT/abl_$b.log" | tee -a "$OUT/ab.txt"
  step abn_$b 35 python3 lab/ab.py --tag $b --rows "$R" --reps 15; grep ^AB "$OUT/abn_$b.log" | tee -a "$OUT/ab.txt"
done
(cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log)
echo "total $((SECONDS - T0)) s"
