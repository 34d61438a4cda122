#!/usr/bin/env bash
# Session 41's candidates for issue 53, call 2 of 2: A/B alternated, engine style (l2norm, pool)
# and pre-normed.  Predicted (deep-rings' commit message): sk pre-normed -5 to -10 %, engine
# level; dr both settings toward the check-free draft's 413 us at 8x4K 16/32 (main 507-518
# pre-normed, 510-513 engine), i.e. -10 to -20 %, if the TMA -> norms -> role path is what the
# chains wait on; level if it is not.
source lab/device_lib.sh
for b in f16b; do [ -d build/slim_$b ] || tar xJf build/carry10/$b.tar.xz -C build; done
for b in sk dr; do [ -d build/slim_$b ] || tar xJf build/carry12/$b.tar.xz -C build; done
R="8x4K:16/32,16x512:16/32,8x4K:8/16"
for b in f16b sk dr f16b sk dr; do
  inst build/slim_$b $b
  step abl_$b 45 python3 lab/ab.py --tag $b --l2norm --pool --rows "$R" --reps 15; grep ^AB "$OUT/abl_$b.log" | tee -a "$OUT/ab.txt"
  step abn_$b 35 python3 lab/ab.py --tag $b --rows "$R" --reps 15; grep ^AB "$OUT/abn_$b.log" | tee -a "$OUT/ab.txt"
done
(cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log)
echo "total $((SECONDS - T0)) s"
