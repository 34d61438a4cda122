#!/usr/bin/env bash
# Run 167b: run167.sh's intra_chunk_smem_r104 rows, which the stage hook refused (its list of build
# names did not have the new build; the hook now takes any intra_chunk build the objects hold).
# Prediction (run167.sh): within 0.15 us per chunk of intra_chunk_smem.
set -u
source tools/device_lib.sh
inst build/aot_ic5 ic5
step ic_tests 60 python3 -m pytest tests/test_intra_chunk.py -q -p no:cacheprovider -rfE -k r104
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/ic_tests.log" | tail -4
step ic5 60 python3 benchmarks/bench_intra_chunk.py --shapes 1x8K,1x64K --heads 16/32
step ic5_l2 40 python3 benchmarks/bench_intra_chunk.py --shapes 1x8K --heads 16/32 --l2norm
grep -E "^\| 1x" "$OUT/ic5.log" "$OUT/ic5_l2.log" | sed 's/.*log://'; echo "total $((SECONDS - T0)) s"
