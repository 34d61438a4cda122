#!/usr/bin/env bash
# run 123: the persistent fused stage 1 (build/aot_pers: recompute_wu _pqk loops over items, loading the
# next item's k / q tiles by TMA while it stores Tu) against main (build/aot_mbar); numerics first
# (a hang is killed at 60 s), alternated whole-prefill timing, then the GPU suite on the new build.
#   carry: build/aot_mbar build/aot_pers build/run123.sh .whl
set -u
t0=$SECONDS
source tools/device_lib.sh
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
inst build/aot_pers pers
num pers
grep -q "| " $OUT/numerics.txt || { echo "numerics failed"; tail -20 /tmp/num_pers.log; exit 1; }
pre pers1
inst build/aot_mbar main; pre main1
inst build/aot_pers pers; pre pers2
inst build/aot_mbar main; pre main2
echo "$((SECONDS-t0)) s"
inst build/aot_pers pers
timeout -s KILL 200 python3 -m pytest -m gpu tests -q -x -p no:cacheprovider >$OUT/gpu_pers.txt 2>&1; tail -1 $OUT/gpu_pers.txt
grep -E "(FAILED|ERROR)" $OUT/gpu_pers.txt | head -5
echo "$((SECONDS-t0)) s"
