#!/usr/bin/env bash
# Run 139 (session 25): the GPU suite owed at 247b7a4's launcher and test edits; the FLA layer's
# host cost by step (issue 35); ncu of the dual spine and the fused stage 1 at 8x4096, their issue
# slots and tensor pipe (issue 33's SM budget).
set -u
bash tools/h200.sh suite host
for k in "spine_rs rsdual" "recompute_wu wu"; do
  set -- $k
  timeout -s KILL 150 bash tools/ncu_kernel.sh "$1" "$2" 8x4096 >/dev/null 2>&1
  echo "== $2"; grep -E "^ +(Duration|Registers Per|Issue Slots Busy|Executed Ipc Active|Issued Warp|Achieved Occupancy|DRAM Throughput|Memory Throughput|Compute \(SM\) Throughput|Executed Instructions  )" "$OUT/ncu_${2}_details.txt"
  grep -iE "tensor|hmma|pipe" "$OUT/ncu_${2}_details.txt" | head -8
done
rm -f "$OUT"/*source.csv; (cd "$OUT" && tar czf all.tgz --exclude=all.tgz . && find . -type f ! -name all.tgz -delete)
