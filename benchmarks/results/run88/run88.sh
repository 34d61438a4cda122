#!/usr/bin/env bash
# run 88: main after the fused-tform merge (objects byte-identical to run 86's aot_ft): the whole
# GPU suite, then the prefill benchmark with FLA 0.6.0 in the same process (README's table).
set -u
FINAL=$OUT; export OUT=/tmp/r88; mkdir -p $OUT; export PYTHONUNBUFFERED=1; t0=$SECONDS
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
GDN_PREFILL_PREBUILT=build/aot python3 -m pip install -q --no-build-isolation --no-deps -e . >$OUT/build.log 2>&1 || { tail -20 $OUT/build.log; exit 1; }
export PYTHONPATH=/tmp/site
timeout 100 python3 -m pytest -m gpu tests -q -p no:cacheprovider --timeout 90 >$OUT/gpu_suite.txt 2>&1; tail -1 $OUT/gpu_suite.txt
echo "suite $((SECONDS-t0)) s"
timeout 200 python3 benchmarks/bench_prefill.py --heads 16/32 --budget-s 110 --no-progress \
  --out "$OUT/bench" >$OUT/bench.txt 2>&1; echo "bench rc=$? $((SECONDS-t0)) s"
grep -E "^\| (1x|8x|32x|varlen)" $OUT/bench.txt | grep -E "gdn:wgmma \||fla"
tar -C /tmp -czf $FINAL/run88.tgz r88
