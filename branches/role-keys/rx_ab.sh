#!/usr/bin/env bash
# A/B main (iso's objects, main 289cd10), rx (branch role-keys-x), f16b (main before the isolation fix), rx, main.
source lab/device_lib.sh
[ -d build/slim_f16b ] || tar xJf build/carry10/f16b.tar.xz -C build
for b in iso rx; do [ -d build/slim_$b ] || tar xJf build/carry13/$b.tar.xz -C build; done
R="8x4K:16/32,16x512:16/32,8x4K:8/16"
for b in iso rx f16b rx iso; do
  inst build/slim_$b $b
  step abl_$b 45 python3 lab/ab.py --tag $b --l2norm --pool --rows "$R" --reps 15; grep ^AB "$OUT/abl_$b.log" | tee -a "$OUT/ab.txt"
  step abn_$b 35 python3 lab/ab.py --tag $b --rows "$R" --reps 15; grep ^AB "$OUT/abn_$b.log" | tee -a "$OUT/ab.txt"
done
(cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log)
echo "total $((SECONDS - T0)) s"
