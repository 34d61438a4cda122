#!/usr/bin/env bash
# Run 175 (session 34; main, objects build/aot_fp: its kernels are this tree's, byte for byte): the
# hard-input table with the single plan forced (gdn:wgmma-single) beside prefill()'s plan and FLA
# 0.6.0, against the fp64 oracle.  Prediction: the single plan's errors within 1.05x FLA's on every
# kind (the test suite's contract; run 174 passed it), and within a few % of gdn:wgmma's (the same
# math, another summation order in the norms).
set -u
source tools/device_lib.sh
inst build/aot_fp fp
step hard 240 python3 benchmarks/numerics_hard.py --impls gdn:wgmma,gdn:wgmma-single,fla --md "$OUT/hard.md" \
  --json "$OUT/hard.json"
grep "^|" "$OUT/hard.md" || tail -5 "$OUT/hard.log"
echo "total $((SECONDS - T0)) s"
