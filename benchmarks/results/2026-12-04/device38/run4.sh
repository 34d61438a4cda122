#!/usr/bin/env bash
# Scratch device run 4: rk3 (ranking up to 64 sequences, equal lengths skip it by one vote):
# the whole GPU suite on it, then one A/B alternation against lf (main), dense and pool.
source lab/device_lib.sh
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .tfw/*.whl 2>/dev/null
for b in lf rk3; do tar xJf build/carry4/$b.tar.xz -C build; done
inst build/slim_rk3 rk3
step smoke 60 python3 benchmarks/bench_fused.py --smoke; tail -2 "$OUT/smoke.log"
step suite 380 python3 -m pytest -m gpu tests -q -p no:cacheprovider -rfEs -x --durations=5
grep -E "^(FAILED|ERROR|SKIPPED)|passed|failed" "$OUT/suite.log" | tail -25
M16r=84+100+200+200+300+400+600+800+1000+1200+1500+2000+3000+5000
M41=$(python3 -c "print('+'.join(str(x) for x in sorted([64,128,256,512,1024,2048]*7)[:41]))")
R="8x4K:16/32,4x2K:16/32,16x512:16/32,32x256:16/32,64x256:16/32,$M41:16/32,$M16r:16/32,16x512:4/8"
P="64x256:16/32,$M41:16/32,16x512:16/32"
for b in lf rk3 lf rk3; do
  inst build/slim_$b $b
  step ab_$b 45 python3 lab/ab.py --tag $b --l2norm --rows "$R" --reps 15; grep ^AB "$OUT/ab_$b.log" | tee -a "$OUT/ab.txt"
  step abp_$b 30 python3 lab/ab.py --tag $b --l2norm --pool --rows "$P" --reps 15; grep ^AB "$OUT/abp_$b.log" | tee -a "$OUT/ab.txt"
done
(cd "$OUT" && tar czf logs4.tgz *.log && rm -f *.log)
echo "total $((SECONDS - T0)) s"
