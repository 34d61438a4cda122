#!/usr/bin/env bash
# One quick iteration on the wgmma spine (H200): link build/aot, run the GPU tests of the wgmma
# spine (every form, per-stage intermediates, determinism, graph replay, long T, both builds),
# the isolated-spine benchmark, the host-cost probe, and ncu's per-instruction stall profile.
set -u
OUT=${OUT:-/tmp/gdn_out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
GDN_PREFILL_PREBUILT=${GDN_PREFILL_PREBUILT:-build/aot} python3 -m pip install -q --no-build-isolation \
  --no-deps -e . >"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
timeout 240 python3 -m pytest -m gpu tests/test_gpu_prefill.py tests/test_gpu_sanitizer.py -q -p no:cacheprovider \
  -k "wgmma or wg2 or sanitizer" 2>&1 | tail -4
timeout 120 python3 benchmarks/bench_spine.py --quick --json "$OUT/spine.json" 2>&1 | grep -E "^\| (wgmma|scalar)"
timeout 120 python3 tools/host_overhead.py | tee "$OUT/host_overhead.md"
timeout 200 ncu --clock-control none --set full --import-source no -k regex:spine -c 1 -o /tmp/spine \
  python3 tools/profile_one.py >"$OUT/ncu.log" 2>&1 || tail -5 "$OUT/ncu.log"
ncu -i /tmp/spine.ncu-rep --page source --csv --print-source sass >"$OUT/spine_source.csv" 2>/dev/null
python3 tools/ncu_hot.py "$OUT/spine_source.csv" --top 25 >"$OUT/spine_hot.txt"; head -27 "$OUT/spine_hot.txt"
ncu -i /tmp/spine.ncu-rep --page details >"$OUT/spine_details.txt" 2>&1
grep -E "^ +Duration|Registers Per|Warp Cycles Per Issued|L2 Cache Throughput|Issue Slots Busy" "$OUT/spine_details.txt"
