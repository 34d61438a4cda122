#!/usr/bin/env bash
# Run 148 (session 26): issue 33 step 1 (branch issue33-intra-chunk, ic_tree/, build/aot_ic4): the
# merges in three accumulators, Q K^T issued before K K^T's fold; the test of the base and "best"
# builds; the phase table.  Then branch wu-3acc (build/aot_wu3): the same three accumulators in
# recompute_wu, today's stage 1, A/B against main's objects (build/aot) and its numerics.
set -u
t0=$SECONDS
source tools/device_lib.sh
( cd ic_tree && mkdir -p build && ln -sfn ../../build/aot_ic4 build/aot_ic4
  inst build/aot_ic4 ic
  timeout -s KILL 60 python3 -m pytest -m gpu tests/test_gpu_prefill.py -q -p no:cacheprovider -k intra_chunk > "$OUT/ic_test.log" 2>&1
  echo "ic test rc=$? at $((SECONDS - t0)) s: $(tail -1 "$OUT/ic_test.log")"; grep -E "^(FAILED|E  )" "$OUT/ic_test.log" | head -10
  timeout -s KILL 100 python3 benchmarks/bench_intra_chunk.py --phases --shapes 1x8K,8x4K > "$OUT/ic_phases.log" 2>&1
  echo "ic phases rc=$? at $((SECONDS - t0)) s"; grep "^| [0-9]" "$OUT/ic_phases.log"; tail -2 "$OUT/ic_phases.log" )
export SHAPES=8x4K,32x2K,1x8K,1x64K
for tag in main wu3 main wu3; do
  case $tag in main) inst build/aot main ;; wu3) inst build/aot_wu3 wu3 ;; esac
  pre $tag
  [ $((SECONDS - t0)) -gt 400 ] && { echo "time up at $((SECONDS - t0)) s"; break; }
done
inst build/aot_wu3 wu3; num wu3
echo "done at $((SECONDS - t0)) s"
