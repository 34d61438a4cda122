#!/usr/bin/env bash
# Compare spine builds on the H200: for each prebuilt dir given, link it, check the wgmma
# spine against the oracle on a few forms, and time the isolated spine.
#   bash tools/spine_variants.sh build/aot build/aot_s4v32 ...
set -u
OUT=${OUT:-/tmp/gdn_out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
for d in "$@"; do
  tag=$(basename "$d")
  GDN_PREFILL_PREBUILT=$d python3 -m pip install -q --no-build-isolation --no-deps -e . >"$OUT/build_$tag.log" 2>&1 \
    || { echo "$tag: build failed"; tail -20 "$OUT/build_$tag.log"; continue; }
  echo "== $tag"
  timeout 150 python3 -m pytest -m gpu tests/test_gpu_prefill.py tests/test_gpu_sanitizer.py -q \
    -p no:cacheprovider -k "wgmma or wg2 or sanitizer" 2>&1 | tail -2
  timeout 120 python3 benchmarks/bench_spine.py --quick --json "$OUT/spine_$tag.json" 2>&1 | grep -E "^\| wgmma"
done
