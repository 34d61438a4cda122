#!/usr/bin/env bash
# run 113: the overlap plan on the faster stage 1: split swept with the second part at two CTAs per SM
# beside the spine (build/aot_o2) and at three (build/aot_new), one-sequence rows.
#   carry: build/aot_new build/aot_o2 build/run113.sh
set -u
export PYTHONUNBUFFERED=1; t0=$SECONDS
inst() { GDN_PREFILL_PREBUILT=$1 timeout -s KILL 90 python3 -m pip install -q --no-build-isolation --no-deps -e . >/tmp/build_$2.log 2>&1 || { tail -20 /tmp/build_$2.log; exit 1; }; }
inst build/aot_o2 o2
timeout -s KILL 150 python3 benchmarks/bench_overlap.py --shapes 1x8K,1x16K,1x64K --pcts 5,15,25,35 > $OUT/split_o2.txt 2>&1; grep -E " split " $OUT/split_o2.txt
echo "$((SECONDS-t0)) s"
inst build/aot_new new
timeout -s KILL 100 python3 benchmarks/bench_overlap.py --shapes 1x8K,1x16K,1x64K --pcts 5,35 > $OUT/split_new.txt 2>&1; grep -E " split " $OUT/split_new.txt
echo "$((SECONDS-t0)) s"
