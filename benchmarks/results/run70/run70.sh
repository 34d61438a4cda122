#!/usr/bin/env bash
# run 70: this session's build (spine_wgmma latency build with 4 stages; spine_rs releases a slot
# after a warp barrier): the full GPU suite with FLA (sanitizer's racecheck / synccheck included;
# if racecheck still fails, build/aot_sb's variant too), bench_spine, the whole prefill (graph).
set -u
OUT=${OUT:-/tmp/gdn_out}; mkdir -p "$OUT"; export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
inst() { GDN_PREFILL_PREBUILT=$1 python3 -m pip install -q --no-build-isolation --no-deps -e . >"$OUT/build_$(basename $1).log" 2>&1 || { tail -5 "$OUT/build_$(basename $1).log"; exit 1; }; }
inst build/aot_a
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
s=$(date +%s)
GDN_TEST_REPORT="$OUT/errors.json" timeout 330 python3 -m pytest -m gpu tests -q -p no:cacheprovider --timeout 180 -rfE 2>&1 | tee "$OUT/pytest.log" | tail -8
echo "suite $(( $(date +%s) - s )) s"
if grep -q "FAILED.*racecheck" "$OUT/pytest.log"; then
  inst build/aot_sb; echo "### racecheck aot_sb"
  timeout 60 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu_sanitizer.py -k racecheck 2>&1 | tail -2
  inst build/aot_a
fi
timeout 150 python3 benchmarks/bench_spine.py --json "$OUT/spine.json" --md "$OUT/spine.md" >"$OUT/spine.log" 2>&1 || tail -5 "$OUT/spine.log"
timeout 60 python3 benchmarks/bench_prefill.py --shapes 1x8K,8x4K --heads 16/32 \
  --modes graph --rep-budget-s 0.2 --max-reps 50 --no-progress --no-plot --no-host-overhead \
  --impls gdn:wgmma --out "$OUT/prefill" --tag prefill >"$OUT/prefill.log" 2>&1 || tail -5 "$OUT/prefill.log"
grep -E "^\| (1x|8x)" "$OUT/prefill/prefill.md" | awk -F'|' '{print $2, $6}'
grep -E "^\| " "$OUT/spine.md" | awk -F'|' '{print $2, $4, $5, $7, $10, $11}'
