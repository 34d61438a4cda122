#!/usr/bin/env bash
# Call 4 (~8 min), after call 3 while warm: ncu of the single plan's kernel and FlashInfer's at 8x4K
# 16/32 (pre-normed: the same work; ours also with l2norm); issue 54's srw A/B and spine tests; the
# kernel of ln (if its bits equal main's) under racecheck and synccheck; the verdict build's full sanitizer
# test and concurrency cases while time is left (sg's kernel had its
# sanitizer runs and the concurrency cases in call 1).
#   bash lab/next/s4_ncu.sh          Carry: nothing
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
RS="1x8K:16/32,8x4K:16/32,1x8K:4/8,16x512:4/8"
for b in new srw2 new srw2; do      # srw2 = main + srw's spine_rs objects: the two-launch column is the A/B
  left 300 || break
  inw $b timeout -s KILL 45 python3 $N/ab.py --tag $b --two --rows "$RS" --reps 15 >$OUT/abs_$b.log 2>&1; grep ^AB $OUT/abs_$b.log >> $OUT/ab_srw.txt
  echo "abs $b at $((SECONDS - T0)) s"
done
left 360 && inw srw2 timeout -s KILL 55 python3 -m pytest -m gpu tests/test_gpu_prefill.py -q -p no:cacheprovider -rfE -k "spine or pair or dual or segment" -x >$OUT/tests_srw.log 2>&1
echo "tests srw: $(grep -E "passed|failed" $OUT/tests_srw.log | tail -1)"
# ln (call 1's bits equal main's): its kernel under racecheck and synccheck (the fp16 A now by stmatrix)
if [ -f /tmp/gdn_ln_ok ]; then
  for tool in racecheck synccheck; do
    left 420 || break
    inw ln timeout -s KILL 90 compute-sanitizer --tool $tool --error-exitcode 3 python3 $N/san_fused.py >$OUT/san_ln_$tool.log 2>&1
    echo "sanitizer $tool ln: rc=$? $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" $OUT/san_ln_$tool.log | tail -1) at $((SECONDS - T0)) s"
  done
fi
# the full sanitizer test and the concurrency cases on the verdict's build (main's ws was merged
# without them; sg had its kernel's sanitizer runs and the concurrency cases in call 1)
left 400 && inw $V timeout -s KILL $((590 - (SECONDS - T0))) python3 -m pytest -m gpu tests/test_gpu_sanitizer.py tests/test_gpu_concurrency.py -q -p no:cacheprovider -rfE >$OUT/san_$V.log 2>&1
echo "sanitizer+concurrency $V: $(grep -E "passed|failed" $OUT/san_$V.log | tail -1) at $((SECONDS - T0)) s"
awk '{print $2, $5, $6, $8, $12, $14}' $OUT/ab_srw.txt 2>/dev/null
(cd $OUT && tar czf logs_s4.tgz *.log && rm -f *.log)
echo "total $((SECONDS - T0)) s"
