#!/usr/bin/env bash
# run 120: the overlap split re-swept on main daa2cc1 (stage 1 ~2 % cheaper per CTA since run 113): the
# second part at two CTAs per SM beside the spine (build/aot_tma = main) and at three (build/aot_o3).
#   carry: build/aot_tma build/aot_o3 build/run120.sh
set -u
export PYTHONUNBUFFERED=1; t0=$SECONDS
inst() { GDN_PREFILL_PREBUILT=$1 timeout -s KILL 90 python3 -m pip install -q --no-build-isolation --no-deps -e . >/tmp/build_$2.log 2>&1 || { tail -20 /tmp/build_$2.log; exit 1; }; }
inst build/aot_tma o2
timeout -s KILL 150 python3 benchmarks/bench_overlap.py --shapes 1x8K,1x16K,1x64K --pcts 15,20,25,30 > $OUT/split_o2.txt 2>&1; grep -E " split " $OUT/split_o2.txt
echo "$((SECONDS-t0)) s"
inst build/aot_o3 o3
timeout -s KILL 150 python3 benchmarks/bench_overlap.py --shapes 1x8K,1x16K,1x64K --pcts 10,15,20,25 > $OUT/split_o3.txt 2>&1; grep -E " split " $OUT/split_o3.txt
echo "$((SECONDS-t0)) s"
