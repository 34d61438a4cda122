#!/usr/bin/env bash
# Scratch device run A (session 36, FlashInfer part 1 staged): fused.py's KQ / VT rings through
# cutlass.pipeline (fr) verified, and timed A/B against the ring build (fused.py as main's).
source lab/device_lib.sh
bash .peer1/stage.sh
for b in fr ring; do tar xJf build/$b.tar.xz -C build; done
inst build/slim_fr fr
step smoke 60 python3 benchmarks/bench_fused.py --smoke; tail -2 "$OUT/smoke.log"
step tests 200 python3 -m pytest -m gpu tests/test_gpu_prefill.py tests/test_numerics_hard.py tests/test_fused_plan.py \
  tests/test_gpu_sanitizer.py tests/test_gpu_concurrency.py -q -p no:cacheprovider -rfE -k "single or fused or sanitizer or concurrent or pool"
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/tests.log" | tail -12
R=8x4K:16/32,32x2K:16/32,16x512:16/32,8x4K:8/16,16x512:4/8
for b in ring fr ring fr; do
  inst build/slim_$b $b
  step ab_$b 40 python3 lab/ab.py --tag $b --rows $R --reps 15; grep ^AB "$OUT/ab_$b.log" | tee -a "$OUT/ab.txt"
done
inst build/slim_fr fr
(cd "$OUT" && tar czf logsA.tgz *.log && rm -f *.log)
echo "total $((SECONDS - T0)) s"
