#!/usr/bin/env bash
# maps-cut on a fresh machine: the cut objects over main's (.gpu/aot + .gpu/cutdelta); the new GPU
# tests (per-head cut, sanitizer over the segmented plan); bench_segments fast and mixed at full
# heads (the planner's question); then the GPU suite for the time left.  carry .gpu .whl
set -u; export PYTHONUNBUFFERED=1; T0=$SECONDS; OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/r; END=${END:-560}
left() { echo $(( END - (SECONDS - T0) )); }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
python3 -c "import setuptools, sys; sys.exit(int(setuptools.__version__.split('.')[0]) < 77)" || \
  sed -i 's/^license = "Apache-2.0"/license = { text = "Apache-2.0" }/; /^license-files/d' pyproject.toml
rm -rf /tmp/cut; cp -r .gpu/aot /tmp/cut; cp -r .gpu/cutdelta/. /tmp/cut/; rm -f gdn_prefill/_ext*.so
GDN_PREFILL_PREBUILT=/tmp/cut python3 setup.py build_ext --inplace > /tmp/build.log 2>&1; echo "cut build rc=$? at $((SECONDS-T0)) s"
export PYTHONPATH=$PWD:/tmp/site
timeout -s KILL 200 python3 -m pytest -q -p no:cacheprovider -n 4 -rfE tests/test_gpu_sanitizer.py \
  tests/test_gpu_prefill.py -k "sanitizer or cut_maps" > $OUT/new_tests.log 2>&1; echo "new tests rc=$? at $((SECONDS-T0)) s: $(tail -1 $OUT/new_tests.log)"
for G in fast mixed; do
  timeout -s KILL 100 python3 benchmarks/bench_segments.py --shapes 1x32K,1x64K --heads 16/32,8/24,16/48 --segments 4,8,16,24 \
    --gates $G --json $OUT/seg_$G.json --md $OUT/seg_$G.md > $OUT/seg_$G.log 2>&1; echo "seg $G rc=$? at $((SECONDS-T0)) s"
done
timeout -s KILL $(( $(left) - 15 )) python3 -m pytest -q -p no:cacheprovider -m gpu -n 6 --dist load -rfE \
  tests/test_gpu_prefill.py tests/test_gpu_batch_invariant.py tests/test_gpu_concurrency.py tests/test_gpu_doors.py \
  tests/test_gpu_overlap.py tests/test_gpu_fla_layout.py > $OUT/suite.log 2>&1
echo "suite rc=$? at $((SECONDS-T0)) s"; grep -E "passed|failed" $OUT/suite.log | tail -2; grep -E "^(FAILED|ERROR)" $OUT/suite.log | head
grep -h "sc=\|rule" $OUT/seg_*.log | head -60
