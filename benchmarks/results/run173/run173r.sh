#!/usr/bin/env bash
# Run 173r: after _slot's removal, the two splits once more with the session's last ~180 s: no
# smoke (bench_fused's out / state differences against prefill() say whether the outputs are
# right: ~1e-5 when they are, ~1 as in run 173q when not), two rows.
set -u
source tools/device_lib.sh
inst build/aot_ffi ffi
step bench 80 python3 benchmarks/bench_fused.py --heads 16/32 --reps 10 --shapes 8x4K,1x8K \
  --extra fused_prefill_r176_betabf16_kv
grep -E "^\|" "$OUT/bench.log"
echo "total $((SECONDS - T0)) s"
