#!/usr/bin/env bash
# Run 174 (session 34; branch fused-plan, objects build/aot_fp from it): the single plan in prefill().
# The fused kernel keeps run 173's 176 / 128 / 32 split (SASS identical to its r176 build); prefill()
# runs it by the rule (gdn_abi.h GDN_SINGLE_*).  FlashInfer travels in three parts (phases 2-4; a
# part and the objects together exceed one transfer, and the installed build stays on the machine).
#   1: the objects (build/aot_fp) and FLA; smoke; the whole GPU suite (the single plan's rows,
#      prefill() taking it by its rule)
#   2: part 1; compute-sanitizer and the hard inputs
#   3: part 2; bench_fused (single against two-launch, and prefill()'s pick)
#   4: part 3, FlashInfer installed; the README's rows, ours beside FLA and FlashInfer, graph and eager
# Predictions: prefill() picks the single plan at 4x2K 16/32 and 16x512 4/8 only among the README's
# rows: 4x2K 16/32 158-167 -> ~149 us, 16x512 4/8 50.8 -> ~46 us (FlashInfer 106.5 and 36.5 in
# run 156/159); every other row within 2 % of its plan's earlier time; the suite passes.
set -u
phase=${1:-1}
source tools/device_lib.sh
common="--impls gdn:wgmma,fla,flashinfer --no-progress --no-plot --warm-s 0.5 --rep-budget-s 0.25 --max-reps 60"
case $phase in
1) inst build/aot_fp fp
   step smoke 60 python3 benchmarks/bench_fused.py --smoke; tail -3 "$OUT/smoke.log"
   grep -q "err o" "$OUT/smoke.log" || exit 0
   step suite 420 python3 -m pytest -m gpu tests -q -p no:cacheprovider -rfEX
   grep -E "^(FAILED|ERROR|XPASS)|passed|failed" "$OUT/suite.log" | tail -12
   echo "total $((SECONDS - T0)) s" ;;
2) bash .peer1/stage.sh
   step san 200 python3 -m pytest -m gpu tests/test_gpu_sanitizer.py -q -p no:cacheprovider -rfE
   step hard 150 python3 -m pytest -m gpu tests/test_numerics_hard.py -k single -q -p no:cacheprovider -rfE
   grep -hE "^(FAILED|ERROR)|passed|failed" "$OUT/san.log" "$OUT/hard.log" | tail -6
   echo "total $((SECONDS - T0)) s" ;;
3) bash .peer2/stage.sh
   step bench 200 python3 benchmarks/bench_fused.py --reps 20 --shapes 8x4K,4x2K,16x512,8x2K,8x512,4x1K,16x1K,32x512
   grep -E "^\|" "$OUT/bench.log"
   echo "total $((SECONDS - T0)) s" ;;
4) bash .peer3/install_peers.sh | tail -2; peers
   step full 330 python3 benchmarks/bench_prefill.py --heads 16/32 --shapes 1x1K,1x8K,4x2K,16x512,8x4K,32x2K,varlen16 \
     $common --modes graph,eager --out "$OUT/full" --tag prefill --no-host-overhead
   grep -E "^\| " "$OUT/full/prefill.md" | head -12
   step few 200 python3 benchmarks/bench_prefill.py --heads 4/8 --shapes 4x2K,16x512,8x4K \
     $common --modes graph,eager --out "$OUT/few" --tag prefill --no-host-overhead
   grep -E "^\| " "$OUT/few/prefill.md" | head -8
   echo "total $((SECONDS - T0)) s" ;;
esac
