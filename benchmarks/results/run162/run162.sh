#!/usr/bin/env bash
# Run 162: the final build (stage 1's merges in one TF32 pass; objects byte-identical to run 161's
# build/aot_x1): the whole GPU suite with FLA installed (the hard-input tests among it).
set -u
source tools/device_lib.sh
inst build/aot run162
T0=$SECONDS
timeout -s KILL 400 python3 -m pytest -m gpu tests -q -p no:cacheprovider -rfs >"$OUT/gpu_suite.log" 2>&1
echo "gpu_suite: rc=$? at $((SECONDS - T0)) s"
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/gpu_suite.log" | tail -15
# the many-sequences 128K x 4 row with dense states (one rotation set now fits: the memory share), FLA beside
timeout -s KILL 160 python3 benchmarks/bench_prefill.py --heads 2/4 --shapes 128Kx4 --impls gdn:wgmma,fla --modes graph \
  --no-progress --no-plot --no-host-overhead --warm-s 0.5 --rep-budget-s 0.25 --max-reps 20 --out "$OUT/many128k" \
  --tag prefill >"$OUT/many128k.log" 2>&1
echo "many128k: rc=$? at $((SECONDS - T0)) s"
grep -E "^\| " "$OUT/many128k/prefill.md" | head -6 || tail -5 "$OUT/many128k.log"
