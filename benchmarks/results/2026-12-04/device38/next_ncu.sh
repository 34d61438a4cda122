#!/usr/bin/env bash
# Prepared in session 38: ncu of the single plan at 8x4096 16/32 in the engine setting (norms in the
# kernel), rk3 (main) then gp: duration, instructions, issue rate, stall reasons.
source lab/device_lib.sh
M="gpu__time_duration.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio"
for b in rk3 gp; do
  [ -d build/slim_$b ] || tar xJf build/carry7/$b.tar.xz -C build
  inst build/slim_$b $b
  step ncu_$b 60 ncu --clock-control none --profile-from-start off --metrics "$M" python3 tools/profile_one.py 8x4096 single 16/32 l2norm
  grep -E "gpu__time|inst_executed.sum|issue_active" "$OUT/ncu_$b.log" | sed "s/^/$b /"
  grep -E "stalled_" "$OUT/ncu_$b.log" | awk '{print $NF, $1}' | sort -gr | head -6 | sed "s/^/$b /"
done
echo "total $((SECONDS - T0)) s"
