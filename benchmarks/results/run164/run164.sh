#!/usr/bin/env bash
# Run 164 (session 30): the unfused plan's beta on its V tile (objects build/aot_unf: main's fused
# builds byte-identical, the four unfused stage-1 builds changed), and the time of session 29's beta
# fix (build/aot_x1: main at 468aaf3, before beta moved out of Tu in both plans).
#   1: the whole GPU suite on build/aot_unf (FLA carried: the hard-input tests now cover the unfused
#      plan, aligned and misaligned), then the hard table with the unfused plan (gdn:scalar) beside FLA
#   2: time, x1 / unf / x1 in one call: 16/32 prefill (fused plan), the segmented rows at 2/4 and 4/8,
#      and the unfused plan (gdn:wgmma-4k) at 8x4K and 1x8K
#   3: the many-sequences 128K x 4 row (gdn, FLA) with bench_prefill's memory cap
#   4: phase 2 showed 1 x 8192 16/32 +5 % from the beta fix: the loader reordered (build/aot_rd: the
#      next chunk's row data loaded before the wait on beta's ring), time rd / unf / rd
#   5: the whole GPU suite and the hard table on build/aot_rd (not run: phase 4 refuted the reorder)
#   6: beta applied to V^T under G1 instead of to Y after it (build/aot_bv: V' = bf16(V^T diag(beta)),
#      the table's a column holds a beta): its hard table beside FLA, then time bv / unf / bv
#   7: a and beta as pairs in the two-deep ring (build/aot_pr: the table loses its a column; the
#      loop's coefficient loads 32 LDS.64 -> 8 LDS.128 + 16 LDS.64): bits against unf
#      (tools/bitwise_outputs.py), the segmented plan's hard-input tests, time pr / unf / pr
set -u
phase=${1:-1}
source tools/device_lib.sh
segrows() {   # the segmented rows (bench_prefill's plan at 1x8K, 1x32K, 2/4 and 4/8), one line to prefill_ab.txt
  timeout -s KILL 90 python3 benchmarks/bench_prefill.py --shapes 1x8K,1x32K --heads 2/4,4/8 --modes graph \
    --no-progress --no-plot --no-host-overhead --impls gdn:wgmma --out "/tmp/seg_$1" --tag prefill >"/tmp/seg_$1.log" 2>&1
  echo "seg_$1: $(grep -E "^\| 1x" "/tmp/seg_$1/prefill.md" | awk -F'|' '{printf "%s %s %s, ", $2, $3, $6}')" | tee -a "$OUT/prefill_ab.txt"
  cat "/tmp/seg_$1/prefill.md" >> "$OUT/prefill_tables.md" 2>/dev/null
}
timing() { pre "pre_$1"; SHAPES=8x4K,1x8K pre "unf_$1" --impls gdn:wgmma-4k; segrows "$1"; }   # phase 2
fast() { pre "pre_$1"; segrows "$1"; }                                                        # phases 4, 6
case $phase in
1) inst build/aot_unf unf
   step suite 400 python3 -m pytest -m gpu tests -q -p no:cacheprovider -rfEX
   grep -E "^(FAILED|ERROR|XPASS)|passed|failed" "$OUT/suite.log" | tail -20
   step hard 140 python3 benchmarks/numerics_hard.py --impls gdn:wgmma,gdn:scalar,fla --md "$OUT/hard_unf.md" --json "$OUT/hard_unf.json"
   grep "^|" "$OUT/hard_unf.md" || tail -5 "$OUT/hard.log" ;;
2) inst build/aot_x1 x1; timing x1a; inst build/aot_unf unf; timing unf; inst build/aot_x1 x1; timing x1b
   echo "total $((SECONDS - T0)) s" ;;
4) inst build/aot_rd rd; fast rd1; inst build/aot_unf unf; fast unf; inst build/aot_rd rd; fast rd2
   echo "total $((SECONDS - T0)) s" ;;
5) inst build/aot_rd rd
   step suite_rd 400 python3 -m pytest -m gpu tests -q -p no:cacheprovider -rfEX
   grep -E "^(FAILED|ERROR|XPASS)|passed|failed" "$OUT/suite_rd.log" | tail -20
   step hard_rd 140 python3 benchmarks/numerics_hard.py --impls gdn:wgmma,gdn:scalar,fla --md "$OUT/hard_rd.md" --json "$OUT/hard_rd.json"
   grep "^|" "$OUT/hard_rd.md" || tail -5 "$OUT/hard_rd.log" ;;
6) inst build/aot_bv bv
   step hard_bv 100 python3 benchmarks/numerics_hard.py --impls gdn:wgmma,fla --md "$OUT/hard_bv.md" --json "$OUT/hard_bv.json"
   grep "^|" "$OUT/hard_bv.md" | grep -v "| fla |" || tail -5 "$OUT/hard_bv.log"
   fast bv1; inst build/aot_unf unf; fast unf; inst build/aot_bv bv; fast bv2
   echo "total $((SECONDS - T0)) s" ;;
7) fast() { SHAPES=8x4K,1x8K pre "pre_$1"; segrows "$1"; }
   inst build/aot_pr pr; step bits_pr 60 python3 tools/bitwise_outputs.py --save /tmp/pr.pt; fast pr1
   inst build/aot_unf unf; step bits_unf 60 python3 tools/bitwise_outputs.py --save /tmp/unf.pt; fast unf
   step bits_cmp 30 python3 tools/bitwise_outputs.py --compare /tmp/unf.pt /tmp/pr.pt; tail -8 "$OUT/bits_cmp.log"
   inst build/aot_pr pr; fast pr2
   step seg_tests 80 python3 -m pytest -m gpu tests/test_numerics_hard.py -k max_seqlen -q -p no:cacheprovider
   tail -2 "$OUT/seg_tests.log"; echo "total $((SECONDS - T0)) s" ;;
3) python3 -c "import gdn_prefill._ext" 2>/dev/null || inst build/aot_unf unf
   step many128k 400 python3 benchmarks/bench_prefill.py --heads 2/4 --shapes 128Kx4 --impls gdn:wgmma,fla \
     --modes graph --no-progress --no-plot --no-host-overhead --warm-s 0.5 --rep-budget-s 0.25 --max-reps 20 \
     --out "$OUT/many128k" --tag prefill
   grep -E "^\| " "$OUT/many128k/prefill.md" | head -8 || tail -5 "$OUT/many128k.log" ;;
esac
