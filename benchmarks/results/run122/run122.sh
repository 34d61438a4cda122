#!/usr/bin/env bash
# run 122: (1) the "perfect prefetch" probe of stage 1 (timing only: the k / q tiles' mbarrier wait moved
# to the CTA's end, build/aot_nowait) against main, alternated; (2) the GPU suite on build/aot_mbar
# (main + the mbarrier field only in aligned builds; owed: the suite at the 15 % overlap split).
#   carry: build/aot build/aot_nowait build/aot_mbar build/run122.sh .whl
set -u
t0=$SECONDS
source tools/device_lib.sh
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
inst build/aot main1; pre main1
inst build/aot_nowait nw1; pre nw1
inst build/aot main2; pre main2
inst build/aot_nowait nw2; pre nw2
echo "$((SECONDS-t0)) s"
inst build/aot_mbar mbar
timeout -s KILL 200 python3 -m pytest -m gpu tests -q -p no:cacheprovider >$OUT/gpu_mbar.txt 2>&1; tail -1 $OUT/gpu_mbar.txt
grep -E "(FAILED|ERROR)" $OUT/gpu_mbar.txt | head -5
echo "$((SECONDS-t0)) s"
