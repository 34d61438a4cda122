#!/usr/bin/env bash
# Run 163: beta on Y (branch beta-on-y, objects build/aot_fold): stage 1's _pqk builds store Tm and
# beta in fp32, the fused spine scales its bracket by beta before the one rounding (the rounding
# model's prediction: the hard-input contract met on every kind).  build/aot: main (one-pass merges).
#   1: the whole GPU suite on the fold build (the two strict xfails should now pass: XPASS(strict)
#      fails them), then its hard-input table beside FLA
#   2: time, main / fold / main in one call: the segmented rows (bench_segments) and the 16/32 prefill
set -u
phase=${1:-1}
source tools/device_lib.sh
timing() {
  step "seg_$1" 150 python3 benchmarks/bench_segments.py --shapes 1x8K,1x32K --heads 2/4,4/8 --segments 8,16 --md "$OUT/seg_$1.md"
  grep -E "rule" "$OUT/seg_$1.md" || tail -3 "$OUT/seg_$1.log"
  pre "pre_$1"
}
case $phase in
1) inst build/aot_fold fold
   step suite 380 python3 -m pytest -m gpu tests -q -p no:cacheprovider -rfEX
   grep -E "^(FAILED|ERROR|XPASS)|passed|failed" "$OUT/suite.log" | tail -20
   step hard 150 python3 benchmarks/numerics_hard.py --impls gdn:wgmma,fla --md "$OUT/hard_fold.md" --json "$OUT/hard_fold.json"
   grep "^|" "$OUT/hard_fold.md" || tail -5 "$OUT/hard.log" ;;
2) inst build/aot main; timing main1; inst build/aot_fold fold; timing fold; inst build/aot main; timing main2 ;;
esac
