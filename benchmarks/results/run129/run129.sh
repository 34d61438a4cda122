#!/usr/bin/env bash
# run 129: release check of the final build (build/aot_final: run 127's spine schedule, stage 1's second
# part at three CTAs per SM, the overlap split at 10 %): GPU suite (FLA installed), the one-sequence rows
# against run 127's build at the old rule (build/aot_sched, split 15 %, two CTAs per SM: the header edited
# for that install only), then the README table with FLA 0.6.0 in the same process.
#   carry: build/aot_final build/aot_sched build/run129.sh .whl
set -u
t0=$SECONDS
source tools/device_lib.sh
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export SHAPES=1x4K,1x8K,1x16K,1x64K
inst build/aot_final final
timeout -s KILL 200 python3 -m pytest -m gpu tests -q -p no:cacheprovider >"$OUT/gpu_suite.txt" 2>&1; tail -1 "$OUT/gpu_suite.txt"
grep -E "(FAILED|ERROR)" "$OUT/gpu_suite.txt" | head -5
pre final_a
sed -i 's/^#define GDN_OVERLAP_SPLIT_PCT 10$/#define GDN_OVERLAP_SPLIT_PCT 15/' include/gdn/gdn_abi.h
inst build/aot_sched sched15; pre sched15_a
sed -i 's/^#define GDN_OVERLAP_SPLIT_PCT 15$/#define GDN_OVERLAP_SPLIT_PCT 10/' include/gdn/gdn_abi.h
inst build/aot_final final; pre final_b
echo "$((SECONDS-t0)) s"
timeout -s KILL 210 python3 benchmarks/bench_prefill.py --heads 16/32 --modes graph --impls gdn:wgmma,fla --no-progress \
  --no-plot --out $OUT/table --tag prefill >$OUT/table.log 2>&1; echo "table rc=$?"
grep -E "^\| (1x|8x|32x|varlen)" $OUT/table/prefill.md | awk -F'|' '{printf "%s %s %s %s\n", $2, $5, $6, $8}'
grep -i -A8 "host" $OUT/table/prefill.md | head -12
echo "$((SECONDS-t0)) s"
