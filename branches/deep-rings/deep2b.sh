#!/usr/bin/env bash
# Issue 53 candidates (41st session), call 2b of 4: A/B, builds in the order sp sk dp dr f16b (call 2a
# and 2b reverse each other), engine style (l2norm, pool) and pre-normed, three rows.
# Predicted at 8x4K 16/32 (PERFORMANCE.md, the norm warps off the chains' path): sk pre-normed -5 to
# -10 %, engine level; sp a few % below sk in both (25 % fewer instructions in the sums); dr and dp
# -10 to -20 % in both if the chains wait on the TMA -> norms -> role path, else as sk / sp.
source lab/device_lib.sh
[ -d build/slim_f16b ] || tar xJf build/carry10/f16b.tar.xz -C build
for b in sk sp dr dp; do [ -d build/slim_$b ] || tar xJf build/carry12/$b.tar.xz -C build; done
R="8x4K:16/32,16x512:16/32,8x4K:8/16"
for b in sp sk dp dr f16b; do
  inst build/slim_$b $b
  step abl_$b 45 python3 lab/ab.py --tag $b --l2norm --pool --rows "$R" --reps 15; grep ^AB "$OUT/abl_$b.log" | tee -a "$OUT/ab.txt"
  step abn_$b 35 python3 lab/ab.py --tag $b --rows "$R" --reps 15; grep ^AB "$OUT/abn_$b.log" | tee -a "$OUT/ab.txt"
done
(cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log)
echo "total $((SECONDS - T0)) s"
