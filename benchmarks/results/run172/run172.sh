#!/usr/bin/env bash
# Run 172 (prepared in session 33; branch fused-diag, objects build/aot_fd rebuilt from it): where
# the fused kernel's warps stall, per role.  ncu's warp-state sampling on one launch at 1x8K 4/8
# (8 CTAs, one per SM, 128 chunks each) of the fused build and of its two diagnostic builds, split
# by tools/ncu_hot.py --sections at each warpgroup's setmaxnreg (I/O 48, role 112, chains 176).
# Question: which stall reasons grow in the role's and the chains' code when both run (4.2 us a
# chunk) against each alone (3.0, 2.8; run 171)?  Prediction: shared-memory pressure (mio_throttle,
# short_scoreboard) and the tensor pipe (math_pipe_throttle / wgmma waits) grow in both; the role's
# barrier stalls grow most (its phases wait for its slowest warp).
set -u
source tools/device_lib.sh
inst build/aot_fd fd
for b in fused fused_prefill_diag_role_betabf16_kv fused_prefill_diag_chains_betabf16_kv; do
  tag=${b#fused_prefill_diag_}; tag=${tag%_betabf16_kv}
  step "ncu_$tag" 150 ncu --clock-control none --set full --import-source no -k regex:Fused -c 1 -o "/tmp/rep_$tag" \
    python3 benchmarks/bench_fused.py --shapes 1x8K --heads 4/8 --profile "$b"
  ncu -i "/tmp/rep_$tag.ncu-rep" --page source --csv --print-source sass > "/tmp/src_$tag.csv" 2>/dev/null
  ncu -i "/tmp/rep_$tag.ncu-rep" --page details --csv > "$OUT/details_$tag.csv" 2>/dev/null
  python3 tools/ncu_hot.py "/tmp/src_$tag.csv" --top 25 --sections > "$OUT/hot_$tag.txt" 2>&1
  echo "== $tag"; grep -A6 "per setmaxnreg section" "$OUT/hot_$tag.txt"
done
echo "total $((SECONDS - T0)) s"
