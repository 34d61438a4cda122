#!/usr/bin/env bash
# run 73: spine_wgmma's latency build, 4 stages (aot_b) against 3 (aot_fix), alternated twice:
# run 72 timed the 4-stage build at B=1 T=64K at 1.097 us/chunk (runs 69-70: 0.896, 0.860)
set -u
OUT=${OUT:-/tmp/gdn_out}; mkdir -p "$OUT"; export PYTHONUNBUFFERED=1
n=0
for d in build/aot_b build/aot_fix build/aot_b build/aot_fix; do
  n=$((n+1)); tag=$(basename $d)
  GDN_PREFILL_PREBUILT=$d python3 -m pip install -q --no-build-isolation --no-deps -e . >"$OUT/build_$n.log" 2>&1 || exit 1
  timeout 60 python3 benchmarks/bench_spine.py --spines wgmma --json "$OUT/spine_${tag}_$n.json" >/tmp/sp.txt 2>&1
  echo "### $tag"; grep -E '^\| wgmma \|' /tmp/sp.txt | awk -F'|' '$4+0==1 {print $5, $7, $11}' | tr '\n' ' '; echo
done
