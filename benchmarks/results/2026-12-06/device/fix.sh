set -u; export PYTHONUNBUFFERED=1; OUT=${OUT:-/tmp/out}; mkdir -p $OUT
python3 -c "import setuptools, sys; sys.exit(int(setuptools.__version__.split('.')[0]) < 77)" || \
  sed -i 's/^license = "Apache-2.0"/license = { text = "Apache-2.0" }/; /^license-files/d' pyproject.toml
[ -f gdn_prefill/_ext*.so ] || GDN_PREFILL_PREBUILT=.gpu/aot python3 setup.py build_ext --inplace > $OUT/build.log 2>&1
PYTHONPATH=$PWD python3 -m pytest -q -p no:cacheprovider -rf tests/test_gpu_batch_invariant.py tests/test_readme_api.py 2>&1 | tee $OUT/inv2.log | tail -5
