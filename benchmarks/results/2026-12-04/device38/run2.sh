#!/usr/bin/env bash
# Scratch device run 2 (FlashInfer part 2 staged): lf against rk, two more alternations.
source lab/device_lib.sh
bash .peer2/stage.sh
for b in lf rk; do tar xJf build/carry/$b.tar.xz -C build; done
source lab/rows.sh
for b in rk lf rk lf; do
  inst build/slim_$b $b
  step ab_$b 70 python3 lab/ab.py --tag $b --l2norm --rows "$R" --reps 15; grep ^AB "$OUT/ab_$b.log" | tee -a "$OUT/ab.txt"
done
echo "total $((SECONDS - T0)) s"
