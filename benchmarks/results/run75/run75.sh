#!/usr/bin/env bash
# run 75: (a) spine_wgmma's latency build as a 4-CTA multicast cluster (build/aot_mc, branch
# spine-wgmma-mc4; run 74's ncu at 1x64K: L2 87 %, 98 kB DRAM per chunk-head vs 88.7 at 16K) against
# main (build/aot), bench_spine wgmma rows A B A B; (b) the overlap split swept for
# wu-four-ctas (build/aot_r4), whose overlap plan was slower in run 74 (1x8K 236 -> 264, 1x64K
# 1771 -> 2057) while its stage 1 alone was 4-8 % faster.
set -u
OUT=${OUT:-/tmp/gdn_out}; mkdir -p "$OUT"; export PYTHONUNBUFFERED=1
inst() { GDN_PREFILL_PREBUILT=$1 python3 -m pip install -q --no-build-isolation --no-deps -e . >"$OUT/build_$(basename $1).log" 2>&1 || { tail -5 "$OUT/build_$(basename $1).log"; exit 1; }; }
inst build/aot_mc
echo "### aot_mc wgmma tests"
timeout 100 python3 -m pytest -m gpu -q -p no:cacheprovider --timeout 60 tests -k "wgmma and not fused and not overlap" -x 2>&1 | tail -2
for i in 1 2; do for d in aot_mc aot; do
  inst build/$d
  timeout 90 python3 benchmarks/bench_spine.py --spines wgmma --json "$OUT/spine_${d}_$i.json" --md "$OUT/spine_${d}_$i.md" >"$OUT/spine_${d}_$i.log" 2>&1 || tail -3 "$OUT/spine_${d}_$i.log"
  echo "### $d $i"; grep -E '^\| wgmma' "$OUT/spine_${d}_$i.md" | awk -F'|' '{print $3, $4, $5, $7, $8, $12}'
done; done
for d in aot_r4 aot; do
  inst build/$d
  timeout 100 python3 benchmarks/bench_overlap.py --shapes 1x8K,1x64K --md "$OUT/overlap_$d.md" >"$OUT/overlap_$d.log" 2>&1 || tail -3 "$OUT/overlap_$d.log"
  echo "### overlap $d"; grep -E '^\|' "$OUT/overlap_$d.md"
done
