#!/usr/bin/env bash
# Scratch device run 3 (FlashInfer part 3): engine-style tables with a state pool and slot indices
# (--pool), graph and eager, FLA and FlashInfer in the same run; pre-normed 8/16 rows; the pools'
# timing; a short soak.
source lab/device_lib.sh
[ -d build/slim_swr ] || tar xJf build/swr.tar.xz -C build
inst build/slim_swr swr
bash .peer3/install_peers.sh | tail -1; peers
python3 -c "import flashinfer, fla; print('flashinfer', flashinfer.__version__, 'fla', fla.__version__)"
c="--impls gdn:wgmma,fla,flashinfer --no-progress --no-plot --no-host-overhead --modes graph,eager --warm-s 0.2 --rep-budget-s 0.15 --max-reps 30"
M8=4096+2048+1024+512+256+128+64+64
M16=5000+3000+2000+1500+1200+1000+800+600+400+300+200+200+100+84
step p16 130 python3 benchmarks/bench_prefill.py --heads 16/32 --shapes 8x4K,32x2K,4x2K,16x512,$M8,$M16 $c --qk-l2norm --pool --out "$OUT/p16" --tag prefill
grep -E "^\| [0-9]" "$OUT/p16/prefill.md" | head -30
step p8 130 python3 benchmarks/bench_prefill.py --heads 8/16,4/8 --shapes 8x4K,16x512,1x32K,$M16 $c --qk-l2norm --pool --out "$OUT/p8" --tag prefill
grep -E "^\| [0-9]" "$OUT/p8/prefill.md" | head -40
step n8 90 python3 benchmarks/bench_prefill.py --heads 8/16 --shapes 8x4K,16x512,1x32K,$M16 $c --out "$OUT/n8" --tag prefill
grep -E "^\| [0-9]" "$OUT/n8/prefill.md" | head -30
step pools 120 python3 benchmarks/bench_checkpoints.py --shapes 8x4K,1x8K --pools fp32,bf16,fp16,fp8e4m3 --md "$OUT/pools.md"
cat "$OUT/pools.md" | head -40
step soak 100 python3 benchmarks/soak_streams.py --runs 2 --iters 60 --impls gdn,fla,flashinfer --md "$OUT/soak.md"
tail -15 "$OUT/soak.md"
(cd "$OUT" && tar czf logs3.tgz *.log && rm -f *.log)
echo "total $((SECONDS - T0)) s"
