# lab/ncu.sh IMPL TAG: ncu of lab/one.py IMPL at 8x4096 16/32 (the second call only) -> $OUT/ncu_TAG.txt
S="SpeedOfLight|WarpStateStats|SchedulerStats|LaunchStats|Occupancy|MemoryWorkloadAnalysis"
M="gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio"
step ncu_$2 120 ncu --clock-control none --profile-from-start off --section "regex:^($S)\$" --metrics "$M" \
  python3 lab/one.py $1 8x4096 16/32
cp "$OUT/ncu_$2.log" "$OUT/ncu_$2.txt"
grep -E "^  [a-zA-Z_].*\(|Duration|dram__bytes|Issue Slots Busy|Issued Ipc Active|No Eligible|Warp Cycles Per Issued|Registers Per|Block Size|Grid Size" "$OUT/ncu_$2.txt" | head -40
grep -E "stalled_" "$OUT/ncu_$2.txt" | awk '{print $NF, $1}' | sort -gr | head -12
