#!/usr/bin/env bash
# run 124: why the persistent fused stage 1 (run 123) is slower: stage 1 alone under ncu (kernels
# serialised) for main (aot_mbar), the persistent build (aot_pers) and the same objects launched one
# item per CTA (the launcher's sm_count patched to 1 << 20: the new shared-memory layout and loop, no
# persistence), 8x4K and 32x2K; then whole-prefill timing of the one-item-per-CTA launch.
#   carry: build/aot_mbar build/aot_pers build/run124.sh
set -u
t0=$SECONDS
source tools/device_lib.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
stages() { OUT=$OUT/$1 timeout -s KILL 150 bash tools/ncu_stages.sh 8x4096 32x2048 2>&1 | grep -E "==|recompute|spine" | tee -a $OUT/ncu.txt; }
echo "## main" >> $OUT/ncu.txt; inst build/aot_mbar main; stages main
echo "## pers" >> $OUT/ncu.txt; inst build/aot_pers pers; stages pers
cp pyx/gdn_prefill/_ext.pyx /tmp/_ext.pyx.orig
sed -i 's/p.sm_count = sms/p.sm_count = 1 << 20/' pyx/gdn_prefill/_ext.pyx; grep -c "1 << 20" pyx/gdn_prefill/_ext.pyx
echo "## one item per CTA" >> $OUT/ncu.txt; inst build/aot_pers one; stages one
pre one1
cp /tmp/_ext.pyx.orig pyx/gdn_prefill/_ext.pyx
inst build/aot_mbar main; pre main1
echo "$((SECONDS-t0)) s"
