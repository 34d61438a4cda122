#!/usr/bin/env bash
# run 112: is the one-sequence rows' loss on the faster stage 1 (runs 110-111) the card's clock?  Per build
# (main build/aot; new build/aot_new; div build/aot_div = new's head divisions with main's TF32 split), the
# prefill at 1x64K with nvidia-smi sampling SM clock and power (samples above 250 W), then the other rows;
# then the owed rs-skew rows (64x512+8x8K, mixed96) on the new build and the pre-order one (build/aot_pre).
#   carry: build/aot build/aot_new build/aot_div build/aot_pre build/run112.sh
set -u
export PYTHONUNBUFFERED=1; t0=$SECONDS
inst() { GDN_PREFILL_PREBUILT=$1 timeout -s KILL 90 python3 -m pip install -q --no-build-isolation --no-deps -e . >/tmp/build_$2.log 2>&1 || { tail -20 /tmp/build_$2.log; exit 1; }; }
one() {  # tag shapes
  mkdir -p /tmp/$1
  nvidia-smi --query-gpu=clocks.sm,power.draw --format=csv,noheader,nounits -lms 50 > /tmp/clk_$1.csv 2>/dev/null & smi=$!
  timeout -s KILL 60 python3 benchmarks/bench_prefill.py --shapes $2 --heads 16/32 --modes graph \
    --no-progress --no-plot --no-host-overhead --impls gdn:wgmma --out "/tmp/$1" --tag prefill >"/tmp/$1/bench.log" 2>&1
  kill $smi 2>/dev/null; wait $smi 2>/dev/null
  clk=$(python3 -c "
import statistics as s
r=[tuple(float(x) for x in l.split(',')) for l in open('/tmp/clk_$1.csv') if l.count(',')==1]
b=[x for x in r if x[1]>250]
print(f'busy samples {len(b)}: SM clock median {s.median(x[0] for x in b):.0f} MHz, power median {s.median(x[1] for x in b):.0f} W' if b else 'no busy samples')")
  echo "$1: $(grep -E "^\| (1x|8x|32x|varlen)" "/tmp/$1/prefill.md" | awk -F'|' '{printf "%s %s, ", $2, $6}') [$clk]" | tee -a $OUT/clock_ab.txt
}
for b in main:build/aot new:build/aot_new div:build/aot_div; do
  t=${b%%:*}; inst ${b#*:} $t; one ${t}_64k 1x64K; one ${t}_rest 1x8K,8x4K,32x2K
done
inst build/aot main2; one main2_64k 1x64K
inst build/aot_new new2; one new2_64k 1x64K
echo "$((SECONDS-t0)) s"
timeout -s KILL 100 python3 benchmarks/bench_spine.py --rs-skew --cases 64x512+8x8K,mixed96 >$OUT/skew_new.txt 2>&1; grep -E "^\| [0-9m]" $OUT/skew_new.txt
inst build/aot_pre pre
timeout -s KILL 100 python3 benchmarks/bench_spine.py --rs-skew --cases 64x512+8x8K,mixed96 >$OUT/skew_pre.txt 2>&1; grep -E "^\| [0-9m]" $OUT/skew_pre.txt
echo "$((SECONDS-t0)) s"
