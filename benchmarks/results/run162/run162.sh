#!/usr/bin/env bash
# Run 162: the final build (stage 1's merges in one TF32 pass; objects byte-identical to run 161's
# build/aot_x1): the whole GPU suite with FLA installed (the hard-input tests among it).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site
source tools/device_lib.sh
inst build/aot run162
t0=$SECONDS
timeout -s KILL 500 python3 -m pytest -m gpu tests -q -p no:cacheprovider -rfs >"$OUT/gpu_suite.log" 2>&1
echo "gpu_suite: rc=$? at $((SECONDS - t0)) s"
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/gpu_suite.log" | tail -15
