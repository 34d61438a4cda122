#!/usr/bin/env bash
# run 119: README table of main daa2cc1 (build/aot_tma: row norms by reduce-scatter, k/q tiles by TMA) with
# FLA 0.6.0 in the same process, pre-normed inputs (the README's setting) with the host-overhead rows;
# then the same table with in-kernel l2norm (--qk-l2norm: vLLM's setting).
#   carry: build/aot_tma build/run119.sh .whl
set -u
export PYTHONUNBUFFERED=1; t0=$SECONDS
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
GDN_PREFILL_PREBUILT=build/aot_tma timeout -s KILL 90 python3 -m pip install -q --no-build-isolation --no-deps -e . >/tmp/build.log 2>&1 || { tail -20 /tmp/build.log; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout -s KILL 200 python3 benchmarks/bench_prefill.py --heads 16/32 --modes graph --impls gdn:wgmma,fla --no-progress \
  --no-plot --out $OUT/table --tag prefill >$OUT/table.log 2>&1; echo "table rc=$?"
grep -E "^\| (1x|8x|32x|varlen)" $OUT/table/prefill.md | awk -F'|' '{printf "%s %s %s %s\n", $2, $5, $6, $8}'
grep -i -A8 "host" $OUT/table/prefill.md | head -12
echo "$((SECONDS-t0)) s"
timeout -s KILL 190 python3 benchmarks/bench_prefill.py --heads 16/32 --modes graph --impls gdn:wgmma,fla --qk-l2norm --no-progress \
  --no-plot --no-host-overhead --out $OUT/table_l2 --tag prefill >$OUT/table_l2.log 2>&1; echo "table_l2 rc=$?"
grep -E "^\| (1x|8x|32x|varlen)" $OUT/table_l2/prefill.md | awk -F'|' '{printf "%s %s %s %s\n", $2, $5, $6, $8}'
echo "$((SECONDS-t0)) s"
