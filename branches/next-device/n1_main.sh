#!/usr/bin/env bash
# Call 1 of the session after 47 (~9 min): main (kc and dz merged) built from its carried objects; the
# whole GPU suite on it (the last run ran out of time at 551 of 591, none failed); a soak of the single
# plan (8 x 1024 at 16/32, the plan the rule picks) while time is left; part B of the FlashInfer bundle
# staged for call 3.  Writes the verdict "new" that s3_tables.sh and s4_final.sh read.
#   bash lab/next/n1_main.sh        Carry: build/slim_new .whl .peerB  (build/slim_new = main's build/aot)
N=$(dirname "$0")
source $N/device_lib.sh
R0=$PWD
(bash .peerB/install.sh > $OUT/peerB.log 2>&1; echo "peers B rc=$?" >> $OUT/peerB.log) &
rm -rf /tmp/w_new && mkdir -p /tmp/w_new && cp -r $(ls -A | grep -v -x -e build -e .git -e .peerB) /tmp/w_new/ &&
  (cd /tmp/w_new && GDN_PREFILL_PREBUILT=$R0/build/slim_new timeout -s KILL 200 python3 setup.py build_ext --inplace -q \
   >$OUT/build_new.log 2>&1); echo "build new rc=$? at $((SECONDS - T0)) s"
wait; tail -1 $OUT/peerB.log
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
echo new > /tmp/gdn_verdict
inw() { local b=$1; shift; (cd /tmp/w_$b && PYTHONPATH=/tmp/w_$b:$PYTHONPATH "$@"); }
LATE="tests/test_numerics_hard.py tests/test_observability.py tests/test_torch_op.py"
inw new timeout -s KILL 200 python3 -m pytest -m gpu $LATE -q -p no:cacheprovider -rfE --durations=5 >$OUT/suite_late.log 2>&1
echo "suite (late files) rc=$?: $(grep -E "passed|failed" $OUT/suite_late.log | tail -1) at $((SECONDS - T0)) s"
grep -E "^(FAILED|ERROR)" $OUT/suite_late.log | head
inw new timeout -s KILL $((${END:-330} - (SECONDS - T0))) python3 -m pytest -m gpu tests $(for f in $LATE; do echo --ignore=$f; done) -q -p no:cacheprovider -rfE --durations=5 >$OUT/suite.log 2>&1
echo "suite (rest) rc=$?: $(grep -E "passed|failed" $OUT/suite.log | tail -1) at $((SECONDS - T0)) s"
grep -E "^(FAILED|ERROR)" $OUT/suite.log | head
[ -n "$SOAK" ] && [ $((SECONDS - T0)) -lt 500 ] && inw new timeout -s KILL $((585 - (SECONDS - T0))) python3 benchmarks/soak_streams.py --impls gdn \
  --shape 8x1024 --heads 16/32 --runs 3 --iters 100 --md $OUT/soak_single.md >$OUT/soak_single.log 2>&1
echo "soak: $(grep -c "'hangs': 0, 'errors': 0" $OUT/soak_single.log 2>/dev/null) clean rows at $((SECONDS - T0)) s"
(cd $OUT && tar czf logs_n1.tgz *.log && rm -f *.log)
