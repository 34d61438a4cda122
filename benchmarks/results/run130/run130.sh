#!/usr/bin/env bash
# run 130 (PREPARED in session 22, not run: no device was lent that session).
# (1) tools/wgmma_probe.py: the rate and group latency of m64nNk16 bf16 wgmma (RS / SS, one or two
#     warpgroups) and spine_rs's chunk chain emulated on synthetic tiles (its schedule and the one before
#     run 127, with and without the register work): how much of the fused spine's ~2,330 cycles per chunk
#     is the MMA structure itself; predictions in benchmarks/NOTES.md ("session 22").
# (2) the overlap plan's split swept below 10 % with stage 1's second part at three CTAs per SM
#     (build/aot_base = main's objects) and at four (build/aot_o4: recompute_wu.OVERLAP_CTAS_PER_SM = 4,
#     spine objects identical).
# Build the carried folders here first:
#   python -m cute_kernels.aot --out build/aot_base --jobs 2
#   cp -r build/aot_base build/aot_o4   # then, with OVERLAP_CTAS_PER_SM = 4 in cute_kernels/recompute_wu.py:
#   for v in recompute_wu_bf16_betaf32_a16_pqk recompute_wu_bf16_betabf16_a16_pqk; do
#     python -m cute_kernels.aot --one recompute_wu $v --out build/aot_o4; done   # and revert the edit
#   carry: build/aot_base build/aot_o4 build/run130.sh (this file, copied)
set -u
t0=$SECONDS
source tools/device_lib.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
timeout -s KILL 120 python3 tools/wgmma_probe.py --out "$OUT/wgmma_probe.md" 2>&1 | tail -40
echo "$((SECONDS-t0)) s"
inst build/aot_base base
sweep o3 2,5,7,10
echo "$((SECONDS-t0)) s"
inst build/aot_o4 o4
sweep o4 2,5,7,10
echo "$((SECONDS-t0)) s"
