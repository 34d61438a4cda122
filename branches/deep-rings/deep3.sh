#!/usr/bin/env bash
# Issue 53 candidates (41st session), call 3 of 3: where the single plan's warps stall, main (f16b)
# against dp, 8x4096 16/32 pre-normed (ncu source page; read back here with
#   python tools/ncu_hot.py src_<b>.csv --cubin build/aot_<b>/cubin/fused_prefill_betabf16_kv/*.cubin
# the full cubins are in this machine's build/aot_f16b, build/aot_dp).  The question it answers:
# do main's chains wait on VT_FULL / KQ_FULL (the inputs: the latency hypothesis, dr's and dp's premise) or
# issue at their own pace (then the norm warps cost by contention, sk's premise)?
source lab/device_lib.sh
[ -d build/slim_f16b ] || tar xJf build/carry10/f16b.tar.xz -C build
[ -d build/slim_dp ] || tar xJf build/carry12/dp.tar.xz -C build
for b in f16b dp; do
  inst build/slim_$b $b
  step ncu_$b 200 ncu --clock-control none --set full --import-source no --profile-from-start off -k regex:fused -c 1 \
    -f -o /tmp/rep_$b python3 tools/profile_one.py 8x4096 single 16/32
  tail -3 "$OUT/ncu_$b.log"
  timeout -s KILL 60 ncu -i /tmp/rep_$b.ncu-rep --page source --csv --print-source sass > "$OUT/src_$b.csv" 2>/dev/null
  timeout -s KILL 60 ncu -i /tmp/rep_$b.ncu-rep --page details --csv > "$OUT/det_$b.csv" 2>/dev/null
  grep -E '"Duration"|"Warp Cycles Per Issued Instruction"|"Issue Slots Busy"' "$OUT/det_$b.csv" | head -4
done
ls -la "$OUT"
echo "total $((SECONDS - T0)) s"
