#!/usr/bin/env bash
# run 72: spine_rs frees a slot by all 128 consumer threads' arrivals (build/aot_b): the sanitizer
# tests (its CASE now reuses every ring slot of the solo, pair, overlap and unfused spines), the
# fused plan's GPU tests, bench_spine (all spines) and the whole prefill on aot_b; wgmma-o rows of
# aot_a (a lane-0 arrive per warp) beside it.
set -u
OUT=${OUT:-/tmp/gdn_out}; mkdir -p "$OUT"; export PYTHONUNBUFFERED=1
inst() { GDN_PREFILL_PREBUILT=$1 python3 -m pip install -q --no-build-isolation --no-deps -e . >"$OUT/build_$(basename $1).log" 2>&1 || { tail -5 "$OUT/build_$(basename $1).log"; exit 1; }; }
inst build/aot_b
echo "### sanitizer"
timeout 200 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu_sanitizer.py -rfE 2>&1 | tee "$OUT/san.log" | tail -3
grep -o "Race reported[^[]*\|RACECHECK SUMMARY[^\\]*" "$OUT/san.log" | sed 's/kernel_cutlass_\([a-z_]*\)[^+]*/\1/' | sort | uniq -c | head
echo "### fused-plan tests"
timeout 150 python3 -m pytest -m gpu -q -p no:cacheprovider --timeout 60 tests/test_gpu_overlap.py tests/test_gpu_prefill.py 2>&1 | tail -2
timeout 160 python3 benchmarks/bench_spine.py --json "$OUT/spine.json" --md "$OUT/spine.md" >"$OUT/spine.log" 2>&1 || tail -5 "$OUT/spine.log"
timeout 60 python3 benchmarks/bench_prefill.py --shapes 1x8K,8x4K --heads 16/32 \
  --modes graph --rep-budget-s 0.2 --max-reps 50 --no-progress --no-plot --no-host-overhead \
  --impls gdn:wgmma --out "$OUT/prefill" --tag prefill >"$OUT/prefill.log" 2>&1 || tail -5 "$OUT/prefill.log"
inst build/aot_a
timeout 60 python3 benchmarks/bench_spine.py --spines wgmma-o --json "$OUT/spine_a_o.json" >/tmp/sa.txt 2>&1
echo "### wgmma-o aot_a"; grep -E '^\| wgmma-o \|' /tmp/sa.txt | awk -F'|' '{print $4, $5, $7, $11}'
echo "### aot_b"; grep -E "^\| (1x|8x)" "$OUT/prefill/prefill.md" | awk -F'|' '{print $2, $6}'
grep -E "^\| " "$OUT/spine.md" | awk -F'|' '{print $2, $4, $5, $7, $10, $11}'
