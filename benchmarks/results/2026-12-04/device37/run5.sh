#!/usr/bin/env bash
# Scratch device run 5: the single plan's ranking by warp shuffles (lf, cap 32) against main (swr):
# its GPU tests (single plan), then one A/B alternation.
source lab/device_lib.sh
for b in swr lf; do tar xJf build/$b.tar.xz -C build; done
inst build/slim_lf lf
step smoke 60 python3 benchmarks/bench_fused.py --smoke; tail -2 "$OUT/smoke.log"
step tests 110 python3 -m pytest -m gpu tests/test_gpu_prefill.py -q -p no:cacheprovider -rfE -k "single"
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/tests.log" | tail -8
M16r=84+100+200+200+300+400+600+800+1000+1200+1500+2000+3000+5000
M4r=64+64+128+128+256+256+512+512+1024+1024+2048+2048
R="$M4r:16/32,$M16r:16/32,8x4K:16/32,16x512:16/32,32x256:16/32,64x256:16/32,$M4r:8/16,16x512:4/8"
for b in swr lf; do
  inst build/slim_$b $b
  step ab_$b 50 python3 lab/ab.py --tag $b --l2norm --rows "$R" --reps 15; grep ^AB "$OUT/ab_$b.log" | tee -a "$OUT/ab.txt"
done
(cd "$OUT" && tar czf logs5.tgz *.log && rm -f *.log)
echo "total $((SECONDS - T0)) s"
