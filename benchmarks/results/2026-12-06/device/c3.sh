#!/usr/bin/env bash
# Device call 3 (session 49): the rest of the GPU suite on the new build (the files call 1 ran are left
# out), the sanitizer and concurrency cases first; -v so that a run cut by its time limit still names
# every test it passed.
set -u
export PYTHONUNBUFFERED=1
T0=$SECONDS
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
fi
export PYTHONPATH=$PWD:/tmp/site
python3 -c "import setuptools, sys; sys.exit(int(setuptools.__version__.split('.')[0]) < 77)" || \
  sed -i 's/^license = "Apache-2.0"/license = { text = "Apache-2.0" }/; /^license-files/d' pyproject.toml
ls gdn_prefill/_ext*.so >/dev/null 2>&1 || GDN_PREFILL_PREBUILT=.gpu/aot_new timeout -s KILL 240 python3 setup.py build_ext --inplace > "$OUT/build_new3.log" 2>&1
files="tests/test_gpu_sanitizer.py tests/test_gpu_concurrency.py tests/test_fused_plan.py tests/test_bitwise_outputs.py
  tests/test_gpu_prefill.py tests/test_gpu_fla_layout.py tests/test_gpu_overlap.py tests/test_malformed_sweep.py
  tests/test_torch_op.py tests/test_distributed.py tests/test_integration_transformers.py tests/test_observability.py
  tests/test_bench.py tests/test_dlpack.py tests/test_fla_layout.py tests/test_fused_kernel.py tests/test_overlap_rule.py
  tests/test_cimport_example.py tests/test_bench_layout_and_floor.py tests/test_soak_cli.py tests/test_wgmma_probe.py
  tests/test_numerics_hard.py"
timeout -s KILL ${LIMIT:-520} python3 -m pytest -v -p no:cacheprovider -m gpu $files > "$OUT/suite.log" 2>&1
echo "suite rc=$? at $((SECONDS - T0)) s"
echo "passed $(grep -c ' PASSED' "$OUT/suite.log") failed $(grep -c ' FAILED' "$OUT/suite.log") errors $(grep -c ' ERROR' "$OUT/suite.log")"
grep -E " (FAILED|ERROR)" "$OUT/suite.log" | head -20
tail -4 "$OUT/suite.log"
