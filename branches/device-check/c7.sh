#!/usr/bin/env bash
# Branch device-check2 (HOW.md): build A (this branch's objects, .gpu/aot) and build B (main's tree and
# objects, .gpu/oldtree); the invariance and overlap tests on A; the single rows A/B (flag off, on); one
# 32K prompt per head count: rule, serial, overlap, segment lengths; the overlap sweep; then the GPU
# suite's overlap, concurrency, sanitizer, segmented and single tests, then the rest as time allows.
set -u; export PYTHONUNBUFFERED=1
T0=$SECONDS; OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; END=${END:-570}
left() { echo $(( END - (SECONDS - T0) )); }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
for d in . .gpu/oldtree; do
  (cd $d && python3 -c "import setuptools, sys; sys.exit(int(setuptools.__version__.split('.')[0]) < 77)" || \
    sed -i 's/^license = "Apache-2.0"/license = { text = "Apache-2.0" }/; /^license-files/d' pyproject.toml)
done
( GDN_PREFILL_PREBUILT=.gpu/aot python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1; echo "build A rc=$?" ) &
( cd .gpu/oldtree && GDN_PREFILL_PREBUILT=.gpu/aot python3 setup.py build_ext --inplace > "$OUT/buildB.log" 2>&1; echo "build B rc=$?" ) &
wait; echo "builds at $((SECONDS-T0)) s"
export PYTHONPATH=$PWD:/tmp/site
timeout -s KILL 170 python3 -m pytest -q -p no:cacheprovider -rf -n 4 tests/test_gpu_batch_invariant.py tests/test_gpu_overlap.py \
  > "$OUT/inv_ov.log" 2>&1
echo "inv+overlap rc=$? at $((SECONDS-T0)) s: $(tail -1 $OUT/inv_ov.log)"; grep -E "^FAILED|^ERROR" "$OUT/inv_ov.log" | head -12
[ $(left) -gt 200 ] && timeout 60 python3 benchmarks/bench_overlap.py --shapes 1x2K,1x8K,1x64K --ctas rule,34 2>&1 | tail -12 | tee "$OUT/overlap.txt"
echo "overlap sweep at $((SECONDS-T0)) s"
[ $(left) -gt 230 ] && timeout 90 python3 branches/device-check/segsweep.py ${SEGH:-4/16,8/24,8/32,16/32,16/64} 2>&1 | grep -v Warn | tee "$OUT/seg.txt"
echo "seg at $((SECONDS-T0)) s"
if [ $(left) -gt 260 ]; then
  PYTHONPATH=$PWD:/tmp/site timeout 70 python3 branches/device-check/ab_single.py A1 2>&1 | grep -E "^AB|Error" | tee -a "$OUT/ab_single.txt"
  PYTHONPATH=$PWD/.gpu/oldtree:/tmp/site timeout 70 python3 branches/device-check/ab_single.py B1 2>&1 | grep -E "^AB|Error" | tee -a "$OUT/ab_single.txt"
fi
echo "ab at $((SECONDS-T0)) s"
L=$(( $(left) - 10 ))
[ $L -gt 30 ] && timeout -s KILL $L python3 -m pytest -q -p no:cacheprovider -m gpu -n 4 --dist load -rfE \
  tests/test_gpu_concurrency.py tests/test_gpu_sanitizer.py tests/test_gpu_prefill.py\
  tests/test_gpu_doors.py ${ARGS:-} > "$OUT/suite.log" 2>&1
echo "suite rc=$? at $((SECONDS-T0)) s"; grep -E "passed|failed" "$OUT/suite.log" | tail -2; grep -E "^(FAILED|ERROR)" "$OUT/suite.log" | head -12
