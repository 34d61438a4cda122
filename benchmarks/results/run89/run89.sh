#!/usr/bin/env bash
# run 89: branch fused-workspace (each plan carves only its own workspace).  Its whole GPU suite,
# then the prefill (graph, gdn only) to check nothing moved.
set -u
REPO=$PWD; FINAL=$OUT; export OUT=/tmp/r89; mkdir -p $OUT; export PYTHONUNBUFFERED=1; t0=$SECONDS
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site
mkdir -p /tmp/wt_fw && tar -xzf build/src_fw.tgz -C /tmp/wt_fw && cd /tmp/wt_fw
GDN_PREFILL_PREBUILT=$REPO/build/aot_fw python3 -m pip install -q --no-build-isolation --no-deps -e . >$OUT/build.log 2>&1 || { tail -20 $OUT/build.log; exit 1; }
timeout 150 python3 -m pytest -m gpu tests -q -p no:cacheprovider --timeout 90 >$OUT/gpu_suite.txt 2>&1; tail -3 $OUT/gpu_suite.txt
echo "suite $((SECONDS-t0)) s"
timeout 80 python3 benchmarks/bench_prefill.py --shapes 1x1K,1x8K,8x4K,32x2K,varlen16,1x64K --heads 16/32 \
    --modes graph --rep-budget-s 0.2 --max-reps 50 --no-progress --no-plot --no-host-overhead \
    --impls gdn:wgmma --out "$OUT/fw" --tag prefill >"$OUT/fw.log" 2>&1
grep -E "^\| (1x|8x|32x|varlen)" "$OUT/fw/prefill.md" | awk -F'|' '{printf "%s %s\n", $2, $6}'
echo "$((SECONDS-t0)) s"
tar -C /tmp -czf $FINAL/run89.tgz r89
