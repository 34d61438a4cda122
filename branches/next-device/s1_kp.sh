#!/usr/bin/env bash
# Call 1 of the next device session (~6.5 min; HOW.md says what kp asks).  The single plan's graph
# time, both settings: main (with ln) against kp rebased on it, two alternating passes; kp's bits
# against main's on standard and hard inputs (fused_bits.py: equal bits carry main's tested numerics
# over), its kernel under racecheck, synccheck and memcheck, its single-plan GPU tests and the
# concurrency cases; then a soak of main's single plan (two streams, four threads).  Stages part B of
# the FlashInfer bundle.  Writes the verdict (kp or new) that calls 3 and 4 use.
#   bash lab/next/s1_kp.sh
# Carry: build/slim_new build/delta_kp .whl .peerB   (~36 MB; HOW.md: how to remake them)
N=$(dirname "$0")     # this folder, relative to the repo root
source $N/device_lib.sh
R0=$PWD
(bash .peerB/install.sh > $OUT/peerB.log 2>&1; echo "peers B rc=$?" >> $OUT/peerB.log) &
rm -rf build/slim_kp; cp -r build/slim_new build/slim_kp; cp -r build/delta_kp/. build/slim_kp/
for b in new kp; do
  ( rm -rf /tmp/w_$b && mkdir -p /tmp/w_$b && cp -r $(ls -A | grep -v -x -e build -e .git -e .peerB) /tmp/w_$b/ && cd /tmp/w_$b &&
    GDN_PREFILL_PREBUILT=$R0/build/slim_$b timeout -s KILL 200 python3 setup.py build_ext --inplace -q >$OUT/build_$b.log 2>&1
    echo "build $b rc=$? at $((SECONDS - T0)) s" ) &
done; wait
tail -1 $OUT/peerB.log
inw() { local b=$1; shift; (cd /tmp/w_$b && PYTHONPATH=/tmp/w_$b:$PYTHONPATH "$@"); }
left() { [ $((SECONDS - T0)) -lt $1 ]; }
R="8x4K:16/32,16x512:16/32,8x4K:8/16"
for b in new kp new kp; do
  inw $b timeout -s KILL 60 python3 $N/ab.py --tag $b --both --rows "$R" --reps 15 >$OUT/ab_$b.log 2>&1
  grep ^AB $OUT/ab_$b.log >> $OUT/ab_kp.txt; echo "ab $b at $((SECONDS - T0)) s"
done
KP=1; grep -q "^AB kp" $OUT/ab_kp.txt || { KP=0; echo "kp gave no time (a hang or a crash: ab_kp.log): its checks are skipped"; }
BITS=skipped
if [ $KP = 1 ]; then
  for b in new kp; do inw $b timeout -s KILL 90 python3 $N/fused_bits.py --save /tmp/bits_$b.pt >$OUT/bits_$b.log 2>&1; done
  inw new python3 $N/fused_bits.py --compare /tmp/bits_new.pt /tmp/bits_kp.pt > $OUT/bits.txt 2>&1; BITS=$?
  grep FUSED_BITS $OUT/bits.txt; echo "bits at $((SECONDS - T0)) s"
fi
SAN=ok; [ $KP = 1 ] || SAN=skipped
for tool in racecheck synccheck memcheck; do
  [ $KP = 1 ] || break
  left 300 || { SAN="not run"; break; }
  inw kp timeout -s KILL 90 compute-sanitizer --tool $tool --error-exitcode 3 python3 $N/san_fused.py >$OUT/san_$tool.log 2>&1
  rc=$?; echo "sanitizer $tool kp: rc=$rc $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" $OUT/san_$tool.log | tail -1) at $((SECONDS - T0)) s"
  [ $rc = 0 ] || SAN=fail
done
TESTS="not run"
if [ $KP = 1 ] && left 330; then
  inw kp timeout -s KILL 240 python3 -m pytest -m gpu tests/test_numerics_hard.py tests/test_gpu_prefill.py \
    tests/test_fused_plan.py tests/test_gpu_concurrency.py -q -p no:cacheprovider -rfE \
    -k "hard or isolated or single or fused or low_precision or fp8 or deterministic or concurrent or watchdog" >$OUT/tests_kp.log 2>&1
  TESTS=$(grep -E "passed|failed" $OUT/tests_kp.log | tail -1); echo "tests+concurrency kp: $TESTS at $((SECONDS - T0)) s"
fi
# main's single plan under the soak (8 x 1024 at 16/32: the plan the rule picks), while time is left
left 480 && inw new timeout -s KILL $((570 - (SECONDS - T0))) python3 benchmarks/soak_streams.py --impls gdn \
  --shape 8x1024 --heads 16/32 --runs 4 --iters 100 --md $OUT/soak_single.md >$OUT/soak_single.log 2>&1
echo "soak: $(grep -c "'hangs': 0, 'errors': 0" $OUT/soak_single.log) clean rows of $(grep -c "'impl': 'gdn'" $OUT/soak_single.log) at $((SECONDS - T0)) s"
# the verdict: kp only if its time wins and its bits, sanitizer runs and tests pass
python3 - "$OUT/ab_kp.txt" "$BITS" "$SAN" "$TESTS" <<'PY' | tee $OUT/verdict.txt
import sys, collections
ab, bits, san, tests = sys.argv[1:]
t = collections.defaultdict(list)
for line in open(ab):
    f = line.split()            # AB tag l2=. pool=. row heads single us ...
    t[(f[2], f[4], f[5], f[1])].append(float(f[7]))
rows = sorted({k[:3] for k in t})
tags = ["new", "kp"]
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
        if tag == "kp" and v: ratios[r] = sum(v) / len(v) / m
    print(f"| {'engine' if r[0] == 'l2=1' else 'pre-normed'} | {r[1]} {r[2]} | " + " | ".join(cells) + " |")
eng = [v for k, v in ratios.items() if k[0] == "l2=1"]; pre = [v for k, v in ratios.items() if k[0] == "l2=0"]
faster = len(eng) == 3 and len(pre) == 3 and max(pre) <= 1.0 and min(pre) <= 0.98 and max(eng) <= 1.01
clean = bits == "0" and san == "ok" and "passed" in tests and " failed" not in tests and " error" not in tests
v = "kp" if faster and clean else "new"
print(f"kp checks: bits rc={bits}, sanitizer {san}, tests [{tests}]; faster={faster} clean={clean}")
print("VERDICT", v)
open("/tmp/gdn_verdict", "w").write(v)
PY
(cd $OUT && tar czf logs_s1.tgz *.log && rm -f *.log)
echo "total $((SECONDS - T0)) s"
