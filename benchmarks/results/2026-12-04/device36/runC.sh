#!/usr/bin/env bash
# Scratch device run C (FlashInfer part 3): engine-style table (norms in the kernel, pool + slot indices,
# max_seqlen) with FLA and FlashInfer, graph and eager; FlashInfer's kernel under ncu beside ours.
source lab/device_lib.sh
[ -d build/slim_fr ] || { tar xJf build/fr.tar.xz -C build; inst build/slim_fr fr; }
bash .peer3/install_peers.sh | tail -1; peers
source lab/ncu.sh fi fi
c="--impls gdn:wgmma,fla,flashinfer --no-progress --no-plot --no-host-overhead --modes graph,eager --warm-s 0.2 --rep-budget-s 0.15 --max-reps 30 --qk-l2norm"
M8=4096+2048+1024+512+256+128+64+64
M16=5000+3000+2000+1500+1200+1000+800+600+400+300+200+200+100+84
step e16 110 python3 benchmarks/bench_prefill.py --heads 16/32 --shapes 8x4K,4x2K,16x512,$M8,$M16 $c --out "$OUT/e16" --tag prefill
grep -E "^\| [0-9]" "$OUT/e16/prefill.md" | head -30
step e8 90 python3 benchmarks/bench_prefill.py --heads 8/16,4/8 --shapes 8x4K,16x512,$M16 $c --out "$OUT/e8" --tag prefill
grep -E "^\| [0-9]" "$OUT/e8/prefill.md" | head -40
(cd "$OUT" && tar czf logsC.tgz *.log && rm -f *.log)
echo "total $((SECONDS - T0)) s"
