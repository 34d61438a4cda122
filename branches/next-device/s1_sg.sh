#!/usr/bin/env bash
# Call 1 of the next device session (~9.5 min; HOW.md says what each build asks).  The single plan's
# graph time, both settings: main, sg (the store warp forms the gates), kp (kl: with l2norm no key
# check; pn: pre-normed folds without the unit norms), ln (the role's index arithmetic in 32 bits, A
# by stmatrix: main's bits) and np (sg with the norm sums pipelined) in
# two alternating passes; the probes nc1, nc2 (the range check's cost) and d1, d2 (the role alone,
# the chains alone) once.  Then sg's bits against main's on standard and hard inputs (fused_bits.py:
# equal bits carry main's tested numerics over), sg's kernel under racecheck, synccheck and memcheck,
# its single-plan GPU tests and the concurrency cases; ln's bits (saved beside sg's checks), kp's last.  Stages part B of the
# FlashInfer bundle.  Writes the verdict (sg3 or new) that calls 3 and 4 use.
#   bash lab/next/s1_sg.sh
# Carry: build/slim_new build/delta_sg3 build/delta_srw2 build/probes .whl .peerB   (~55 MB; HOW.md:
# how to remake them)
N=$(dirname "$0")     # this folder, relative to the repo root
source $N/device_lib.sh
R0=$PWD
(bash .peerB/install.sh > $OUT/peerB.log 2>&1; echo "peers B rc=$?" >> $OUT/peerB.log) &
for b in sg3 srw2; do rm -rf build/slim_$b; cp -r build/slim_new build/slim_$b; cp -r build/delta_$b/. build/slim_$b/; done
for b in nc1 nc2 kp ln np d1 d2; do rm -rf build/slim_$b; cp -r build/slim_new build/slim_$b; cp -r build/probes/delta_$b/. build/slim_$b/; done
for b in new sg3 srw2 nc1 nc2 kp ln np d1 d2; do
  ( rm -rf /tmp/w_$b && mkdir -p /tmp/w_$b && cp -r $(ls -A | grep -v -x -e build -e .git -e .peerB) /tmp/w_$b/ && cd /tmp/w_$b &&
    GDN_PREFILL_PREBUILT=$R0/build/slim_$b timeout -s KILL 200 python3 setup.py build_ext --inplace -q >$OUT/build_$b.log 2>&1
    echo "build $b rc=$? at $((SECONDS - T0)) s" ) &
done; wait
tail -1 $OUT/peerB.log
inw() { local b=$1; shift; (cd /tmp/w_$b && PYTHONPATH=/tmp/w_$b:$PYTHONPATH "$@"); }
left() { [ $((SECONDS - T0)) -lt $1 ]; }
R="8x4K:16/32,16x512:16/32,8x4K:8/16"
for b in new sg3 kp ln np nc1 nc2 new sg3 kp ln np d1 d2; do     # the probes once: a size (d1, d2 last)
  inw $b timeout -s KILL 60 python3 $N/ab.py --tag $b --both --rows "$R" --reps 15 >$OUT/ab_$b.log 2>&1
  grep ^AB $OUT/ab_$b.log >> $OUT/ab_sg.txt; echo "ab $b at $((SECONDS - T0)) s"
done
# sg's checks only if it ran at all: after a hang or a crash in its A/B (no AB line) each check would
# spend its whole timeout
SG=1; grep -q "^AB sg3" $OUT/ab_sg.txt || { SG=0; echo "sg3 gave no time (a hang or a crash: ab_sg3.log): its checks are skipped"; }
# ln's outputs (they must equal main's bits everywhere: the same arithmetic, fewer index
# instructions), saved beside sg's checks, which time nothing; compared before the verdict
( inw ln timeout -s KILL 90 python3 $N/fused_bits.py --save /tmp/bits_ln.pt >$OUT/bits_ln.log 2>&1 ) &
LN=$!
for b in new sg3; do
  [ $b = sg3 ] && [ $SG = 0 ] && continue
  left 330 && inw $b timeout -s KILL 90 python3 $N/fused_bits.py --save /tmp/bits_$b.pt >$OUT/bits_$b.log 2>&1
done
BITS=skipped
if [ $SG = 1 ]; then
  inw new python3 $N/fused_bits.py --compare /tmp/bits_new.pt /tmp/bits_sg3.pt > $OUT/bits.txt 2>&1; BITS=$?
  grep FUSED_BITS $OUT/bits.txt; echo "bits at $((SECONDS - T0)) s"
