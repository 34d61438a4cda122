#!/usr/bin/env bash
# Run 165 (session 31; tree: branch fused-intra; objects carried: build/aot_ic = the branch,
# build/aot = main 676b9a5, build/aot_pr = branch beta-pairs-ring).
#   1: issue 42's go / no-go, the one-warpgroup stage 1 (cute_kernels/intra_chunk.py): its GPU tests
#      (each build alone over stage 1's workspace, then the spine against the oracle) and the µs per
#      chunk.  Prediction (NOTES, session 30): 3.2-3.6 µs per chunk at one CTA per SM (1x8K, 1x64K),
#      the intra_chunk_smem build 0.1-0.3 µs below intra_chunk; the _pipe builds ~0.4-0.6 µs below
#      theirs; _r4 (96 registers) within 0.2 µs of intra_chunk_smem_pipe.  > 2.8 µs means the folds
#      must leave the role before the chains join it.
#   2: a and beta as pairs in the two-deep ring (build/aot_pr): bits against main, the segmented
#      plan's hard-input tests, time pr / main / pr.  Prediction: 1x8K 16/32 -0.5 to -1.5 %, the
#      segmented rows -0.5 to -2 %, bits identical.
#   4: after phase 1 (the role 3.84-3.97 µs per chunk, not 3.2-3.6; the no-l2norm path left rk, rq
#      unwritten, which the rewritten test caught): the tests again, the time with the norms in the
#      kernel, and ncu's stall samples of intra_chunk_smem per phase (between its named barriers);
#      a sixth build, intra_chunk_smem_lg: the gates (g, beta loads, the scan) on the load warp
#      through a second ring (PipelineAsync), so the role never waits on a global load.  Prediction:
#      0.3-0.5 µs per chunk below intra_chunk_smem (an LDG's latency and warp 0's scan per chunk)
#   3: the many-sequences 128K x 4 row (gdn, FLA) with bench_prefill's memory cap (main's objects)
set -u
phase=${1:-1}
source tools/device_lib.sh
fast() { SHAPES=8x4K,1x8K pre "pre_$1"; segrows "$1"; }
case $phase in
1) inst build/aot_ic ic
   step ic_tests 240 python3 -m pytest tests/test_intra_chunk.py -q -p no:cacheprovider -rfE
   grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/ic_tests.log" | tail -12
   step ic_bench 200 python3 benchmarks/bench_intra_chunk.py --shapes 1x8K,1x64K,8x4K --heads 16/32
   cat "$OUT/ic_bench.log"; echo "total $((SECONDS - T0)) s" ;;
2) inst build/aot_pr pr; step bits_pr 60 python3 tools/bitwise_outputs.py --save /tmp/pr.pt; fast pr1
   inst build/aot main; step bits_main 60 python3 tools/bitwise_outputs.py --save /tmp/main.pt; fast main
   step bits_cmp 30 python3 tools/bitwise_outputs.py --compare /tmp/main.pt /tmp/pr.pt; tail -8 "$OUT/bits_cmp.log"
   inst build/aot_pr pr; fast pr2
   step seg_tests 80 python3 -m pytest -m gpu tests/test_numerics_hard.py -k max_seqlen -q -p no:cacheprovider
   tail -2 "$OUT/seg_tests.log"; echo "total $((SECONDS - T0)) s" ;;
4) inst build/aot_ic ic
   step ic_tests 240 python3 -m pytest tests/test_intra_chunk.py -q -p no:cacheprovider -rfE
   grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/ic_tests.log" | tail -12
   step ic_bench 200 python3 benchmarks/bench_intra_chunk.py --shapes 1x8K,1x64K --heads 16/32
   cat "$OUT/ic_bench.log"
   step ic_bench_l2 200 python3 benchmarks/bench_intra_chunk.py --shapes 1x8K,8x4K --heads 16/32 --l2norm
   cat "$OUT/ic_bench_l2.log"
   for b in intra_chunk_smem intra_chunk_smem_lg; do
     timeout -s KILL 150 ncu --clock-control none --set full --import-source no -k regex:intra -c 1 -o "/tmp/ncu_$b" \
       python3 benchmarks/bench_intra_chunk.py --profile $b --shapes 1x8K --l2norm >"$OUT/ncu_$b.log" 2>&1
     ncu -i "/tmp/ncu_$b.ncu-rep" --page source --csv --print-source sass >"$OUT/ncu_${b}_source.csv" 2>/dev/null
     ncu -i "/tmp/ncu_$b.ncu-rep" --page details >"$OUT/ncu_${b}_details.txt" 2>&1
     echo "== $b"; grep -E "^ +Duration|Registers Per|Warp Cycles Per Issued|Issue Slots Busy" "$OUT/ncu_${b}_details.txt"
     python3 tools/ncu_hot.py "$OUT/ncu_${b}_source.csv" --top 30 --phases --cubin build/aot_ic/cubin/$b/*.cubin \
       >"$OUT/ncu_${b}_hot.txt" 2>&1; grep -A40 "segment" "$OUT/ncu_${b}_hot.txt" | head -45
   done; echo "total $((SECONDS - T0)) s" ;;
3) python3 -c "import gdn_prefill._ext" 2>/dev/null || inst build/aot main
   many128k ;;
esac
