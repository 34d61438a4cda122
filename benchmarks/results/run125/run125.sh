#!/usr/bin/env bash
# run 125: stage 1's inverse with k-steps unrolled by hand (mma_tf32.tile_16x8 kk_max), on main
# (build/aot_unroll) and on the persistent fused build (build/aot_pers2: + the fold before the barrier,
# one register for buffer and phase), and the persistent build's items per CTA: GDN_X_IPC (an
# experiment-only patch of the launcher, build/ipc_probe.patch, never merged) sets the grid to about
# items / IPC CTAs; unset = one wave of persistent CTAs.  Alternated, graph mode.
#   carry: build/aot_mbar build/aot_unroll build/aot_pers2 build/ipc_probe.patch build/run125.sh
set -u
t0=$SECONDS
source tools/device_lib.sh
export SHAPES=8x4K,32x2K,1x8K
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
git apply build/ipc_probe.patch || exit 1
inst build/aot_pers2 pers2
num pers2
grep -q "| 4096" $OUT/numerics.txt || { echo "numerics failed"; tail -20 /tmp/num_pers2.log; exit 1; }
for r in a b; do
  inst build/aot_pers2 pers2; pre pers_$r; GDN_X_IPC=2 pre ipc2_$r; GDN_X_IPC=4 pre ipc4_$r; GDN_X_IPC=8 pre ipc8_$r
  inst build/aot_mbar main; pre main_$r
  inst build/aot_unroll unroll; pre unroll_$r
  echo "$((SECONDS-t0)) s"
done
