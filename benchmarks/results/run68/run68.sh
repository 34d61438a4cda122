#!/usr/bin/env bash
# run 68 (session 12's first call): bench_spine with its queued column; ncu of spine_wgmma's
# latency build (B=1 16K) and of recompute_wu (8x4096, fused plan serial), both annotated from
# their cubins; compute-sanitizer racecheck / synccheck over test_gpu_sanitizer's CASE; the
# whole prefill in graph mode (bench.queued_graph_times' first GPU run).
set -u
OUT=${OUT:-/tmp/gdn_out}; mkdir -p "$OUT"; export PYTHONUNBUFFERED=1
GDN_PREFILL_PREBUILT=build/aot python3 -m pip install -q --no-build-isolation --no-deps -e . >"$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
timeout 200 python3 benchmarks/bench_spine.py --json "$OUT/spine.json" --md "$OUT/spine.md" >"$OUT/spine.log" 2>&1 || tail -5 "$OUT/spine.log"
timeout 100 python3 benchmarks/bench_prefill.py --shapes 1x1K,1x8K,1x64K,8x4K --heads 16/32 \
  --modes graph --rep-budget-s 0.2 --max-reps 50 --no-progress --no-plot --no-host-overhead \
  --impls gdn:wgmma --out "$OUT/prefill" --tag prefill >"$OUT/prefill.log" 2>&1 || tail -5 "$OUT/prefill.log"
CUBIN=$(ls build/aot/cubin/spine_wgmma_kv/*.cubin) bash tools/ncu_kernel.sh spine_wgmma sw 1x16384 unfused > "$OUT/ncu_sw_summary.txt" 2>&1
CUBIN=$(ls build/aot/cubin/recompute_wu_bf16_betaf32_a16_pqk/*.cubin) bash tools/ncu_kernel.sh recompute_wu wu 8x4096 fused > "$OUT/ncu_wu_summary.txt" 2>&1
python3 -c "import sys; sys.path.insert(0,'tests'); import test_gpu_sanitizer as t; print(t.CASE)" > /tmp/case.py
for tool in racecheck synccheck; do
  timeout 150 compute-sanitizer --tool $tool --error-exitcode 3 python3 /tmp/case.py > "$OUT/san_$tool.txt" 2>&1; echo "$tool rc=$?" >> "$OUT/san_rc.txt"
done
cd "$OUT" && tar czf /tmp/r68.tgz . && rm -rf "$OUT"/* && mv /tmp/r68.tgz "$OUT/"
echo "=== summary"; tar xzf "$OUT/r68.tgz" -C /tmp ./spine.md ./san_rc.txt ./prefill/prefill.md 2>/dev/null
cat /tmp/spine.md; cat /tmp/san_rc.txt; grep -E "^\| (1x|8x)" /tmp/prefill/prefill.md
