#!/usr/bin/env bash
# The next device session's first call (~7 min): main 5308576 (ws) verified and issue 54's last A/B.
#   bash branches/next-device/next_45.sh
# Carry: build/slim_new build/delta_old build/delta_srw2 .whl
#   slim_new   = main 5308576's 89 objects (cubins of the fused builds only)
#   delta_old  = over slim_new, 4c92887's fused objects (the build before ws)
#   delta_srw2 = over slim_new, spine-rs-table-wait.patch's spine_rs objects
# In order, each step only while time is left; results land in $OUT as they come:
#   1. main's sanitizer (memcheck, racecheck, synccheck) and concurrency cases (ws's new
#      bar.red.and and its norm loop were not yet under them);
#   2. srw against main on the two-launch plan, alternating twice; spine_rs's GPU tests on srw;
#   3. main against 4c92887 on the target rows not yet measured (both settings), alternating twice.
source branches/next-device/device_lib.sh
R0=$PWD
for b in old srw2; do rm -rf build/slim_$b; cp -r build/slim_new build/slim_$b; cp -r build/delta_$b/. build/slim_$b/; done
for b in new old srw2; do
  ( rm -rf /tmp/w_$b && mkdir -p /tmp/w_$b && cp -r $(ls -A | grep -v -x -e build -e .git) /tmp/w_$b/ && cd /tmp/w_$b &&
    GDN_PREFILL_PREBUILT=$R0/build/slim_$b timeout -s KILL 200 python3 setup.py build_ext --inplace -q >$OUT/build_$b.log 2>&1
    echo "build $b rc=$? at $((SECONDS - T0)) s" ) &
done; wait
inw() { local b=$1; shift; (cd /tmp/w_$b && PYTHONPATH=/tmp/w_$b:$PYTHONPATH "$@"); }
left() { [ $((SECONDS - T0)) -lt $1 ]; }
inw new timeout -s KILL 200 python3 -m pytest -m gpu tests/test_gpu_sanitizer.py tests/test_gpu_concurrency.py -q -p no:cacheprovider -rfE >$OUT/san_new.log 2>&1
echo "sanitizer+concurrency main: $(grep -E "passed|failed" $OUT/san_new.log | tail -1) at $((SECONDS - T0)) s" | tee $OUT/summary.txt
grep -E "^(FAILED|ERROR)" $OUT/san_new.log | head -5
RS="1x8K:16/32,8x4K:16/32,1x8K:4/8,16x512:4/8"
for b in new srw2 new srw2; do
  left 260 || break
  inw $b timeout -s KILL 45 python3 branches/next-device/ab.py --tag $b --two --rows "$RS" --reps 15 >$OUT/abs_$b.log 2>&1; grep ^AB $OUT/abs_$b.log >> $OUT/ab_srw.txt
  echo "abs $b at $((SECONDS - T0)) s"
done
left 330 && inw srw2 timeout -s KILL 90 python3 -m pytest -m gpu tests/test_gpu_prefill.py -q -p no:cacheprovider -rfE -k "spine or pair or dual or segment" >$OUT/tests_srw.log 2>&1
echo "tests srw: $(grep -E "passed|failed" $OUT/tests_srw.log | tail -1) at $((SECONDS - T0)) s" | tee -a $OUT/summary.txt
R="32x2K:16/32,4x2K:16/32,2048+2048+2048+1500+700+100:16/32,16x512:8/16,16x512:4/8"
for b in old new old new; do
  left 420 || break
  inw $b timeout -s KILL 45 python3 branches/next-device/ab.py --tag $b --both --rows "$R" --reps 10 >$OUT/abm_$b.log 2>&1; grep ^AB $OUT/abm_$b.log >> $OUT/ab_more.txt
  echo "ab $b at $((SECONDS - T0)) s"
done
awk '{print $2, $5, $6, $8, $12, $14}' $OUT/ab_srw.txt
awk '{print $2, $3, $5, $6, $8}' $OUT/ab_more.txt
(cd $OUT && tar czf logs.tgz *.log && rm -f *.log)
echo "total $((SECONDS - T0)) s"
