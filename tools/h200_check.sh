#!/usr/bin/env bash
# One call on a Hopper host that has no DSL: link the prebuilt kernels, run the GPU
# tests, then the given benchmark commands.  Results land in ${OUT:-/tmp/gdn_out}.
#   GDN_PREFILL_PREBUILT=build/aot bash tools/h200_check.sh [pytest args...]
set -u
OUT=${OUT:-/tmp/gdn_out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
fi
export GDN_PREFILL_PREBUILT=${GDN_PREFILL_PREBUILT:-build/aot}
python3 -m pip install -q --no-build-isolation --no-deps -e . >"$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
GDN_TEST_REPORT="$OUT/errors.json" timeout 420 python3 -m pytest -m gpu tests -q -p no:cacheprovider \
  --timeout 180 -rfE "$@" 2>&1 | tee "$OUT/pytest.log" | tail -40
