#!/usr/bin/env bash
# Run 165 (prepared in session 30, branch fused-intra; objects: python -m cute_kernels.aot --out build/aot_ic
# on the branch, carried): issue 42's go / no-go, the one-warpgroup stage 1 (cute_kernels/intra_chunk.py).
# Prediction (NOTES, session 30): 3.2-3.6 µs per chunk at one CTA per SM (1x8K, 1x64K), the
# intra_chunk_smem build 0.1-0.3 µs below intra_chunk; the _pipe builds (the next chunk's products
# under this chunk's inverse) ~0.4-0.6 µs below theirs (issue 33 measured the products at 0.56).
# > 2.8 µs means the folds must leave the role before the chains join it.  The capped build
# (_r4: 96 registers, no spills) within 0.2 µs of intra_chunk_smem_pipe.
set -u
source tools/device_lib.sh
inst build/aot_ic ic
step ic_tests 200 python3 -m pytest tests/test_intra_chunk.py -q -p no:cacheprovider -rfE
tail -3 "$OUT/ic_tests.log"
step ic_bench 200 python3 benchmarks/bench_intra_chunk.py --shapes 1x8K,1x64K,8x4K --heads 16/32
cat "$OUT/ic_bench.log"
