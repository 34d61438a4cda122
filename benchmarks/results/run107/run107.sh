#!/usr/bin/env bash
# run 107: the overlap split at 5 % (GDN_OVERLAP_SPLIT_PCT; kernels = main b9e9060, build/aot): overlap GPU
# tests, a finer sweep 2/3/5/7 %, the README table with FLA 0.6.0 in the same process.
#   carry: build/aot build/run107.sh .whl
set -u
REPO=$PWD; FINAL=$OUT; export OUT=/tmp/r107; mkdir -p $OUT; export PYTHONUNBUFFERED=1; t0=$SECONDS
fin() { tar -C /tmp -czf $FINAL/run107.tgz r107; exit $1; }
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
GDN_PREFILL_PREBUILT=build/aot timeout -s KILL 90 python3 -m pip install -q --no-build-isolation --no-deps -e . >$OUT/build.log 2>&1 || { tail -20 $OUT/build.log; fin 1; }
timeout -s KILL 80 python3 -m pytest -m gpu tests/test_gpu_overlap.py tests/test_overlap_rule.py -q -p no:cacheprovider -x >$OUT/gpu.txt 2>&1; tail -1 $OUT/gpu.txt
timeout -s KILL 150 python3 benchmarks/bench_overlap.py --shapes 1x8K,1x16K,1x64K --pcts 2,3,5,7 --md $OUT/sweep.md --json $OUT/sweep.json 2>&1 | grep -E "split" | tee $OUT/sweep.txt | awk '{printf "%s ", $0} NR%5==0 {print ""}'
echo "$((SECONDS-t0)) s"
timeout -s KILL 150 python3 benchmarks/bench_prefill.py --heads 16/32 --modes graph --impls gdn:wgmma,fla --no-progress \
  --no-plot --no-host-overhead --out $OUT/table --tag prefill >$OUT/table.log 2>&1; echo "table rc=$?"
grep -E "^\| (1x|8x|32x|varlen)" $OUT/table/prefill.md | awk -F'|' '{printf "%s %s %s %s\n", $2, $5, $6, $8}'
echo "$((SECONDS-t0)) s"
fin 0
