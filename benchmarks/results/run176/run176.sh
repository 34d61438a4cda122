#!/usr/bin/env bash
# Run 176 (session 34; main, objects build/aot_fp, byte for byte this tree's kernels): the single
# plan under the soak (soak_streams.py now passes max_seqlen, as an engine does, so prefill() takes
# the single plan at 4 x 2048, 16/32): two streams and four threads, every call bit for bit against
# one stream.  Prediction: no hang, no mismatch (the kernel reads no workspace and no CTA waits for
# another).
set -u
source tools/device_lib.sh
inst build/aot_fp fp
step soak 170 python3 benchmarks/soak_streams.py --impls gdn --shape 4x2048 --heads 16/32 --runs 2 --iters 30 \
  --md "$OUT/soak.md" --json "$OUT/soak.json"
grep "^|" "$OUT/soak.md" || tail -8 "$OUT/soak.log"
echo "total $((SECONDS - T0)) s"
