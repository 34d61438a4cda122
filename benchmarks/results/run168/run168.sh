#!/usr/bin/env bash
# Run 168 (prepared in session 32, not run; tree: main; objects carried: build/aot = main,
# build/aot_rss = branch chain-rs-smem (results/run167/chain-rs-smem.patch), built from it).
# rS in shared memory: bf16(S^T) staged by stmatrix (a fence, the warpgroup's named barrier) as the A
# operand of G1 and G2, instead of 32 registers.  It brings the dual chains' spill-free register floor
# from 208 to 176, which makes a 512-thread fused CTA fit (NOTES, session 32).  What it costs the chain:
# the prototype's dual and maps builds no longer fit their shared memory, so only the rows where the
# plan picks the solo build are timed (explain(): 1x8K, 1x32K at 16/32, 4x2K at 4/8), and the bits of
# the solo and pair builds are compared (the same bf16 values reach the same MMAs: identical expected).
# Prediction: +3-8 % on those rows (~50-100 ns per chunk on a ~1.4 us chain).
set -u
source tools/device_lib.sh
rows() { SHAPES=1x8K,1x32K pre "$1"; SHAPES=4x2K pre "$1_48" --heads 4/8; }
inst build/aot_rss rss; step bits_rss 90 python3 tools/bitwise_outputs.py --save /tmp/rss.pt --runs solo,pair; rows rss1
inst build/aot main; step bits_main 90 python3 tools/bitwise_outputs.py --save /tmp/main.pt --runs solo,pair; rows main
step bits_cmp 30 python3 tools/bitwise_outputs.py --compare /tmp/main.pt /tmp/rss.pt; tail -4 "$OUT/bits_cmp.log"
inst build/aot_rss rss; rows rss2
cat "$OUT/prefill_ab.txt"; echo "total $((SECONDS - T0)) s"
