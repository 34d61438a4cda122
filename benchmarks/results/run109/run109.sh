#!/usr/bin/env bash
# run 109: stage 1 ranks the sequences longest first into the workspace's `order` and the fused spine
# follows it (objects build/aot_or) against main b9e9060 + split 5 % (build/aot), same tree.
# Outputs go straight to $OUT (few files) so a run cut short by the device budget keeps them.
#   carry: build/aot build/aot_or build/run109.sh
set -u
export PYTHONUNBUFFERED=1; t0=$SECONDS
inst() { GDN_PREFILL_PREBUILT=$1 timeout -s KILL 90 python3 -m pip install -q --no-build-isolation --no-deps -e . >/tmp/build_$2.log 2>&1 || { tail -20 /tmp/build_$2.log; exit 1; }; }
inst build/aot_or or
timeout -s KILL 90 python3 -m pytest -m gpu tests/test_gpu_prefill.py -k "order or bit_for_bit" -q -p no:cacheprovider -x >$OUT/tests_order.txt 2>&1; tail -1 $OUT/tests_order.txt
grep -E "^(FAILED|ERROR)" $OUT/tests_order.txt | head -5
echo "$((SECONDS-t0)) s"
timeout -s KILL 70 python3 benchmarks/bench_spine.py --rs-skew >$OUT/skew_or.txt 2>&1; grep -E "^\| [0-9m]" $OUT/skew_or.txt
echo "$((SECONDS-t0)) s"
inst build/aot main
timeout -s KILL 70 python3 benchmarks/bench_spine.py --rs-skew >$OUT/skew_main.txt 2>&1; grep -E "^\| [0-9m]" $OUT/skew_main.txt
echo "$((SECONDS-t0)) s"
inst build/aot_or or2
timeout -s KILL 100 python3 -m pytest -m gpu tests -q -p no:cacheprovider -x >$OUT/gpu_full.txt 2>&1; tail -1 $OUT/gpu_full.txt
grep -E "^(FAILED|ERROR)" $OUT/gpu_full.txt | head -5
echo "$((SECONDS-t0)) s"
