#!/usr/bin/env bash
# Compare spine builds on the H200 in one call: for each prebuilt dir given, link it, run the GPU
# tests that exercise the wgmma spine (every form, stage intermediates, determinism, graph replay,
# long T, sanitizer), and time the isolated spine (bench_spine.py, wgmma rows, B = 1 and 8,
# T = 1K..64K; QUICK=1: T = 1K, 4K).  The first dir is timed once more at the end, so the
# call's drift shows beside the differences (runs 60-61).
#   bash tools/spine_variants.sh build/aot_new build/aot
set -u
OUT=${OUT:-/tmp/gdn_out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
quick=""; [ "${QUICK:-0}" = 1 ] && quick="--quick"
n=0
for d in "$@" "$1"; do
  n=$((n + 1)); tag=$(basename "$d")
  GDN_PREFILL_PREBUILT=$d python3 -m pip install -q --no-build-isolation --no-deps -e . >"$OUT/build_$tag.log" 2>&1 \
    || { echo "$tag: build failed"; tail -20 "$OUT/build_$tag.log"; continue; }
  echo "== $tag"
  if [ $n -le $# ]; then
    timeout 200 python3 -m pytest -m gpu tests -q -p no:cacheprovider --timeout 120 \
      -k "(4k or wg2 or stages or unaligned or long_sequence or sanitizer or deterministic or graph) and not overlap" 2>&1 | tail -2
  fi
  timeout 150 python3 benchmarks/bench_spine.py $quick --spines wgmma --json "$OUT/spine_${tag}_$n.json" 2>&1 \
    | grep -E "^\| wgmma" | awk -F'|' '{print $3, $4, $5, $7}'
done
