#!/usr/bin/env bash
# run 135 (PREPARED in session 23, not run: the session's device time was spent): branch
# spine-tu-rows-zeroed (a partial chunk's Tu rows >= L zeroed in shared memory, the chain's select
# dropped: 32 FSEL + 15 ISETP fewer per chunk, run 134's instruction-bound loop) against the working
# branch spine-rs-sched (its parent).
#   build here:  git checkout spine-tu-rows-zeroed && python -m cute_kernels.aot --out build/aot_tu --jobs 2
#                git checkout spine-rs-sched && python -m cute_kernels.aot --out build/aot_base --jobs 2
#   carry: build/aot_base build/aot_tu build/run135.sh .whl       (run it from the branch's tree)
# Predictions (session 23, before it runs): bitwise_outputs identical (a signed zero at most);
# GPU suite passes; per chunk -1.5 to -3 % on the fused spine (issue is ~31 % of its loop's
# samples and the change removes 7 % of the loop's instructions): 1x8K 179 -> 174-177 us,
# 1x64K 1440 -> 1400-1420, 8x4K / 32x2K / varlen16 -1 to -2 %.
set -u
t0=$SECONDS
source tools/device_lib.sh
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
export SHAPES=1x4K,1x8K,1x64K,8x4K,32x2K,varlen16
inst build/aot_base base
timeout -s KILL 60 python3 tools/bitwise_outputs.py --save /tmp/base.pt >"$OUT/bitwise_base.log" 2>&1 || tail -3 "$OUT/bitwise_base.log"
pre base_a
inst build/aot_tu tu
timeout -s KILL 60 python3 tools/bitwise_outputs.py --save /tmp/tu.pt >"$OUT/bitwise_tu.log" 2>&1 || tail -3 "$OUT/bitwise_tu.log"
python3 tools/bitwise_outputs.py --compare /tmp/base.pt /tmp/tu.pt 2>&1 | tee "$OUT/bitwise.txt" | tail -12
timeout -s KILL 170 python3 -m pytest -m gpu tests -q -p no:cacheprovider >"$OUT/gpu_suite.txt" 2>&1; tail -1 "$OUT/gpu_suite.txt"
grep -E "(FAILED|ERROR)" "$OUT/gpu_suite.txt" | head -5
pre tu_a
inst build/aot_base base; pre base_b
inst build/aot_tu tu; pre tu_b
echo "$((SECONDS-t0)) s"
cat "$OUT/prefill_ab.txt"
