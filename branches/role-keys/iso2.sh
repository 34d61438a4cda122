#!/usr/bin/env bash
# Session 42, call 2 of 3 (any branch checked out; lab/ab.py forces the single plan): A/B main
# (f16b), rc, ek, dk, de (iso's cost shows in rc's), engine style (l2norm, pool) and pre-normed;
# ORDER=rev for the second pass.
# Predicted at 8x4K 16/32: iso level with main (two selects a row); rc pre-normed -10 to -17 %
# (the fp16 draft without any key sums took 413 us against 507-518), engine level; dk pre-normed
# as rc or better, engine -5 to -15 % if the chains wait on the TMA -> norms -> role path; ek
# pre-normed as rc, engine -3 to -8 % (half the norm warps' sums before the gate commit); de
# the better of dk and ek in each setting, or both gains.
source lab/device_lib.sh
[ -d build/slim_f16b ] || tar xJf build/carry10/f16b.tar.xz -C build
for b in iso rc dk ek de; do [ -d build/slim_$b ] || tar xJf build/carry13/$b.tar.xz -C build; done
B="f16b rc ek dk de"; [ "${ORDER:-}" = rev ] && B="de dk ek rc f16b"
R="8x4K:16/32,16x512:16/32,8x4K:8/16"
for b in $B; do
  inst build/slim_$b $b
  step abl_$b 45 python3 lab/ab.py --tag $b --l2norm --pool --rows "$R" --reps 15; grep ^AB "$OUT/abl_$b.log" | tee -a "$OUT/ab.txt"
  step abn_$b 35 python3 lab/ab.py --tag $b --rows "$R" --reps 15; grep ^AB "$OUT/abn_$b.log" | tee -a "$OUT/ab.txt"
done
(cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log)
echo "total $((SECONDS - T0)) s"
