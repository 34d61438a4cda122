#!/usr/bin/env bash
# Scratch device run 4: the single plan ranks its sequences longest first (lf) against main (swr):
# its GPU tests, A/B on mixed batches in both orders and uniform rows; the soak on the lf build.
source lab/device_lib.sh
for b in swr lf; do tar xJf build/$b.tar.xz -C build; done
inst build/slim_lf lf
step smoke 60 python3 benchmarks/bench_fused.py --smoke; tail -2 "$OUT/smoke.log"
step tests 200 python3 -m pytest -m gpu tests/test_gpu_prefill.py tests/test_numerics_hard.py tests/test_fused_plan.py \
  tests/test_gpu_sanitizer.py tests/test_gpu_concurrency.py tests/test_state_pools.py -q -p no:cacheprovider -rfE \
  -k "single or fused or sanitizer or concurrent or pool or checkpoint"
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/tests.log" | tail -12
M16=5000+3000+2000+1500+1200+1000+800+600+400+300+200+200+100+84
M16r=84+100+200+200+300+400+600+800+1000+1200+1500+2000+3000+5000
M4=2048+2048+1024+1024+512+512+256+256+128+128+64+64
M4r=64+64+128+128+256+256+512+512+1024+1024+2048+2048
M6=300+4000+200+1000+100+2500+700+50+1500+600
R="$M4:16/32,$M4r:16/32,$M6:16/32,$M16:16/32,$M16r:16/32,8x4K:16/32,16x512:16/32,64x256:16/32,65x256:16/32,$M4r:8/16,16x512:4/8"
for b in swr lf swr lf; do
  inst build/slim_$b $b
  step ab_$b 60 python3 lab/ab.py --tag $b --l2norm --rows "$R" --reps 15; grep ^AB "$OUT/ab_$b.log" | tee -a "$OUT/ab.txt"
done
step soak 240 python3 benchmarks/soak_streams.py --runs 3 --iters 100 --impls gdn --md "$OUT/soak.md"
tail -8 "$OUT/soak.md"
(cd "$OUT" && tar czf logs4.tgz *.log && rm -f *.log)
echo "total $((SECONDS - T0)) s"
