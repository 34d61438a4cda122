#!/usr/bin/env bash
# run 74 (session 13's first call): branch wu-four-ctas (build/aot_r4: recompute_wu at four CTAs
# per SM) — sanitizer tests on it (racecheck over the late V hand-over), A/B against main's build
# (fused-plan GPU tests, ncu time and bytes per kernel, whole prefill graph), then ncu of main's
# 4-stage latency spine at B=1 64K (run 72's outlier: is the K tile read from DRAM twice?).
set -u
OUT=${OUT:-/tmp/gdn_out}; mkdir -p "$OUT"; export PYTHONUNBUFFERED=1
inst() { GDN_PREFILL_PREBUILT=$1 python3 -m pip install -q --no-build-isolation --no-deps -e . >"$OUT/build_$(basename $1).log" 2>&1 || { tail -5 "$OUT/build_$(basename $1).log"; exit 1; }; }
inst build/aot_r4
echo "### sanitizer aot_r4"
timeout 120 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu_sanitizer.py -rfE 2>&1 | tee "$OUT/san.log" | tail -3
grep -o "Race reported[^[]*\|RACECHECK SUMMARY[^\\]*" "$OUT/san.log" | sed 's/kernel_cutlass_\([a-z_]*\)[^+]*/\1/' | sort | uniq -c | head
SHAPES="8x4096 1x8192 32x2048" PYTEST_K="fused or overlap or stage" timeout 330 bash tools/ab_builds.sh build/aot_r4 build/aot
echo "### ncu spine_wgmma 1x64K (aot)"
CUBIN=$(ls build/aot/cubin/spine_wgmma_kv/*.cubin) timeout 100 bash tools/ncu_kernel.sh spine_wgmma sw64 1x65536 unfused 2>&1 | head -14
grep -E "Memory Throughput|DRAM Throughput|Duration|L2 Hit Rate" $OUT/ncu_sw64_details.txt | head -8
