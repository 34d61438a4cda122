#!/usr/bin/env bash
# Call 1 (~8 min): main (build/slim_new) and x2 (main + the folds' exponents in base 2,
# build/delta_x2: gcum log2(e) in the gate ring, one FMUL a value fewer on the role's path, other bits)
# built from carried objects; part B of the FlashInfer bundle staged; the GPU suite files the previous run
# did not reach, on main; then x2 against main, two alternating passes of the single plan in both
# settings; x2's errors on the hard inputs (single plan).  Writes the verdict "new" for s3/s4.
#   bash lab/next/n1x.sh        Carry: build/slim_new build/delta_x2 .whl .peerB
N=$(dirname "$0")
source $N/device_lib.sh
R0=$PWD
END=${END:-380}      # seconds by which the timing and the hard-input check stop
(bash .peerB/install.sh > $OUT/peerB.log 2>&1; echo "peers B rc=$?" >> $OUT/peerB.log) &
rm -rf build/slim_x2; cp -r build/slim_new build/slim_x2; cp -r build/delta_x2/. build/slim_x2/
for b in new x2; do
  ( rm -rf /tmp/w_$b && mkdir -p /tmp/w_$b && cp -r $(ls -A | grep -v -x -e build -e .git -e .peerB) /tmp/w_$b/ && cd /tmp/w_$b &&
    GDN_PREFILL_PREBUILT=$R0/build/slim_$b timeout -s KILL 200 python3 setup.py build_ext --inplace -q >$OUT/build_$b.log 2>&1
    echo "build $b rc=$? at $((SECONDS - T0)) s" ) &
done; wait; tail -1 $OUT/peerB.log
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
echo new > /tmp/gdn_verdict
inw() { local b=$1; shift; (cd /tmp/w_$b && PYTHONPATH=/tmp/w_$b:$PYTHONPATH "$@"); }
LATE="tests/test_numerics_hard.py tests/test_observability.py tests/test_torch_op.py"
inw new timeout -s KILL 170 python3 -m pytest -m gpu $LATE -q -p no:cacheprovider -rfE --durations=5 >$OUT/suite_late.log 2>&1
echo "suite (late files, main) rc=$?: $(grep -E "passed|failed" $OUT/suite_late.log | tail -1) at $((SECONDS - T0)) s"
grep -E "^(FAILED|ERROR)" $OUT/suite_late.log | head
R="8x4K:16/32,16x512:16/32,8x4K:8/16"
for b in new x2 new x2; do
  [ $((SECONDS - T0)) -lt $((END - 60)) ] || break
  inw $b timeout -s KILL 60 python3 $N/ab.py --tag $b --both --rows "$R" --reps 15 >$OUT/ab_$b.log 2>&1
  grep ^AB $OUT/ab_$b.log >> $OUT/ab_x2.txt; echo "ab $b at $((SECONDS - T0)) s"
done
[ $((SECONDS - T0)) -lt $((END - 40)) ] && inw x2 timeout -s KILL $((END + 20 - (SECONDS - T0))) python3 -m pytest -m gpu tests/test_numerics_hard.py \
  -q -p no:cacheprovider -rfE -k single >$OUT/x2_hard.log 2>&1
echo "x2 hard (single) rc=$?: $(grep -E "passed|failed" $OUT/x2_hard.log | tail -1) at $((SECONDS - T0)) s"
cat $OUT/ab_x2.txt
(cd $OUT && tar czf logs_n1x.tgz *.log && rm -f *.log)
