#!/usr/bin/env bash
# Run 147 (session 26): issue 33 step 1, branch issue33-intra-chunk (ic_tree/, objects build/aot_ic3):
# g and beta read a chunk ahead; the test again (the read-ahead changes every build) and the phase
# table with the inverse split into its diagonal blocks and its merges.
set -u
t0=$SECONDS
source tools/device_lib.sh
cd ic_tree && mkdir -p build && ln -sfn ../../build/aot_ic3 build/aot_ic3
inst build/aot_ic3 ic
echo "installed at $((SECONDS - t0)) s"
timeout -s KILL 60 python3 -m pytest -m gpu tests/test_gpu_prefill.py -q -p no:cacheprovider -k intra_chunk > "$OUT/ic_test.log" 2>&1
echo "ic test rc=$? at $((SECONDS - t0)) s: $(tail -1 "$OUT/ic_test.log")"; grep -E "^(FAILED|E  )" "$OUT/ic_test.log" | head -10
timeout -s KILL 120 python3 benchmarks/bench_intra_chunk.py --phases --shapes 1x8K,8x4K > "$OUT/ic_phases.log" 2>&1
echo "ic phases rc=$? at $((SECONDS - t0)) s"; grep "^| [0-9]" "$OUT/ic_phases.log"; tail -2 "$OUT/ic_phases.log"
