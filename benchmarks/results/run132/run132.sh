#!/usr/bin/env bash
# run 132: release check of the split by slot (GDN_OVERLAP_SPLIT_SLOTS 2, from runs 130-131; kernels
# unchanged, build/aot_base = main's objects): GPU suite (FLA installed), the short shapes around
# GDN_OVERLAP_MIN_SLOTS swept at 2 and 4 slots, then the README table with FLA 0.6.0 in one process.
#   carry: build/aot_base build/run132.sh .whl
set -u
t0=$SECONDS
source tools/device_lib.sh
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
inst build/aot_base slots2
timeout -s KILL 170 python3 -m pytest -m gpu tests -q -p no:cacheprovider >"$OUT/gpu_suite.txt" 2>&1; tail -1 "$OUT/gpu_suite.txt"
grep -E "(FAILED|ERROR)" "$OUT/gpu_suite.txt" | head -5
echo "$((SECONDS-t0)) s"
timeout -s KILL 110 python3 benchmarks/bench_overlap.py --shapes 1x1K,1x1536,1x2K,1x4K,1x8K,1x16K --heads 16/32 \
  --slots 2,4 --md "$OUT/slots_short.md" >"$OUT/slots_short.log" 2>&1 || echo "sweep killed"
grep -E "split" "$OUT/slots_short.log" | tail -20
echo "$((SECONDS-t0)) s"
timeout -s KILL 220 python3 benchmarks/bench_prefill.py --heads 16/32 --modes graph --impls gdn:wgmma,fla --no-progress \
  --no-plot --out $OUT/table --tag prefill >$OUT/table.log 2>&1; echo "table rc=$?"
grep -E "^\| (1x|8x|32x|varlen)" $OUT/table/prefill.md | awk -F'|' '{printf "%s %s %s %s\n", $2, $5, $6, $8}'
grep -i -A8 "host" $OUT/table/prefill.md | head -12
echo "$((SECONDS-t0)) s"
