#!/usr/bin/env bash
# Scratch device run 1 (session 37, FlashInfer part 1 staged): spine_wgmma ring through cutlass.pipeline
# (swr) against main's objects (fr): its GPU tests, bench_spine A/B alternating; the single plan
# against the serial plan on long-tailed mixed batches in both orders (rule refit).
source lab/device_lib.sh
bash .peer1/stage.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
for b in fr swr; do tar xJf build/$b.tar.xz -C build; done
inst build/slim_swr swr
step smoke 60 python3 benchmarks/bench_fused.py --smoke; tail -2 "$OUT/smoke.log"
step unf 150 python3 -m pytest -m gpu tests/test_gpu_prefill.py tests/test_spine_warpgroups.py tests/test_gpu_sanitizer.py \
  tests/test_state_pools.py -q -p no:cacheprovider -rfE -k "wgmma or unfused or warpgroup or unaligned or spine"
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/unf.log" | tail -12
for b in fr swr fr swr; do
  inst build/slim_$b $b
  step sp_$b 80 python3 benchmarks/bench_spine.py --spines wgmma --quick --md "$OUT/spine_$b.md"
  grep -E "^\| " "$OUT/spine_$b.md" | sed "s/^/$b /" | tee -a "$OUT/spine_ab.txt"
done
M16=5000+3000+2000+1500+1200+1000+800+600+400+300+200+200+100+84
M16r=84+100+200+200+300+400+600+800+1000+1200+1500+2000+3000+5000
M8=4096+2048+1024+512+256+128+64+64
M8r=64+64+128+256+512+1024+2048+4096
M4=2048+2048+1024+1024+512+512+256+256+128+128+64+64
R="$M16:16/32,$M16r:16/32,$M8:16/32,$M8r:16/32,$M4:16/32,$M16:8/16,$M16r:8/16,$M8:8/16,$M16:4/8,8x4K:16/32"
step mix 120 python3 lab/ab.py --tag mix --two --l2norm --rows "$R" --reps 15; grep ^AB "$OUT/mix.log" | tee "$OUT/mix.txt"
(cd "$OUT" && tar czf logs1.tgz *.log && rm -f *.log)
echo "total $((SECONDS - T0)) s"
