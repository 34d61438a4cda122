#!/usr/bin/env bash
# One call on the H200: link build/aot, measure host cost (tools/host_overhead.py), and profile
# the wgmma spine of one 1x8K prefill with ncu's per-instruction stall sampling (tools/ncu_hot.py).
set -u
OUT=${OUT:-/tmp/gdn_out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
GDN_PREFILL_PREBUILT=${GDN_PREFILL_PREBUILT:-build/aot} python3 -m pip install -q --no-build-isolation \
  --no-deps -e . >"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
timeout 200 python3 tools/host_overhead.py | tee "$OUT/host_overhead.md"
timeout 240 ncu --clock-control none --set full --import-source no -k regex:spine -c 1 -o /tmp/spine \
  python3 tools/profile_one.py >"$OUT/ncu.log" 2>&1 || tail -5 "$OUT/ncu.log"
ncu -i /tmp/spine.ncu-rep --page source --csv --print-source sass >"$OUT/spine_source.csv" 2>"$OUT/ncu_src.err"
python3 tools/ncu_hot.py "$OUT/spine_source.csv" --top 45 | tee "$OUT/spine_hot.txt"
ncu -i /tmp/spine.ncu-rep --page details >"$OUT/spine_details.txt" 2>&1
grep -E "Duration|Registers|Warp Cycles Per|Issue Slots|Throughput|Stall|Achieved Occ|Issued Warp" "$OUT/spine_details.txt" | head -40
