#!/usr/bin/env bash
# Run 171 (branch fused-diag, objects build/aot_fd; then build/aot_oiv, branch out-in-v-slot).
# 1. Where the fused kernel's ~4.2 us a chunk goes (run 170: 1x8K 541 us, 8x4K 16/32 562): the
#    diagnostic builds keep every wait and arrival and skip one side's math, _diag_role the chains'
#    (the role and the I/O warps alone in the fused CTA), _diag_chains the role's.
#    Prediction: role alone ~3.0-3.4 us a chunk (run 167: 2.98-3.05 standalone), chains alone
#    ~2.7 (run 169: the dual at 176 registers, serialised, +24 % on 2.2); so the fused 4.2 is their
#    interference on one SM, not one side's pace.
# 2. Where the fused kernel wins: a sweep of batch x length at 16/32 and 4/8 against prefill().
# 3. out-in-v-slot's sync protocol checked (compute-sanitizer, the hard inputs), before it merges.
set -u
source tools/device_lib.sh
inst build/aot_fd fd
step diag 120 python3 benchmarks/bench_fused.py --shapes 1x8K,8x4K --heads 16/32,4/8 --reps 20 \
  --extra fused_prefill_diag_role_betabf16_kv,fused_prefill_diag_chains_betabf16_kv
grep -E "^\|" "$OUT/diag.log"
step sweep 170 python3 benchmarks/bench_fused.py --heads 16/32,4/8 --reps 15 \
  --shapes 2x1K,4x1K,8x1K,16x1K,32x1K,8x512,32x512,64x512,64x256,128x256,8x2K,16x2K
grep -E "^\| [0-9]" "$OUT/sweep.log"
inst build/aot_oiv oiv
step san_oiv 150 python3 -m pytest -m gpu tests/test_gpu_sanitizer.py -q -p no:cacheprovider -rfE
step hard_oiv 130 python3 -m pytest -m gpu tests/test_numerics_hard.py tests/test_fused_plan.py -q -p no:cacheprovider -rfE -k "serial or test_fused_plan"
grep -hE "passed|failed" "$OUT/san_oiv.log" "$OUT/hard_oiv.log" | sed "s/^/oiv: /"
echo "total $((SECONDS - T0)) s"
