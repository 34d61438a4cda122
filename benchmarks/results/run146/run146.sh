#!/usr/bin/env bash
# Run 146 (session 26): main with branch unfused-ck-segments merged (run 145's A/B: the unfused plan's
# spines with their chunks in segments win at 1x8K and 8x4K): the whole GPU suite on its objects;
# context parallelism's third pass instead of the fix-up (emulated ranks, 1 M tokens); then issue 33
# step 1 on branch issue33-intra-chunk (ic_tree/, objects build/aot_ic2): its GPU test with the
# beta-bf16 build, and where one warpgroup's 5.4 us per chunk goes (experiment builds that leave
# phases out; "fused_io" leaves out only what a fused kernel would not do: P, Tu to HBM).
set -u
t0=$SECONDS
source tools/device_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
inst build/aot main
timeout -s KILL 240 python3 -m pytest -m gpu tests -q -s -p no:cacheprovider > "$OUT/gpu_suite.log" 2>&1
echo "suite rc=$? at $((SECONDS - t0)) s: $(tail -1 "$OUT/gpu_suite.log")"; grep -E "^(FAILED|ERROR)" "$OUT/gpu_suite.log" | head
grep "context parallel emulated" "$OUT/gpu_suite.log"
timeout -s KILL 100 python3 benchmarks/bench_context_parallel.py --emulate 2 --tokens 1M --md "$OUT/cp_emulate2.md" > "$OUT/cp_emulate2.log" 2>&1
echo "cp emulate rc=$? at $((SECONDS - t0)) s"; grep "^| [0-9]" "$OUT/cp_emulate2.md"; tail -2 "$OUT/cp_emulate2.log"
cd ic_tree && mkdir -p build && ln -sfn ../../build/aot_ic2 build/aot_ic2
inst build/aot_ic2 ic
echo "ic installed at $((SECONDS - t0)) s"
timeout -s KILL 60 python3 -m pytest -m gpu tests/test_gpu_prefill.py -q -p no:cacheprovider -k intra_chunk > "$OUT/ic_test.log" 2>&1
echo "ic test rc=$? at $((SECONDS - t0)) s: $(tail -1 "$OUT/ic_test.log")"; grep -E "^(FAILED|E  )" "$OUT/ic_test.log" | head -10
timeout -s KILL 120 python3 benchmarks/bench_intra_chunk.py --phases --shapes 1x8K,8x4K > "$OUT/ic_phases.log" 2>&1
echo "ic phases rc=$? at $((SECONDS - t0)) s"; grep "^| [0-9]" "$OUT/ic_phases.log"; tail -2 "$OUT/ic_phases.log"