fi
SAN=ok; [ $SG = 1 ] || SAN=skipped
for tool in racecheck synccheck memcheck; do
  [ $SG = 1 ] || break
  left 360 || { SAN="not run"; break; }
  inw sg3 timeout -s KILL 90 compute-sanitizer --tool $tool --error-exitcode 3 python3 $N/san_fused.py >$OUT/san_$tool.log 2>&1
  rc=$?; echo "sanitizer $tool sg: rc=$rc $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" $OUT/san_$tool.log | tail -1) at $((SECONDS - T0)) s"
  [ $rc = 0 ] || SAN=fail
done
TESTS="not run"
if [ $SG = 1 ] && left 450; then
  inw sg3 timeout -s KILL $((575 - (SECONDS - T0))) python3 -m pytest -m gpu tests/test_numerics_hard.py tests/test_gpu_prefill.py \
    tests/test_fused_plan.py tests/test_gpu_concurrency.py -q -p no:cacheprovider -rfE \
    -k "hard or isolated or single or fused or low_precision or fp8 or deterministic or concurrent or watchdog" >$OUT/tests_sg.log 2>&1
  TESTS=$(grep -E "passed|failed" $OUT/tests_sg.log | tail -1); echo "tests+concurrency sg: $TESTS at $((SECONDS - T0)) s"
fi
for b in kp; do     # kp's bits (equal main's wherever main's range check passes), while time is left
  left 555 || break
  inw $b timeout -s KILL 30 python3 $N/fused_bits.py --save /tmp/bits_$b.pt >$OUT/bits_$b.log 2>&1
  { echo "== $b"; inw new python3 $N/fused_bits.py --compare /tmp/bits_new.pt /tmp/bits_$b.pt; } >> $OUT/bits.txt 2>&1
  echo "$b: $(grep FUSED_BITS $OUT/bits.txt | tail -1)"
done
wait $LN
[ -f /tmp/bits_new.pt ] && [ -f /tmp/bits_ln.pt ] &&
  { echo "== ln"; inw new python3 $N/fused_bits.py --compare /tmp/bits_new.pt /tmp/bits_ln.pt; } > $OUT/bits_ln.txt 2>&1 &&
  touch /tmp/gdn_ln_ok
echo "ln: $(grep FUSED_BITS $OUT/bits_ln.txt 2>/dev/null | tail -1) at $((SECONDS - T0)) s"
# the verdict: sg only if its time wins and its bits, sanitizer runs and tests pass
python3 - "$OUT/ab_sg.txt" "$BITS" "$SAN" "$TESTS" <<'PY' | tee $OUT/verdict.txt
import sys, collections
ab, bits, san, tests = sys.argv[1:]
t = collections.defaultdict(list)
for line in open(ab):
    f = line.split()            # AB tag l2=. pool=. row heads single us ...
    t[(f[2], f[4], f[5], f[1])].append(float(f[7]))
rows = sorted({k[:3] for k in t})
tags = ["new", "sg3", "kp", "ln", "np", "nc1", "nc2", "d1", "d2"]
print("| setting | row | " + " | ".join(tags) + " |"); print("|---|---|" + "---|" * len(tags))
ratios = {}
for r in rows:
    base = t[r + ("new",)]
    if not base: continue
    m = sum(base) / len(base)
    cells = []
    for tag in tags:
        v = t[r + (tag,)]
        cells.append("-" if not v else "/".join(f"{x:.1f}" for x in v) + f" ({sum(v) / len(v) / m:.3f})")
        if tag == "sg3" and v: ratios[r] = sum(v) / len(v) / m
    print(f"| {'engine' if r[0] == 'l2=1' else 'pre-normed'} | {r[1]} {r[2]} | " + " | ".join(cells) + " |")
eng = [v for k, v in ratios.items() if k[0] == "l2=1"]; pre = [v for k, v in ratios.items() if k[0] == "l2=0"]
faster = len(eng) == 3 and len(pre) == 3 and max(eng) <= 1.0 and min(eng) <= 0.98 and max(pre) <= 1.02
clean = bits == "0" and san == "ok" and "passed" in tests and " failed" not in tests and " error" not in tests
v = "sg3" if faster and clean else "new"
print(f"sg checks: bits rc={bits}, sanitizer {san}, tests [{tests}]; faster={faster} clean={clean}")
print("VERDICT", v)
open("/tmp/gdn_verdict", "w").write(v)
PY
(cd $OUT && tar czf logs_s1.tgz *.log && rm -f *.log)
echo "total $((SECONDS - T0)) s"
