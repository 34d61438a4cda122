#!/usr/bin/env bash
# run 131: (1) tools/wgmma_probe.py again (run 130 lost its table: a comma inside a chain label);
# (2) run 130's sweep read as a step in absolute split slots, not a percentage (1x8K: 6 slots
#     181.4 us, 9 slots 190.8; 1x16K: 5 slots 344.9, 12 slots 370.3): the split swept by slot,
#     twice (the two passes give the noise), at Hk/Hv 16/32 and, for the per-CTA reading, 8/16.
# carry: build/aot_base (main's objects) build/run131.sh (this file, copied)
set -u
t0=$SECONDS
source tools/device_lib.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
timeout -s KILL 120 python3 tools/wgmma_probe.py --out "$OUT/wgmma_probe.md" 2>&1 | tail -45
echo "$((SECONDS-t0)) s"
inst build/aot_base base
for pass in a b; do
  timeout -s KILL 200 python3 benchmarks/bench_overlap.py --shapes 1x4K,1x8K,1x16K,1x64K --heads 16/32 \
    --slots 1,2,3,4,6,8,12,16 --md "$OUT/slots_$pass.md" >/tmp/slots_$pass.log 2>&1 || tail -5 /tmp/slots_$pass.log
  echo "$((SECONDS-t0)) s"
done
timeout -s KILL 100 python3 benchmarks/bench_overlap.py --shapes 1x8K,1x16K --heads 8/16 \
  --slots 2,4,8,16,24,32 --md "$OUT/slots_h16.md" >/tmp/slots_h16.log 2>&1 || tail -5 /tmp/slots_h16.log
paste -d' ' <(grep -E "^\| 1x" "$OUT/slots_a.md") <(grep -E "^\| 1x" "$OUT/slots_b.md" | cut -d'|' -f5,6)
grep -E "^\| 1x" "$OUT/slots_h16.md"
echo "$((SECONDS-t0)) s"
