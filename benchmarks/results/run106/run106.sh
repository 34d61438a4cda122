#!/usr/bin/env bash
# run 106: the overlap split on main b9e9060 (build/aot): bench_overlap 5/10/15/20 % twice (the second
# pass in reverse shape order), then overlap_parts at 10 % for 1x8K and 1x64K.
#   carry: build/aot build/run106.sh
set -u
REPO=$PWD; FINAL=$OUT; export OUT=/tmp/r106; mkdir -p $OUT; export PYTHONUNBUFFERED=1; t0=$SECONDS
fin() { tar -C /tmp -czf $FINAL/run106.tgz r106; exit $1; }
GDN_PREFILL_PREBUILT=build/aot timeout -s KILL 90 python3 -m pip install -q --no-build-isolation --no-deps -e . >$OUT/build.log 2>&1 || { tail -20 $OUT/build.log; fin 1; }
timeout -s KILL 200 python3 benchmarks/bench_overlap.py --shapes 1x4K,1x8K,1x16K,1x32K,1x64K --pcts 5,10,15,20 --md $OUT/sweep1.md --json $OUT/sweep1.json 2>&1 | grep -E "split" | tee $OUT/sweep1.txt | awk '{printf "%s ", $0} NR%5==0 {print ""}'
echo "$((SECONDS-t0)) s"
timeout -s KILL 200 python3 benchmarks/bench_overlap.py --shapes 1x64K,1x32K,1x16K,1x8K,1x4K --pcts 20,15,10,5 --md $OUT/sweep2.md --json $OUT/sweep2.json 2>&1 | grep -E "split" | tee $OUT/sweep2.txt | awk '{printf "%s ", $0} NR%5==0 {print ""}'
echo "$((SECONDS-t0)) s"
for s in 1x8192 1x65536; do timeout -s KILL 50 python3 tools/overlap_parts.py $s --reps 40 --pct 10 >$OUT/parts10_$s.txt 2>&1; grep -E "==|median|half" $OUT/parts10_$s.txt; done
echo "$((SECONDS-t0)) s"
fin 0
