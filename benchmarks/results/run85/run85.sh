#!/usr/bin/env bash
# run 85: branch wu-tform-probe (timing only, wrong results): stage 1 ending at Tu (no V load, no
# W / U products; Tu stored as P is) and the fused spine's chain with the T-form's extra MMA
# (Y^T = V^T - a Z in bf16, then Y^T Tu^T before G2).  ncu per kernel, the spine alone (B=1 / 8,
# T=1K/4K) on probe and main, the whole prefill on the probe.
set -u
FINAL=$OUT; export OUT=/tmp/r85; mkdir -p $OUT; export PYTHONUNBUFFERED=1; t0=$SECONDS
inst() { GDN_PREFILL_PREBUILT=build/$1 python3 -m pip install -q --no-build-isolation --no-deps -e . >$OUT/build_$1.log 2>&1 || { tail -20 $OUT/build_$1.log; exit 1; }; }
inst aot_tf
OUT=$OUT/tf_ncu timeout 100 bash tools/ncu_stages.sh 8x4096 32x2048 1x8192 2>&1 | grep -E "==|recompute|spine|sum"
timeout 90 python3 benchmarks/bench_spine.py --quick --spines wgmma-o --md $OUT/tf_spine.md >$OUT/tf_spine.log 2>&1 || tail -3 $OUT/tf_spine.log
grep -E "^\| " $OUT/tf_spine.md | head -8
mkdir -p $OUT/tf
timeout 80 python3 benchmarks/bench_prefill.py --shapes 1x1K,1x8K,8x4K,32x2K,varlen16,1x64K --heads 16/32 \
    --modes graph --rep-budget-s 0.2 --max-reps 50 --no-progress --no-plot --no-host-overhead \
    --impls gdn:wgmma --out "$OUT/tf" --tag prefill >"$OUT/tf/bench.log" 2>&1
echo "tf: $(grep -E "^\| (1x|8x|32x|varlen)" "$OUT/tf/prefill.md" | awk -F'|' '{printf "%s %s, ", $2, $6}')"
echo "$((SECONDS-t0)) s"
inst aot
timeout 90 python3 benchmarks/bench_spine.py --quick --spines wgmma-o --md $OUT/main_spine.md >$OUT/main_spine.log 2>&1 || tail -3 $OUT/main_spine.log
grep -E "^\| " $OUT/main_spine.md | head -8
echo "$((SECONDS-t0)) s"
tar -C /tmp -czf $FINAL/run85.tgz r85
