#!/usr/bin/env bash
# maps-cut: the segmented plan against the overlap plan on slow gates (no map cut: the worst case),
# full heads and 8/24; carry .gpu .whl
set -u; export PYTHONUNBUFFERED=1; T0=$SECONDS; OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 -c "import setuptools, sys; sys.exit(int(setuptools.__version__.split('.')[0]) < 77)" || \
  sed -i 's/^license = "Apache-2.0"/license = { text = "Apache-2.0" }/; /^license-files/d' pyproject.toml
if ! ls gdn_prefill/_ext*.so > /dev/null 2>&1; then
  rm -rf /tmp/cut; cp -r .gpu/aot /tmp/cut; cp -r .gpu/cutdelta/. /tmp/cut/
  GDN_PREFILL_PREBUILT=/tmp/cut python3 setup.py build_ext --inplace > /tmp/build.log 2>&1; echo "cut build rc=$?"
fi
export PYTHONPATH=$PWD
for H in 8/24 16/32 4/16; do
  timeout -s KILL 70 python3 benchmarks/bench_segments.py --shapes 1x32K --heads $H --segments 4,8,16 --no-passes \
    --gates slow --json $OUT/slow_${H/\//_}.json > $OUT/slow_${H/\//_}.log 2>&1; echo "slow $H rc=$? at $((SECONDS-T0)) s"
  grep "sc=" $OUT/slow_${H/\//_}.log
done
