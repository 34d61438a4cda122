#!/usr/bin/env bash
# run 114: release check of this session's build (stage 1's TF32 split by mask, its head divisions by
# precomputed divisors, the overlap plan's second part at two CTAs per SM with a 25 % split; build/aot):
# the whole GPU suite, then the README table with FLA 0.6.0 in the same process.
#   carry: build/aot build/run114.sh .whl
set -u
export PYTHONUNBUFFERED=1; t0=$SECONDS
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
GDN_PREFILL_PREBUILT=build/aot timeout -s KILL 90 python3 -m pip install -q --no-build-isolation --no-deps -e . >/tmp/build.log 2>&1 || { tail -20 /tmp/build.log; exit 1; }
timeout -s KILL 150 python3 -m pytest -m gpu tests -q -p no:cacheprovider >$OUT/gpu_suite.txt 2>&1; tail -1 $OUT/gpu_suite.txt
grep -E "^(FAILED|ERROR)" $OUT/gpu_suite.txt | head -5
echo "$((SECONDS-t0)) s"
timeout -s KILL 170 python3 benchmarks/bench_prefill.py --heads 16/32 --modes graph --impls gdn:wgmma,fla --no-progress \
  --no-plot --no-host-overhead --out $OUT/table --tag prefill >$OUT/table.log 2>&1; echo "table rc=$?"
grep -E "^\| (1x|8x|32x|varlen)" $OUT/table/prefill.md | awk -F'|' '{printf "%s %s %s %s\n", $2, $5, $6, $8}'
echo "$((SECONDS-t0)) s"
