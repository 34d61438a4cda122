#!/usr/bin/env bash
# Session 51: the whole GPU suite on this build, four pytest-xdist workers on the one GPU.
set -u; export PYTHONUNBUFFERED=1
T0=$SECONDS; OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; END=${END:-575}
PP=$(cat /tmp/pp 2>/dev/null || echo /tmp/site)
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
ls gdn_prefill/_ext*.so > /dev/null 2>&1 || { GDN_PREFILL_PREBUILT=.gpu/aot python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1; }
export PYTHONPATH=$PWD:$PP
timeout -s KILL $(( END - (SECONDS - T0) - 10 )) python3 -m pytest -q -p no:cacheprovider -m gpu -n ${NW:-4} --dist load \
  -rfE --durations=25 ${ARGS:-tests} > "$OUT/suite.log" 2>&1
echo "suite rc=$? at $((SECONDS-T0)) s"; grep -E "passed|failed|error" "$OUT/suite.log" | tail -3; grep -E "^(FAILED|ERROR)" "$OUT/suite.log" | head -20
