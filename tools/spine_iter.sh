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
bash tools/ncu_kernel.sh spine spine
