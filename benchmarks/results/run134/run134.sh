#!/usr/bin/env bash
# run 134: where the fused spine's ~640 cycles per chunk outside its MMAs go (run 131's probe):
# ncu source-level stall samples of spine_rs_o, pair build at 1x8192 (fused plan, serial) and dual
# build at 8x4096, each one launch (tools/ncu_kernel.sh; main's objects, build/aot_base).
#   carry: build/aot_base build/run134.sh
set -u
t0=$SECONDS
source tools/device_lib.sh
inst build/aot_base base
echo "$((SECONDS-t0)) s"
CUBIN=$(ls build/aot_base/cubin/spine_rs_o_pair_kv/*.cubin) bash tools/ncu_kernel.sh spine_rs pair 1x8192 fused 2>&1 | head -45
echo "$((SECONDS-t0)) s"
CUBIN=$(ls build/aot_base/cubin/spine_rs_o_dual_kv/*.cubin) bash tools/ncu_kernel.sh spine_rs dual 8x4096 fused 2>&1 | head -14
echo "$((SECONDS-t0)) s"
