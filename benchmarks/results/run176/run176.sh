#!/usr/bin/env bash
# Run 176 (session 34; main, objects build/aot_fp, byte for byte this tree's kernels): the single
# plan under the soak (soak_streams.py now passes max_seqlen, as an engine does, so prefill() takes
# the single plan at 4 x 2048, 16/32): two streams and four threads, every call bit for bit against
# one stream.  Prediction: no hang, no mismatch (the kernel reads no workspace and no CTA waits for
# another).  Then one row of bench_fused and bench_spine through bench.one_call_graph (moved
# there after run 174; prediction: bench_fused's 4x2K 16/32 within 2 % of run 174's 164.3 / 149.5).
set -u
source tools/device_lib.sh
inst build/aot_fp fp
step soak 170 python3 benchmarks/soak_streams.py --impls gdn --shape 4x2048 --heads 16/32 --runs 2 --iters 30 \
  --md "$OUT/soak.md" --json "$OUT/soak.json"
grep "^|" "$OUT/soak.md" || tail -8 "$OUT/soak.log"
# bench.one_call_graph (bench_fused's and bench_spine's timing, moved after run 174): one row each
step fused 60 python3 benchmarks/bench_fused.py --shapes 4x2K --heads 16/32 --reps 10; grep "^|" "$OUT/fused.log"
step spine 90 python3 benchmarks/bench_spine.py --quick; tail -6 "$OUT/spine.log"
echo "total $((SECONDS - T0)) s"
