#!/usr/bin/env bash
# last call (carry .gpu .whl; .gpu/aot = the wu-clean tree's objects): build, the whole GPU
# suite, then one process timing the default plan (overlap where its rule holds) against the serial
# form, and bench_overlap's forced overlap where the segmented plan runs.
set -u; export PYTHONUNBUFFERED=1
T0=$SECONDS; OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; END=${END:-380}
left() { echo $(( END - (SECONDS - T0) )); }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
python3 -c "import setuptools, sys; sys.exit(int(setuptools.__version__.split('.')[0]) < 77)" || \
  sed -i 's/^license = "Apache-2.0"/license = { text = "Apache-2.0" }/; /^license-files/d' pyproject.toml
GDN_PREFILL_PREBUILT=.gpu/aot python3 setup.py build_ext --inplace > /tmp/build.log 2>&1; echo "build rc=$? at $((SECONDS-T0)) s"
export PYTHONPATH=$PWD:/tmp/site
timeout -s KILL $(( $(left) - 110 )) python3 -m pytest -q -p no:cacheprovider -rf -n 6 -m gpu tests/ > "$OUT/suite.log" 2>&1
echo "suite rc=$? at $((SECONDS-T0)) s: $(tail -1 $OUT/suite.log)"; grep -E "^FAILED|^ERROR" "$OUT/suite.log" | head -20
timeout -s KILL $(( $(left) - 50 )) python3 benchmarks/bench_prefill.py --modes graph --shapes 1x4096,1x8K,1x32768,1x64K \
  --heads 16/32,8/32,8/24,4/16,8/16 --qk-l2norm --impls gdn:wgmma,gdn:wgmma-serial --warm-s 0.3 --rep-budget-s 0.12 \
  --min-reps 8 --no-plot --no-progress --no-host-overhead --budget-s $(( $(left) - 65 )) --out "$OUT" --tag default_vs_serial > /tmp/dvs.log 2>&1
echo "bench rc=$? at $((SECONDS-T0)) s"; python3 lab/s53/table2.py "$OUT/default_vs_serial.json"
for H in 8/24 4/16 8/16; do [ $(left) -gt 15 ] || break
  timeout -s KILL $(( $(left) - 5 )) python3 benchmarks/bench_overlap.py --shapes 1x32K,1x64K --heads $H --ctas rule 2>&1 | grep -E "^\|" | tail -4 | tee -a "$OUT/overlap_seg.txt"
done
echo "done at $((SECONDS-T0)) s"
