#!/usr/bin/env bash
# run 133: the README table at GDN_OVERLAP_SPLIT_SLOTS 4 (run 132's short-shape sweep), with FLA in one process
set -u
t0=$SECONDS
source tools/device_lib.sh
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
inst build/aot_base slots4
timeout -s KILL 60 python3 -m pytest -m gpu tests/test_gpu_overlap.py -q -p no:cacheprovider >"$OUT/gpu_overlap.txt" 2>&1; tail -1 "$OUT/gpu_overlap.txt"
timeout -s KILL 200 python3 benchmarks/bench_prefill.py --heads 16/32 --modes graph --impls gdn:wgmma,fla --no-progress \
  --no-plot --out $OUT/table --tag prefill >$OUT/table.log 2>&1; echo "table rc=$?"
grep -E "^\| (1x|8x|32x|varlen)" $OUT/table/prefill.md | awk -F'|' '{printf "%s %s %s %s\n", $2, $5, $6, $8}'
grep -i -A6 "host" $OUT/table/prefill.md | head -8
echo "$((SECONDS-t0)) s"
