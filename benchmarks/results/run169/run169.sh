#!/usr/bin/env bash
# Run 169 (prepared in session 32, not run; tree: main; objects carried: build/aot = main,
# build/aot_oiv = branch out-in-v-slot, build/aot_cd = branch chain-diet, each built from its branch;
# their patches are in this folder).
# The chains in the fused CTA's shape, on today's plans:
#   out-in-v-slot: each chunk's output staged in the next chunk's V region, the store warp releasing
#     the slot after its store has read it (smem: solo 191,488 -> 175,104 B, dual 232,448 -> 199,680);
#   chain-diet: that + bf16(S^T) staged in shared memory as the A operand of G1 and G2 + the dual
#     chains at 176 registers (the fused CTA's budget; today 224; ptxas serialises their wgmmas there),
#     the dual at 232,448 B again.
# Predictions: bits identical to main's for both (the same bf16 values reach the same MMAs, the same
# outputs are stored).  out-in-v-slot -1 to +2 % on every row.  chain-diet +6-12 % on the dual rows
# (8x4K, 32x2K, varlen16) and +2-6 % on the solo and segmented rows (the chain gains a store, a
# fence and a barrier between G3 and G1).  phase 1: bits and times (A / B / C / A); phase 2: the
# sanitizer (memcheck, racecheck, synccheck) and the hard-input tests on both builds.
set -u
phase=${1:-1}
source tools/device_lib.sh
round() { inst "build/$1" "$2"; pre "$2"; segrows "$2"; }
case $phase in
1) for b in main:aot oiv:aot_oiv cd:aot_cd; do
     inst "build/${b#*:}" "${b%%:*}"
     step "bits_${b%%:*}" 90 python3 tools/bitwise_outputs.py --save "/tmp/${b%%:*}.pt"
   done
   for x in oiv cd; do step "cmp_$x" 30 python3 tools/bitwise_outputs.py --compare /tmp/main.pt "/tmp/$x.pt"
     tail -1 "$OUT/cmp_$x.log"; done
   round aot main1; round aot_oiv oiv; round aot_cd cd; round aot main2
   cat "$OUT/prefill_ab.txt"; echo "total $((SECONDS - T0)) s" ;;
2) for b in cd:aot_cd oiv:aot_oiv; do
     inst "build/${b#*:}" "${b%%:*}"
     step "san_${b%%:*}" 200 python3 -m pytest -m gpu tests/test_gpu_sanitizer.py -q -p no:cacheprovider -rfE
     step "hard_${b%%:*}" 150 python3 -m pytest -m gpu tests/test_numerics_hard.py tests/test_fused_plan.py -q \
       -p no:cacheprovider -rfE
     grep -hE "passed|failed" "$OUT/san_${b%%:*}.log" "$OUT/hard_${b%%:*}.log" | sed "s/^/${b%%:*}: /"
   done; echo "total $((SECONDS - T0)) s" ;;
esac
