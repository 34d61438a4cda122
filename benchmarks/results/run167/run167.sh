#!/usr/bin/env bash
# Run 167 (session 32; tree: branch fused-intra; objects carried: build/aot_ic5 = the branch now,
# build/aot_ic3 = run 166's builds).
# After run 166 (intra_chunk_smem 2.98-3.02 us per chunk, 3.38 with l2norm; 160 registers, while a
# fused CTA could give the role 104): the CTA becomes the role's warpgroup and the fused kernel's
# I/O warpgroup (load warp, two norm warps, one idle), the norms leave the role for the norm warps
# (through the gate ring), and intra_chunk_smem_r104 holds the role to 104 registers by setmaxnreg
# (ptxas: 129 -> 96 used in the role's region, no local memory).
# Predictions: intra_chunk_smem without l2norm within 0.1 us of run 166's (2.9-3.1); with l2norm
# within 0.15 of its own no-l2norm time (the norms off the role: 3.38 -> 3.0-3.2);
# intra_chunk_smem_r104 within 0.15 us of intra_chunk_smem.
# Then the chains at 208 registers (build/aot_c208 = main ccc0594 with DUAL_CHAIN_REGS = 208, the
# lowest without local memory; build/aot_m = main ccc0594), A / B / A on the rows the dual build
# runs (8x4K, 32x2K at 16/32).  Prediction: +0-2 % (3,352 instructions against 3,296).
set -u
source tools/device_lib.sh
inst build/aot_ic5 ic5
step ic_tests 240 python3 -m pytest tests/test_intra_chunk.py -q -p no:cacheprovider -rfE
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/ic_tests.log" | tail -12
step ic5 200 python3 benchmarks/bench_intra_chunk.py --shapes 1x8K,1x64K,8x4K --heads 16/32
step ic5_l2 200 python3 benchmarks/bench_intra_chunk.py --shapes 1x8K,8x4K --heads 16/32 --l2norm
inst build/aot_ic3 ic3
step ic3 100 python3 benchmarks/bench_intra_chunk.py --shapes 1x8K --heads 16/32
step ic3_l2 100 python3 benchmarks/bench_intra_chunk.py --shapes 1x8K --heads 16/32 --l2norm
inst build/aot_c208 c208; SHAPES=8x4K,32x2K pre c208a
inst build/aot_m m; SHAPES=8x4K,32x2K pre main
inst build/aot_c208 c208; SHAPES=8x4K,32x2K pre c208b
echo "== new (aot_ic5)"; grep -E "^\|" "$OUT/ic5.log" "$OUT/ic5_l2.log" | sed 's/.*log://'
echo "== run 166's (aot_ic3)"; grep -E "^\| 1x" "$OUT/ic3.log" "$OUT/ic3_l2.log" | sed 's/.*log://'
cat "$OUT/prefill_ab.txt"; echo "total $((SECONDS - T0)) s"
