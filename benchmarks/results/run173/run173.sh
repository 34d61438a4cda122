#!/usr/bin/env bash
# Run 173 (prepared in session 33; tree: branch fused-fi; objects build/aot_ffi from it).
# FlashInfer's register split for the fused kernel: chains 192 with the wgmma pipeline, role 104
# (4 spilled words), I/O 24 (the fused_prefill_* builds), against the same code at 176 / 120 / 40
# (fused_prefill_r176_betabf16_kv: the chains serialised as in fused-kernel, spill-free), one
# build, one process, each beside prefill().
# phase 1: smoke under a timeout, the suite's fused rows (the norms' new summation order and the
# chains' own partial-chunk stores are new code), then the two splits.
# Prediction: the chains' serialisation cost (+24 % on the dual's chunk, run 169) comes off their
# side; with the interference kept, a chunk 4.2 -> 3.7-3.9 us: 8x4K 16/32 562 -> 490-520 us,
# 1x8K 541 -> 470-500.  The role's 4 spills cost < 1 %.
# phase 2: compute-sanitizer and the hard inputs on fused-fi.
set -u
phase=${1:-1}
source tools/device_lib.sh
case $phase in
1) inst build/aot_ffi ffi
   step smoke 60 python3 benchmarks/bench_fused.py --smoke --extra fused_prefill_r176_betabf16_kv
   tail -6 "$OUT/smoke.log"
   grep -q "err o" "$OUT/smoke.log" || exit 0
   step suite 240 python3 -m pytest -m gpu tests/test_gpu_prefill.py -k fused -q -p no:cacheprovider -rfE -x
   grep -hE "^(FAILED|ERROR)|passed|failed" "$OUT/suite.log" | tail -4
   step bench 150 python3 benchmarks/bench_fused.py --heads 16/32,4/8 --reps 20 \
     --shapes 8x4K,32x2K,4x2K,16x512,1x8K --extra fused_prefill_r176_betabf16_kv
   grep -E "^\|" "$OUT/bench.log"
   echo "total $((SECONDS - T0)) s" ;;
2) inst build/aot_ffi ffi
   step san 200 python3 -m pytest -m gpu tests/test_gpu_sanitizer.py -q -p no:cacheprovider -rfE
   step hard 150 python3 -m pytest -m gpu tests/test_numerics_hard.py -k fused -q -p no:cacheprovider -rfE
   grep -hE "^(FAILED|ERROR)|passed|failed" "$OUT/san.log" "$OUT/hard.log" | tail -6
   echo "total $((SECONDS - T0)) s" ;;
esac
