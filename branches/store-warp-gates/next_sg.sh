#!/usr/bin/env bash
# sg against main (ws) on the single plan, then sg's GPU checks; one device call (~8 min), after
# c943da8's branches/next-device/next_45.sh (whose device_lib.sh and ab.py it uses: copy them to lab/).
#   bash lab/next_sg.sh
# Carry: build/slim_new build/delta_sg .whl   (delta_sg: over slim_new, the patch's 16 fused objects)
# sg changes who waits for whom in the gate ring (three producer warps, six consumer warps), so its
# racecheck and synccheck cases and the concurrency soak matter as much as its time.
source lab/device_lib.sh
R0=$PWD
rm -rf build/slim_sg; cp -r build/slim_new build/slim_sg; cp -r build/delta_sg/. build/slim_sg/
for b in new sg; do
  ( rm -rf /tmp/w_$b && mkdir -p /tmp/w_$b && cp -r $(ls -A | grep -v -x -e build -e .git) /tmp/w_$b/ && cd /tmp/w_$b &&
    GDN_PREFILL_PREBUILT=$R0/build/slim_$b timeout -s KILL 200 python3 setup.py build_ext --inplace -q >$OUT/build_$b.log 2>&1
    echo "build $b rc=$? at $((SECONDS - T0)) s" ) &
done; wait
inw() { local b=$1; shift; (cd /tmp/w_$b && PYTHONPATH=/tmp/w_$b:$PYTHONPATH "$@"); }
R="8x4K:16/32,16x512:16/32,8x4K:8/16"
for b in new sg new sg; do
  inw $b timeout -s KILL 60 python3 lab/ab.py --tag $b --both --rows "$R" --reps 15 >$OUT/ab_$b.log 2>&1
  grep ^AB $OUT/ab_$b.log | tee -a $OUT/ab_sg.txt; echo "ab $b at $((SECONDS - T0)) s"
done
inw sg timeout -s KILL 200 python3 -m pytest -m gpu tests/test_numerics_hard.py tests/test_gpu_prefill.py tests/test_fused_plan.py \
  -q -p no:cacheprovider -rfE -k "hard or isolated or single or fused or low_precision or fp8 or deterministic" >$OUT/tests_sg.log 2>&1
echo "tests sg: $(grep -E "passed|failed" $OUT/tests_sg.log | tail -1) at $((SECONDS - T0)) s"; grep -E "^(FAILED|ERROR)" $OUT/tests_sg.log | head -5
inw sg timeout -s KILL 150 python3 -m pytest -m gpu tests/test_gpu_sanitizer.py tests/test_gpu_concurrency.py -q -p no:cacheprovider -rfE >$OUT/san_sg.log 2>&1
echo "sanitizer+concurrency sg: $(grep -E "passed|failed" $OUT/san_sg.log | tail -1) at $((SECONDS - T0)) s"; grep -E "^(FAILED|ERROR)" $OUT/san_sg.log | head -5
(cd $OUT && tar czf logs_sg.tgz *.log && rm -f *.log)
echo "total $((SECONDS - T0)) s"
