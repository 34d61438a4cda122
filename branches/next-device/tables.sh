#!/usr/bin/env bash
# The README's rows on main (5308576 or later), gdn, FLA and FlashInfer in one process: engine style
# (--qk-l2norm --pool, graph and eager) and pre-normed (graph).  The third of three calls in a row:
# the FlashInfer bundle's .peer1 and .peer2 are staged by the two calls before it (bash .peerN/stage.sh),
# .peer3 is carried with build/slim_new and .whl.
source branches/next-device/device_lib.sh
bash .peer3/install_peers.sh 2>&1 | tail -2
peers
inst build/slim_new new
P="--impls gdn:wgmma,fla,flashinfer --warm-s 0.2 --rep-budget-s 0.15 --max-reps 30 --no-progress --no-plot --no-host-overhead"
step e16 125 python3 benchmarks/bench_prefill.py --heads 16/32 --modes graph,eager --qk-l2norm --pool \
  --shapes 8x4K,32x2K,4x2K,16x512,2048+2048+2048+1500+700+100,1x32K $P --out "$OUT/e16" --tag prefill_engine_pool_16-32
grep -E "^\| " "$OUT/e16/"*.md | grep -v "^|---" | awk -F'|' '{print $2,$3,$5,$6,$7}'
step e8 90 python3 benchmarks/bench_prefill.py --heads 8/16,4/8 --modes graph,eager --qk-l2norm --pool \
  --shapes 8x4K,16x512,1x32K $P --out "$OUT/e8" --tag prefill_engine_pool_8-16_4-8
grep -E "^\| " "$OUT/e8/"*.md | grep -v "^|---" | awk -F'|' '{print $2,$3,$5,$6,$7}'
step p16 85 python3 benchmarks/bench_prefill.py --heads 16/32 --modes graph \
  --shapes 8x4K,32x2K,4x2K,16x512,2048+2048+2048+1500+700+100 $P --out "$OUT/p16" --tag prefill_16-32_prenormed
grep -E "^\| " "$OUT/p16/"*.md | grep -v "^|---" | awk -F'|' '{print $2,$3,$5,$6}'
step p8 60 python3 benchmarks/bench_prefill.py --heads 8/16,4/8 --modes graph --shapes 8x4K,16x512 $P \
  --out "$OUT/p8" --tag prefill_8-16_4-8_prenormed
grep -E "^\| " "$OUT/p8/"*.md | grep -v "^|---" | awk -F'|' '{print $2,$3,$5,$6,$7}'
(cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log)
echo "total $((SECONDS - T0)) s"
