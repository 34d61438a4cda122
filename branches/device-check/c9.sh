#!/usr/bin/env bash
# Branch device-check2, the short call (c7.sh's first steps when little device time is left): build A,
# the overlap, concurrency (overlap opted in too) and invariance tests, the overlap plan's timing.
set -u; export PYTHONUNBUFFERED=1
T0=$SECONDS; OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; END=${END:-320}
left() { echo $(( END - (SECONDS - T0) )); }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
python3 -c "import setuptools, sys; sys.exit(int(setuptools.__version__.split('.')[0]) < 77)" || \
  sed -i 's/^license = "Apache-2.0"/license = { text = "Apache-2.0" }/; /^license-files/d' pyproject.toml
GDN_PREFILL_PREBUILT=.gpu/aot python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1; echo "build A rc=$? at $((SECONDS-T0)) s"
export PYTHONPATH=$PWD:/tmp/site
timeout -s KILL $(( $(left) - 70 )) python3 -m pytest -q -p no:cacheprovider -rf -n 4 tests/test_gpu_overlap.py \
  tests/test_gpu_concurrency.py tests/test_gpu_batch_invariant.py > "$OUT/tests.log" 2>&1
echo "tests rc=$? at $((SECONDS-T0)) s: $(tail -1 $OUT/tests.log)"; grep -E "^FAILED|^ERROR" "$OUT/tests.log" | head -12
[ $(left) -gt 25 ] && timeout $(( $(left) - 15 )) python3 benchmarks/bench_overlap.py --shapes 1x8K,1x64K 2>&1 | grep -E "us$|^\|" | tee "$OUT/overlap.txt"
echo "done at $((SECONDS-T0)) s"
