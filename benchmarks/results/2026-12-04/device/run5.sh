#!/usr/bin/env bash
# Scratch device run 5 (FlashInfer part 3): the README's rows with FLA and FlashInfer in the same run,
# graph mode, pre-normed and with the norms in the kernel.  BUILD: slim_ro or slim_e2.
source tools/device_lib.sh
inst build/${BUILD:-slim_ro} final
bash .peer3/install_peers.sh | tail -1; peers
c="--impls gdn:wgmma,fla,flashinfer --no-progress --no-plot --no-host-overhead --modes graph --warm-s 0.3 --rep-budget-s 0.2 --max-reps 40"
for set in pre l2; do
  x=""; [ $set = l2 ] && x="--qk-l2norm"
  step t16_$set 105 python3 benchmarks/bench_prefill.py --heads 16/32 --shapes 8x4K,32x2K,4x2K,16x512,3x2K+1500+700+100 $c $x --out "$OUT/t16_$set" --tag prefill
  grep -E "^\| " "$OUT/t16_$set/prefill.md" | head -9
  step t8_$set 60 python3 benchmarks/bench_prefill.py --heads 8/16 --shapes 8x4K,16x512 $c $x --out "$OUT/t8_$set" --tag prefill
  grep -E "^\| [0-9]" "$OUT/t8_$set/prefill.md" | head -4
  step t4_$set 35 python3 benchmarks/bench_prefill.py --heads 4/8 --shapes 16x512 $c $x --out "$OUT/t4_$set" --tag prefill
  grep -E "^\| [0-9]" "$OUT/t4_$set/prefill.md" | head -3
done
(cd "$OUT" && tar czf tables.tgz t16_* t8_* t4_* *.log && rm -rf t16_* t8_* t4_* *.log)
echo "total $((SECONDS - T0)) s"
