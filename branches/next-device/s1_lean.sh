#!/usr/bin/env bash
# The lean call 1, for a session whose device time went on failed starts: main against kc and kcd
# (kc with dz: the role's fold masks as distances against compile-time column offsets).
# Graph time of the single plan (both settings) and the two-launch plan (kc's spine_rs is cl's), two
# alternating passes; the serial-plan mixes against the single plan (main, one pass); kc's bits against
# main's (both plans); then the whole GPU suite on kc's build (its sanitizer cases run racecheck,
# synccheck and memcheck on the single plan's kernel, both settings) while time is left.
#   bash lab/next/s1_lean.sh        Carry: build/slim_new build/delta_kc build/delta_kcd .whl
N=$(dirname "$0")
source $N/device_lib.sh
R0=$PWD
LIMIT=${LIMIT:-588}          # seconds this command may run (LIMIT=400: kcd only, the suite's single-plan part)
C=${CANDS:-"kc kcd"}; [ $LIMIT -lt 500 ] && C=kcd
for b in $C; do rm -rf build/slim_$b; cp -r build/slim_new build/slim_$b; cp -r build/delta_$b/. build/slim_$b/; done
for b in new $C; do
  ( rm -rf /tmp/w_$b && mkdir -p /tmp/w_$b && cp -r $(ls -A | grep -v -x -e build -e .git) /tmp/w_$b/ && cd /tmp/w_$b &&
    GDN_PREFILL_PREBUILT=$R0/build/slim_$b timeout -s KILL 200 python3 setup.py build_ext --inplace -q >$OUT/build_$b.log 2>&1
    echo "build $b rc=$? at $((SECONDS - T0)) s" ) &
done; wait
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
inw() { local b=$1; shift; (cd /tmp/w_$b && PYTHONPATH=/tmp/w_$b:$PYTHONPATH "$@"); }
R="8x4K:16/32,16x512:16/32,8x4K:8/16"
for b in new $C new $C; do
  inw $b timeout -s KILL 60 python3 $N/ab.py --tag $b --both --rows "$R" --reps 15 >$OUT/ab_$b.log 2>&1
  grep ^AB $OUT/ab_$b.log >> $OUT/ab_single.txt; echo "ab $b at $((SECONDS - T0)) s"
done
R2="1x8K:16/32,8x4K:16/32"
[ $LIMIT -lt 500 ] && R2="8x4K:16/32"
for b in new ${C%% *} new ${C%% *}; do
  inw $b timeout -s KILL 60 python3 $N/ab.py --tag $b --two --rows "$R2" --reps 15 >$OUT/abt_$b.log 2>&1
  grep ^AB $OUT/abt_$b.log >> $OUT/ab_two.txt; echo "ab two $b at $((SECONDS - T0)) s"
done
RM="5000+3000+2000+1500+1200+1000+800+600+400+300+200+200+100+84:16/32,1212+849+858+4264+861+4629+3033+191+1216+3097+633+457+1243+8529+1098+598:16/32"
[ $LIMIT -ge 500 ] && inw new timeout -s KILL 60 python3 $N/ab.py --tag new --two --both --rows "$RM" --reps 15 >$OUT/abm_new.log 2>&1
grep ^AB $OUT/abm_new.log > $OUT/ab_mix.txt; echo "ab mix at $((SECONDS - T0)) s"
for b in new $C; do
  inw $b timeout -s KILL 60 python3 $N/fused_bits.py --save /tmp/bits_$b.pt >$OUT/bits_$b.log 2>&1
  inw $b timeout -s KILL 60 python3 tools/bitwise_outputs.py --save /tmp/bitw_$b.pt >$OUT/bitw_$b.log 2>&1
done
if [ -f /tmp/bits_kc.pt ]; then
  inw new python3 $N/fused_bits.py --compare /tmp/bits_new.pt /tmp/bits_kc.pt > $OUT/bits.txt 2>&1; B1=$?
  inw new python3 tools/bitwise_outputs.py --compare /tmp/bitw_new.pt /tmp/bitw_kc.pt >> $OUT/bits.txt 2>&1; B2=$?
  echo "bits kc rc=$B1/$B2 at $((SECONDS - T0)) s"; grep -E "FUSED_BITS|differ|same" $OUT/bits.txt | tail -4
fi
inw new python3 $N/fused_bits.py --compare /tmp/bits_new.pt /tmp/bits_kcd.pt > $OUT/bits_kcd.txt 2>&1; B3=$?
inw new python3 tools/bitwise_outputs.py --compare /tmp/bitw_new.pt /tmp/bitw_kcd.pt >> $OUT/bits_kcd.txt 2>&1; B4=$?
echo "bits kcd rc=$B3/$B4"; grep -E "FUSED_BITS|differ|same" $OUT/bits_kcd.txt | tail -4
S=kcd; [ $B3 = 0 ] && [ $B4 = 0 ] || { [ -d /tmp/w_kc ] && S=kc; }     # kcd, unless its bits differ and kc ran
cat $OUT/ab_single.txt $OUT/ab_two.txt $OUT/ab_mix.txt
if [ $((LIMIT - (SECONDS - T0))) -ge 320 ]; then       # the whole GPU suite (~300 s)
  inw $S timeout -s KILL $((LIMIT - (SECONDS - T0))) python3 -m pytest -m gpu tests -q -p no:cacheprovider -rfE \
    --durations=5 >$OUT/suite.log 2>&1
else                                                     # its single-plan, spine and sanitizer part
  inw $S timeout -s KILL $((LIMIT - (SECONDS - T0))) python3 -m pytest -m gpu tests/test_numerics_hard.py tests/test_gpu_prefill.py \
    tests/test_fused_plan.py tests/test_gpu_concurrency.py tests/test_gpu_sanitizer.py -q -p no:cacheprovider -rfE \
    -k "hard or isolated or single or fused or low_precision or fp8 or deterministic or concurrent or watchdog or spine or pair or dual or segment or sanitizer" \
    >$OUT/suite.log 2>&1
fi
echo "suite $S rc=$?: $(grep -E "passed|failed" $OUT/suite.log | tail -1) at $((SECONDS - T0)) s"
grep -E "^(FAILED|ERROR)" $OUT/suite.log | head
(cd $OUT && tar czf logs.tgz *.log && rm -f *.log)
