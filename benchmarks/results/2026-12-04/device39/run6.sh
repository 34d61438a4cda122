#!/usr/bin/env bash
# Session 39 device run 6: FlashInfer installed; the README's engine table re-measured on gp2
# (in-kernel l2norm, pool, max_seqlen), gdn, FLA and FlashInfer in one process.
source lab/device_lib.sh
bash .peer3/install_peers.sh 2>&1 | tail -2
peers
tar xJf build/carry8/gp2.tar.xz -C build
inst build/slim_gp2 gp2
B="--impls gdn:wgmma,fla,flashinfer --modes graph,eager --warm-s 0.2 --rep-budget-s 0.15 --max-reps 30 --qk-l2norm --pool --no-progress --no-plot --no-host-overhead"
step e16 190 python3 benchmarks/bench_prefill.py --heads 16/32 --shapes 8x4K,32x2K,4x2K,16x512,4096+2048+1024+512+256+128+64+64,5000+3000+2000+1500+1200+1000+800+600+400+300+200+200+100+84 $B --out "$OUT/e16" --tag prefill_engine_pool_16-32
grep -E "^\| " "$OUT/e16/"*.md | grep -v "^|---" | awk -F'|' '{print $2,$3,$5,$6,$7}'
step e8 150 python3 benchmarks/bench_prefill.py --heads 8/16 --shapes 8x4K,16x512,1x32K,5000+3000+2000+1500+1200+1000+800+600+400+300+200+200+100+84 $B --out "$OUT/e8" --tag prefill_engine_pool_8-16
grep -E "^\| " "$OUT/e8/"*.md | grep -v "^|---" | awk -F'|' '{print $2,$3,$5,$6,$7}'
(cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log)
echo "total $((SECONDS - T0)) s"
