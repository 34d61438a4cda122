#!/usr/bin/env bash
# Everything the issues ask to be shown on a Hopper host, in one call (< 10 minutes):
# GPU tests, the main job, the prefill benchmark (16/32), the spine microbenchmark, and a
# prefill from the installed wheel.  Needs build/aot (prebuilt objects) and, for FLA, .whl/.
#   bash tools/h200_release_check.sh      (results in ${OUT:-/tmp/gdn_out})
set -u
OUT=${OUT:-/tmp/gdn_out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
bash tools/h200_check.sh 2>&1 | grep -E "passed|failed|FAILED" | tail -8
rm -f "$OUT/build.log"
export PYTHONPATH=/tmp/site
timeout 160 python3 -m gdn_prefill >"$OUT/main_job.txt" 2>&1; echo "main job rc=$?"
timeout 240 python3 benchmarks/bench_prefill.py --heads 16/32 --budget-s 170 --no-progress \
  --out "$OUT/bench" >/tmp/bench.txt 2>&1; echo "bench rc=$?"
grep -E "^\| (1x|8x|32x|varlen)" /tmp/bench.txt
timeout 240 python3 benchmarks/bench_spine.py --json "$OUT/spine.json" --md "$OUT/spine.md" >/tmp/spine.txt 2>&1
echo "spine rc=$?"; grep -E "^\| (scalar|wgmma)|B=" /tmp/spine.txt | tail -16
timeout 100 python3 tools/host_overhead.py >"$OUT/host_overhead.md" 2>&1; echo "host rc=$?"
grep -E "prefill\(\)|one DSL" "$OUT/host_overhead.md"
nvcc -O2 -arch=sm_90a -o /tmp/launch_cost tools/launch_cost.cu && /tmp/launch_cost >"$OUT/launch_cost.md" 2>&1
grep -E "^\| (<<<|cuda)" "$OUT/launch_cost.md"
# the wheel, installed on its own (the editable install is removed first so it cannot shadow it)
python3 -m pip uninstall -y -q gdn-prefill >/dev/null 2>&1
GDN_PREFILL_PREBUILT=build/aot python3 -m build --wheel --no-isolation --skip-dependency-check --outdir /tmp/dist . \
  >/tmp/wheel.log 2>&1 || tail -20 /tmp/wheel.log
python3 -m pip install -q --no-deps --target /tmp/wheelsite /tmp/dist/*.whl
(cd /tmp && PYTHONPATH=/tmp/wheelsite:/tmp/site python3 "$OLDPWD/tools/wheel_smoke.py"); echo "wheel rc=$?"
