#!/usr/bin/env bash
# Run 161: issue 42's numerics contract on hard inputs (ours, FLA, FlashInfer against the fp64 oracle)
# and its first go/no-go measurement: stage 1's inverse merges in one TF32 pass (branch
# stage1-tf32x1, objects in build/aot_x1) against three (main, build/aot), numerics and time.
# FlashInfer travels in three parts over consecutive calls (phases 1-3); phase 4 while still up.
#   1: part 1; the hard-input GPU tests on main, FLA installed; main's hard table (gdn, FLA)
#   2: part 2; the one-pass build's hard table (gdn, FLA) and its hard-input tests
#   3: part 3 (FlashInfer installed); main's hard table with FlashInfer; stage 1 timed, main / x1 / main
#   4: the many-sequences 128K x 4 row beside the peers (one rotation set: the memory share)
set -u
phase=${1:-1}
source tools/device_lib.sh
hard() { step "hard_$1" "$2" python3 benchmarks/numerics_hard.py --impls "$3" --md "$OUT/hard_$1.md" --json "$OUT/hard_$1.json"
         grep "^|" "$OUT/hard_$1.md" || tail -5 "$OUT/hard_$1.log"; }
timing() {   # stage 1 alone (bench_segments' recompute_wu column) and the whole prefill at 16/32
  step "seg_$1" 120 python3 benchmarks/bench_segments.py --shapes 1x32K --heads 4/8 --segments 8 --md "$OUT/seg_$1.md"
  grep -E "^\| 1x32K \| 4/8 \| segmented \| 8 x 64" "$OUT/seg_$1.md" || tail -3 "$OUT/seg_$1.log"
  pre "pre_$1"
}
case $phase in
1) bash .peer1/stage.sh; inst build/aot main
   step tests 240 python3 -m pytest -m gpu tests/test_numerics_hard.py -q -p no:cacheprovider -rs
   tail -4 "$OUT/tests.log"
   hard main_fla 200 gdn:wgmma,fla ;;
2) bash .peer2/stage.sh; inst build/aot_x1 x1
   hard x1_fla 200 gdn:wgmma,fla
   step tests_x1 240 python3 -m pytest -m gpu tests/test_numerics_hard.py -q -p no:cacheprovider
   tail -4 "$OUT/tests_x1.log" ;;
3) bash .peer3/install_peers.sh | tail -2; peers
   inst build/aot main
   hard main_all 240 gdn:wgmma,fla,flashinfer
   timing main1; inst build/aot_x1 x1; timing x1; inst build/aot main; timing main2 ;;
4) peers; python3 -c "import gdn_prefill._ext" 2>/dev/null || inst build/aot main
   step many128k 400 python3 benchmarks/bench_prefill.py --heads 2/4 --shapes 128Kx4 --impls gdn:wgmma,fla,flashinfer \
     --modes graph --no-progress --no-plot --no-host-overhead --warm-s 0.5 --rep-budget-s 0.25 --max-reps 20 \
     --out "$OUT/many128k" --tag prefill
   grep -E "^\| " "$OUT/many128k/prefill.md" | head -8 || tail -5 "$OUT/many128k.log" ;;
esac
