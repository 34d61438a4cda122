#!/usr/bin/env bash
# Run 160: compose_f32 v6 (A_j by cp.async into a shared-memory ring two steps ahead) against v5
# (run 158: A_j in registers one step ahead, 1.29 us a step): the segmented plan's and
# distributed's tests, the segment sweep, numerics, a soak of the segmented plan; the 128K x 4
# many-sequence row with dense states (gdn alone: with the peers' copies it ran out of memory).
set -u
source tools/device_lib.sh
inst build/aot run160
T0=$SECONDS
step tests 150 python3 -m pytest -m gpu tests/test_gpu_prefill.py -q -p no:cacheprovider -k seg
tail -2 "$OUT/tests.log"
step cp_tests 120 python3 -m pytest -m gpu tests/test_distributed.py -q -p no:cacheprovider
tail -2 "$OUT/cp_tests.log"
step sweep 150 python3 benchmarks/bench_segments.py --shapes 1x8K,1x32K --heads 2/4,4/8 --segments 8,16,24,32 \
  --md "$OUT/sweep.md" --json "$OUT/sweep.json"
grep "^|" "$OUT/sweep.md" || tail -5 "$OUT/sweep.log"
step numerics 90 python3 benchmarks/numerics_plans.py --T 4096,32768 --heads 2/4 --md "$OUT/numerics.md"
grep "^|" "$OUT/numerics.md" || tail -5 "$OUT/numerics.log"
step soak 90 python3 benchmarks/soak_streams.py --impls gdn --shape 1x32768 --heads 2/4 --runs 2 --iters 30 --md "$OUT/soak.md"
grep "^|" "$OUT/soak.md" || tail -5 "$OUT/soak.log"
step many128k 120 python3 benchmarks/bench_prefill.py --heads 2/4 --shapes 128Kx4 --impls gdn:wgmma --modes graph \
  --no-progress --no-plot --no-host-overhead --warm-s 0.5 --rep-budget-s 0.25 --max-reps 20 --out "$OUT/many128k" --tag prefill
grep -E "^\| " "$OUT/many128k/prefill.md" | head -5
