#!/usr/bin/env bash
# run 127: spine_rs' chunk schedule (branch spine-rs-sched: G4 one chunk later, behind G1; Y^T without
# a select, the V rows >= L zeroed; packed conversions) against main, one call: bit-for-bit outputs of
# both builds, the GPU suite on the branch, the spine alone (wgmma-o) and the whole prefill, alternated.
#   carry: build/aot build/aot_sched build/run127.sh
set -u
t0=$SECONDS
source tools/device_lib.sh
export SHAPES=1x8K,1x64K,8x4K,32x2K,varlen16
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
spine() {  # tag
  timeout -s KILL 120 python3 benchmarks/bench_spine.py --spines wgmma-o --md "$OUT/spine_$1.md" >/tmp/spine_$1.log 2>&1 \
    || { echo "spine $1 failed"; tail -5 /tmp/spine_$1.log; }
  grep -E "^\| wgmma-o" "$OUT/spine_$1.md" | awk -F'|' -v t=$1 '{print t, $0}' | tee -a "$OUT/spine_ab.txt"
}
inst build/aot main
timeout -s KILL 90 python3 tools/bitwise_outputs.py --save /tmp/main.pt 2>&1 | tail -1
spine main
pre main_a
echo "$((SECONDS-t0)) s"
inst build/aot_sched sched
timeout -s KILL 90 python3 tools/bitwise_outputs.py --save /tmp/sched.pt 2>&1 | tail -1
python3 tools/bitwise_outputs.py --compare /tmp/main.pt /tmp/sched.pt > "$OUT/bitwise.txt" 2>&1; echo "bitwise rc=$?"; tail -1 "$OUT/bitwise.txt"
timeout -s KILL 220 python3 -m pytest -m gpu tests -q -p no:cacheprovider >"$OUT/gpu_suite.txt" 2>&1; tail -1 "$OUT/gpu_suite.txt"
grep -E "(FAILED|ERROR)" "$OUT/gpu_suite.txt" | head -5
echo "$((SECONDS-t0)) s"
spine sched
pre sched_a
inst build/aot main; pre main_b; spine main2
inst build/aot_sched sched; pre sched_b
echo "$((SECONDS-t0)) s"
echo "== summary"; cat "$OUT/prefill_ab.txt"; cat "$OUT/bitwise.txt"
