#!/usr/bin/env bash
# Scratch device run 5: ncu of the single plan at 8x4096 16/32, lf (main) against ff (folds by
# row/column factors): duration, instructions, stall reasons (why ff was slower).
source lab/device_lib.sh
M="gpu__time_duration.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__thread_inst_executed_per_inst_executed.ratio,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio"
for b in lf ff; do
  tar xJf build/carry5/$b.tar.xz -C build
  inst build/slim_$b $b
  step ncu_$b 60 ncu --clock-control none --profile-from-start off --metrics "$M" python3 tools/profile_one.py 8x4096 single 16/32
  grep -E "gpu__time|inst_executed.sum|issue_active|thread_inst" "$OUT/ncu_$b.log" | sed "s/^/$b /"
  grep -E "stalled_" "$OUT/ncu_$b.log" | awk '{print $NF, $1}' | sort -gr | head -8 | sed "s/^/$b /"
done
echo "total $((SECONDS - T0)) s"
