#!/usr/bin/env bash
# Call 4 (~7 min), after call 3 while warm: ncu of the single plan's kernel (the verdict's build) and
# FlashInfer's at 8x4K 16/32 (pre-normed: the same work; ours also with l2norm), then the whole GPU
# suite on the verdict's build while time is left.
#   bash lab/next/s4_final.sh          Carry: nothing
N=$(dirname "$0")     # this folder, relative to the repo root
source $N/device_lib.sh
V=$(cat /tmp/gdn_verdict 2>/dev/null || echo new)
[ -d /tmp/w_$V ] || { echo "call 1's builds are gone (cold machine)"; exit 3; }
inw() { local b=$1; shift; (cd /tmp/w_$b && PYTHONPATH=/tmp/w_$b:$PYTHONPATH "$@"); }
left() { [ $((SECONDS - T0)) -lt $1 ]; }
prof() {   # name, then profile_one's arguments
  local n=$1; shift
  timeout -s KILL 150 ncu --profile-from-start off --clock-control none --set full --import-source no -f -o /tmp/$n \
    python3 tools/profile_one.py "$@" >$OUT/$n.log 2>&1; echo "ncu $n rc=$? at $((SECONDS - T0)) s"
  ncu -i /tmp/$n.ncu-rep --page details > $OUT/${n}_details.txt 2>&1
  ncu -i /tmp/$n.ncu-rep --page source --csv --print-source sass > /tmp/$n.csv 2>/dev/null &&
    python3 tools/ncu_hot.py /tmp/$n.csv --top 30 > $OUT/${n}_stalls.txt 2>&1
  grep -E "^  [a-z_]|Duration|Elapsed Cycles|DRAM Throughput|Memory Throughput|Issue Slots Busy|No Eligible|Registers Per" $OUT/${n}_details.txt | head -12
}
(cd /tmp/w_$V && export PYTHONPATH=/tmp/w_$V:$PYTHONPATH && prof ncu_single_pre 8x4096 single 16/32 &&
  prof ncu_single_l2 8x4096 single 16/32 l2norm)
if [ -f /tmp/peersite/.partA ]; then (cd /tmp/w_$V && peers && export PYTHONPATH=/tmp/w_$V:$PYTHONPATH && prof ncu_fi_pre 8x4096 flashinfer 16/32); fi
(cd $OUT && tar czf ncu_s4.tgz ncu_*.txt && rm -f ncu_*details.txt)
# the whole GPU suite on the verdict's build (~5 min on an H100)
left 250 && inw $V timeout -s KILL $((590 - (SECONDS - T0))) python3 -m pytest -m gpu tests -q -p no:cacheprovider -rfE \
  --durations=5 >$OUT/gpu_suite_$V.log 2>&1
echo "GPU suite $V: $(grep -E "passed|failed" $OUT/gpu_suite_$V.log | tail -1) at $((SECONDS - T0)) s"
(cd $OUT && tar czf logs_s4.tgz *.log && rm -f ncu_*.log)
echo "total $((SECONDS - T0)) s"
