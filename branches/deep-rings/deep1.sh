#!/usr/bin/env bash
# Issue 53 candidates prepared in the 41st session (no device then), call 1 of 3: the decisive one.
#   f16b = main's objects (build/carry10); build/carry12: sk = split-keys, sp = sk-phys, dr =
#   deep-rings, dp = deep-rings-phys (branches/deep-rings/HOW.md in 5e153c3).
# dp's smoke; dp's single-plan outputs against main's bit for bit (the same on pre-normed cases;
# where l2norm runs in the kernel rk, rq differ in their last bits); then A/B main, dp, main, dp,
# engine style (l2norm, pool) and pre-normed.  Predicted at 8x4K 16/32: dp -10 to -20 % in both if
# the chains wait on the TMA -> norms -> role path, else -5 to -10 % pre-normed, engine -2 to -5 %.
# Run with the deep-rings-phys branch checked out (tools/bitwise_outputs.py --runs single).
source lab/device_lib.sh
[ -d build/slim_f16b ] || tar xJf build/carry10/f16b.tar.xz -C build
for b in sk sp dr dp; do [ -d build/slim_$b ] || tar xJf build/carry12/$b.tar.xz -C build; done
inst build/slim_dp dp
step smoke 60 python3 benchmarks/bench_fused.py --smoke; tail -2 "$OUT/smoke.log"
step bw_dp 90 python3 tools/bitwise_outputs.py --runs single,prefill --save /tmp/bw_dp.pt; tail -1 "$OUT/bw_dp.log"
inst build/slim_f16b f16b
step bw_f16b 90 python3 tools/bitwise_outputs.py --runs single,prefill --save /tmp/bw_f16b.pt; tail -1 "$OUT/bw_f16b.log"
python3 tools/bitwise_outputs.py --compare /tmp/bw_f16b.pt /tmp/bw_dp.pt | tee "$OUT/cmp_dp.txt"
R="8x4K:16/32,16x512:16/32,8x4K:8/16"
for b in f16b dp f16b dp; do
  inst build/slim_$b $b
  step abl_$b 45 python3 lab/ab.py --tag $b --l2norm --pool --rows "$R" --reps 15; grep ^AB "$OUT/abl_$b.log" | tee -a "$OUT/ab.txt"
  step abn_$b 35 python3 lab/ab.py --tag $b --rows "$R" --reps 15; grep ^AB "$OUT/abn_$b.log" | tee -a "$OUT/ab.txt"
done
(cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log)
echo "total $((SECONDS - T0)) s"
