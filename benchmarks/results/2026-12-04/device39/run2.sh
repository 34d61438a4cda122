#!/usr/bin/env bash
# Session 39 device run 2: the A/B round reversed (ffp gp rk3), then ncu engine setting rk3 vs gp
# (why gp is 23 % slower with norms in the kernel).
source lab/device_lib.sh
for b in rk3 gp ffp; do [ -d build/slim_$b ] || tar xJf build/carry7/$b.tar.xz -C build; done
R="8x4K:16/32,4x2K:16/32,16x512:16/32,8x4K:8/16"
for b in ffp gp rk3; do
  inst build/slim_$b $b
  step abl_$b 40 python3 lab/ab.py --tag $b --l2norm --rows "$R" --reps 15; grep ^AB "$OUT/abl_$b.log" | tee -a "$OUT/ab.txt"
  step abn_$b 40 python3 lab/ab.py --tag $b --rows "$R" --reps 15; grep ^AB "$OUT/abn_$b.log" | tee -a "$OUT/ab.txt"
done
M="gpu__time_duration.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio"
for b in rk3 gp; do
  inst build/slim_$b $b
  step ncu_$b 60 ncu --clock-control none --profile-from-start off --metrics "$M" python3 tools/profile_one.py 8x4096 single 16/32 l2norm
  grep -E "gpu__time|inst_executed.sum|issue_active" "$OUT/ncu_$b.log" | sed "s/^/$b /"
  grep -E "stalled_" "$OUT/ncu_$b.log" | awk '{print $NF, $1}' | sort -gr | head -7 | sed "s/^/$b /"
done
(cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log)
echo "total $((SECONDS - T0)) s"
