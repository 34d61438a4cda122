#!/usr/bin/env bash
# The device-check branch (HOW.md): the single plan under batch_invariant, MAPS without the last map.  Build A (this branch's objects, .gpu/aot) and
# build B (main 34bb85b's tree and objects, .gpu/oldtree), the invariance tests on A, the A/B of the
# single rows (flag off and on), then as much of the GPU suite on A as the call leaves.
set -u; export PYTHONUNBUFFERED=1
T0=$SECONDS; OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; END=${END:-560}
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
timeout -s KILL 150 python3 -m pytest -q -p no:cacheprovider -rf -n 4 tests/test_gpu_batch_invariant.py > "$OUT/inv.log" 2>&1
echo "inv rc=$? at $((SECONDS-T0)) s: $(tail -1 $OUT/inv.log)"; grep -E "^FAILED|moved by" "$OUT/inv.log" | head -12
for i in 1 2; do
  PYTHONPATH=$PWD:/tmp/site timeout 80 python3 branches/device-check/ab_single.py A$i 2>&1 | grep -E "^AB|Error" | tee -a "$OUT/ab_single.txt"
  PYTHONPATH=$PWD/.gpu/oldtree:/tmp/site timeout 80 python3 branches/device-check/ab_single.py B$i 2>&1 | grep -E "^AB|Error" | tee -a "$OUT/ab_single.txt"
  [ $(( END - (SECONDS - T0) )) -lt 250 ] && break
done
echo "ab at $((SECONDS-T0)) s"
# issue 71 item 2: one prompt, the serial plan and forced segment lengths stage by stage (build A)
[ $(( END - (SECONDS - T0) )) -gt 200 ] && PYTHONPATH=$PWD:/tmp/site timeout 120 python3 branches/device-check/segsweep.py \
  2>&1 | grep -v Warn | tee "$OUT/seg.txt"
echo "seg at $((SECONDS-T0)) s"
L=$(( END - (SECONDS - T0) - 10 ))
[ $L -gt 30 ] && timeout -s KILL $L python3 -m pytest -q -p no:cacheprovider -m gpu -n 4 --dist load -rfE ${ARGS:-tests} > "$OUT/suite.log" 2>&1
echo "suite rc=$? at $((SECONDS-T0)) s"; grep -E "passed|failed" "$OUT/suite.log" | tail -2; grep -E "^(FAILED|ERROR)" "$OUT/suite.log" | head -12
