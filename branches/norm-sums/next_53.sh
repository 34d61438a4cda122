#!/usr/bin/env bash
# Next device session, issue 53 (role-keys-p = rp, wide-sums = ws) and issue 54 (srw), one call:
#   bash lab/next_53.sh            A/B + bits, then the GPU tests on rp and ws (about 8 min)
# Carry: build/slim_main build/slim_rp build/slim_ws build/slim_srw .whl
# Each build links in its own copy of the tree (/tmp/w_<b>), four at once.
source lab/device_lib.sh
R0=$PWD
BUILDS=${BUILDS:-main rp ws srw}
for b in $BUILDS; do
  ( rm -rf /tmp/w_$b && mkdir -p /tmp/w_$b && cp -r $(ls -A | grep -v '^build$') /tmp/w_$b/ && cd /tmp/w_$b &&
    GDN_PREFILL_PREBUILT=$R0/build/slim_$b timeout -s KILL 200 python3 setup.py build_ext --inplace -q >$OUT/build_$b.log 2>&1
    echo "build $b rc=$? at $((SECONDS - T0)) s" ) &
done; wait
inw() { local b=$1; shift; (cd /tmp/w_$b && PYTHONPATH=/tmp/w_$b:$PYTHONPATH "$@"); }
R="8x4K:16/32,16x512:16/32,8x4K:8/16,4x2K:16/32"
ab() { inw $1 timeout -s KILL 70 python3 lab/ab.py --tag $1 --both --rows "$R" --reps 15 >$OUT/ab_$1_$2.log 2>&1
       grep ^AB $OUT/ab_$1_$2.log | tee -a $OUT/ab.txt; echo "ab $1 at $((SECONDS - T0)) s"; }
ab main 1; ab rp 1; ab ws 1; ab main 2; ab ws 2; ab rp 2
# issue 54: spine_rs's table warp waits through the ring object (srw) against main, the two-launch plan
RS="1x8K:16/32,8x4K:16/32,16x512:16/32,1x8K:4/8,16x512:4/8,8x4K:2/4"
for b in main srw main srw; do
  inw $b timeout -s KILL 60 python3 lab/ab.py --tag $b --two --rows "$RS" --reps 15 >$OUT/abs_$b.log 2>&1
  grep ^AB $OUT/abs_$b.log | tee -a $OUT/ab_srw.txt
done
echo "ab done at $((SECONDS - T0)) s"
for b in main rp ws; do inw $b timeout -s KILL 40 python3 tools/bitwise_outputs.py --runs prefill --save /tmp/bits_$b.pt >$OUT/bits_$b.log 2>&1; done
for b in rp ws; do echo "== main vs $b"; inw $b python3 tools/bitwise_outputs.py --compare /tmp/bits_main.pt /tmp/bits_$b.pt 2>&1 | tail -12; done | tee $OUT/bits.txt
for b in ${TESTS:-rp ws}; do
  inw $b timeout -s KILL 150 python3 -m pytest -m gpu tests/test_numerics_hard.py tests/test_gpu_prefill.py tests/test_fused_plan.py \
    -q -p no:cacheprovider -rfE -k "hard or isolated or single or fused or low_precision or fp8 or deterministic" >$OUT/tests_$b.log 2>&1
  echo "tests $b: $(grep -E "passed|failed" $OUT/tests_$b.log | tail -1) at $((SECONDS - T0)) s"; grep -E "^(FAILED|ERROR)" $OUT/tests_$b.log | head -5
done
inw srw timeout -s KILL 90 python3 -m pytest -m gpu tests/test_gpu_prefill.py -q -p no:cacheprovider -rfE -k "spine or pair or dual or segment" >$OUT/tests_srw.log 2>&1
echo "tests srw: $(grep -E "passed|failed" $OUT/tests_srw.log | tail -1) at $((SECONDS - T0)) s"
(cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log)
echo "total $((SECONDS - T0)) s"
