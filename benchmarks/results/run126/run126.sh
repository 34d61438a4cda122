#!/usr/bin/env bash
# run 126: release check of main with stage 1's hand-unrolled inverse k-steps (build/aot_final, objects
# byte-identical to run 125's aot_unroll): GPU suite, then the README table (FLA 0.6.0 in the same
# process, graph) in both settings.
#   carry: build/aot_final build/run126.sh .whl
set -u
export PYTHONUNBUFFERED=1; t0=$SECONDS
OUT=${OUT:-/tmp/gdn_out}; mkdir -p $OUT
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
GDN_PREFILL_PREBUILT=build/aot_final timeout -s KILL 90 python3 -m pip install -q --no-build-isolation --no-deps -e . >/tmp/build.log 2>&1 || { tail -20 /tmp/build.log; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout -s KILL 200 python3 -m pytest -m gpu tests -q -p no:cacheprovider >$OUT/gpu_suite.txt 2>&1; tail -1 $OUT/gpu_suite.txt
grep -E "(FAILED|ERROR)" $OUT/gpu_suite.txt | head -5
echo "$((SECONDS-t0)) s"
timeout -s KILL 200 python3 benchmarks/bench_prefill.py --heads 16/32 --modes graph --impls gdn:wgmma,fla --no-progress \
  --no-plot --out $OUT/table --tag prefill >$OUT/table.log 2>&1; echo "table rc=$?"
grep -E "^\| (1x|8x|32x|varlen)" $OUT/table/prefill.md | awk -F'|' '{printf "%s %s %s %s\n", $2, $5, $6, $8}'
grep -i -A8 "host" $OUT/table/prefill.md | head -12
echo "$((SECONDS-t0)) s"
timeout -s KILL 190 python3 benchmarks/bench_prefill.py --heads 16/32 --modes graph --impls gdn:wgmma,fla --qk-l2norm --no-progress \
  --no-plot --no-host-overhead --out $OUT/table_l2 --tag prefill >$OUT/table_l2.log 2>&1; echo "table_l2 rc=$?"
grep -E "^\| (1x|8x|32x|varlen)" $OUT/table_l2/prefill.md | awk -F'|' '{printf "%s %s %s %s\n", $2, $5, $6, $8}'
echo "$((SECONDS-t0)) s"
