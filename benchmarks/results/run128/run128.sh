#!/usr/bin/env bash
# run 128: (1) the next chunk's full-barrier wait hoisted under G3 (build/aot_sched2) against run 127's
# schedule (build/aot_sched): bit-for-bit outputs, GPU suite, the spine alone; (2) the overlap plan's
# split re-swept on the faster spine, stage 1's second part at two CTAs per SM (aot_sched2) and at
# three (aot_sched2_o3: recompute_wu.OVERLAP_CTAS_PER_SM = 3, the spine objects identical).
#   carry: build/aot_sched build/aot_sched2 build/aot_sched2_o3 build/run128.sh
set -u
t0=$SECONDS
source tools/device_lib.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
spine() {  # tag
  timeout -s KILL 120 python3 benchmarks/bench_spine.py --spines wgmma-o --md "$OUT/spine_$1.md" >/tmp/spine_$1.log 2>&1 \
    || { echo "spine $1 failed"; tail -5 /tmp/spine_$1.log; }
  grep -E "^\| wgmma-o" "$OUT/spine_$1.md" | awk -F'|' -v t=$1 '{print t, $4, $5, $7, $8}' | tee -a "$OUT/spine_ab.txt"
}
sweep() {  # tag
  timeout -s KILL 200 python3 benchmarks/bench_overlap.py --shapes 1x4K,1x8K,1x16K,1x64K --heads 16/32 \
    --pcts 10,15,20,25,30 --md "$OUT/overlap_$1.md" >/tmp/overlap_$1.log 2>&1 || { echo "sweep $1 failed"; tail -5 /tmp/overlap_$1.log; }
  echo "== $1"; grep -E "^\| 1x" "$OUT/overlap_$1.md"
}
inst build/aot_sched sched
timeout -s KILL 90 python3 tools/bitwise_outputs.py --save /tmp/sched.pt 2>&1 | tail -1
spine sched
inst build/aot_sched2 sched2
timeout -s KILL 90 python3 tools/bitwise_outputs.py --save /tmp/sched2.pt 2>&1 | tail -1
python3 tools/bitwise_outputs.py --compare /tmp/sched.pt /tmp/sched2.pt > "$OUT/bitwise.txt" 2>&1; echo "bitwise rc=$?"; tail -1 "$OUT/bitwise.txt"
timeout -s KILL 220 python3 -m pytest -m gpu tests -q -p no:cacheprovider >"$OUT/gpu_suite.txt" 2>&1; tail -1 "$OUT/gpu_suite.txt"
grep -E "(FAILED|ERROR)" "$OUT/gpu_suite.txt" | head -5
spine sched2
echo "$((SECONDS-t0)) s"
sweep sched2
echo "$((SECONDS-t0)) s"
inst build/aot_sched2_o3 o3
sweep o3
echo "$((SECONDS-t0)) s"
