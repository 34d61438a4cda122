#!/usr/bin/env bash
# Call 1 of the next device session (~9 min; HOW.md says what each candidate asks).  Graph time, both
# settings: main against kp (the role), cl (the chains) and kc (both), two alternating passes of the
# single plan; main against cl, two passes of the two-launch plan (cl changes spine_rs too).  Then
# kc's bits against main's (fused_bits.py on the single plan, tools/bitwise_outputs.py on the serial
# plan's builds: equal bits carry main's tested numerics over), kc's kernels under racecheck,
# synccheck and memcheck, its single-plan and spine GPU tests and the concurrency cases; a soak of
# the single plan while time is left.  Stages part B of the FlashInfer bundle.  Writes the verdict
# (kc or new) that calls 3 and 4 use.
#   bash lab/next/s1_cand.sh
# Carry: build/slim_new build/delta_kp build/delta_cl build/delta_kc .whl .peerB   (~59 MB with the tree;
# HOW.md: how to remake them)
N=$(dirname "$0")     # this folder, relative to the repo root
source $N/device_lib.sh
R0=$PWD
(bash .peerB/install.sh > $OUT/peerB.log 2>&1; echo "peers B rc=$?" >> $OUT/peerB.log) &
for b in kp cl kc; do rm -rf build/slim_$b; cp -r build/slim_new build/slim_$b; cp -r build/delta_$b/. build/slim_$b/; done
for b in new kp cl kc; do
  ( rm -rf /tmp/w_$b && mkdir -p /tmp/w_$b && cp -r $(ls -A | grep -v -x -e build -e .git -e .peerB) /tmp/w_$b/ && cd /tmp/w_$b &&
    GDN_PREFILL_PREBUILT=$R0/build/slim_$b timeout -s KILL 200 python3 setup.py build_ext --inplace -q >$OUT/build_$b.log 2>&1
    echo "build $b rc=$? at $((SECONDS - T0)) s" ) &
done; wait
tail -1 $OUT/peerB.log
inw() { local b=$1; shift; (cd /tmp/w_$b && PYTHONPATH=/tmp/w_$b:$PYTHONPATH "$@"); }
left() { [ $((SECONDS - T0)) -lt $1 ]; }
R="8x4K:16/32,16x512:16/32,8x4K:8/16"
for b in new kp cl kc new kp cl kc; do
  inw $b timeout -s KILL 60 python3 $N/ab.py --tag $b --both --rows "$R" --reps 15 >$OUT/ab_$b.log 2>&1
  grep ^AB $OUT/ab_$b.log >> $OUT/ab_single.txt; echo "ab $b at $((SECONDS - T0)) s"
done
R2="1x8K:16/32,8x4K:16/32,1x8K:4/8,16x512:4/8"
for b in new cl new cl; do
  inw $b timeout -s KILL 60 python3 $N/ab.py --tag $b --two --rows "$R2" --reps 15 >$OUT/abt_$b.log 2>&1
  grep ^AB $OUT/abt_$b.log >> $OUT/ab_two.txt; echo "ab two $b at $((SECONDS - T0)) s"
done
# the mixed rows where the planner picks the serial plan (the rule says the longest sequence outlasts the
# batch): the single plan against it, main only, one pass (does the single rule's threshold still hold?)
RM="5000+3000+2000+1500+1200+1000+800+600+400+300+200+200+100+84:16/32,1212+849+858+4264+861+4629+3033+191+1216+3097+633+457+1243+8529+1098+598:16/32"
inw new timeout -s KILL 60 python3 $N/ab.py --tag new --two --both --rows "$RM" --reps 15 >$OUT/abm_new.log 2>&1
grep ^AB $OUT/abm_new.log > $OUT/ab_mix.txt; cat $OUT/ab_mix.txt; echo "ab mix at $((SECONDS - T0)) s"
KC=1; grep -q "^AB kc" $OUT/ab_single.txt || { KC=0; echo "kc gave no time (a hang or a crash: ab_kc.log): its checks are skipped"; }
BITS=skipped
if [ $KC = 1 ]; then
  for b in new kc; do
    inw $b timeout -s KILL 90 python3 $N/fused_bits.py --save /tmp/bits_$b.pt >$OUT/bits_$b.log 2>&1
    inw $b timeout -s KILL 90 python3 tools/bitwise_outputs.py --save /tmp/bitw_$b.pt >$OUT/bitw_$b.log 2>&1
  done
  inw new python3 $N/fused_bits.py --compare /tmp/bits_new.pt /tmp/bits_kc.pt > $OUT/bits.txt 2>&1; B1=$?
  inw new python3 tools/bitwise_outputs.py --compare /tmp/bitw_new.pt /tmp/bitw_kc.pt >> $OUT/bits.txt 2>&1; B2=$?
  BITS=$((B1 + B2)); grep -E "FUSED_BITS|differ|same" $OUT/bits.txt | tail -4; echo "bits rc=$B1/$B2 at $((SECONDS - T0)) s"
fi
SAN=ok; [ $KC = 1 ] || SAN=skipped
for tool in racecheck synccheck memcheck; do
  [ $KC = 1 ] || break
  left 360 || { SAN="not run"; break; }
  inw kc timeout -s KILL 90 compute-sanitizer --tool $tool --error-exitcode 3 python3 $N/san_fused.py >$OUT/san_$tool.log 2>&1
  rc=$?; echo "sanitizer $tool kc: rc=$rc $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" $OUT/san_$tool.log | tail -1) at $((SECONDS - T0)) s"
  [ $rc = 0 ] || SAN=fail
done
TESTS="not run"
if [ $KC = 1 ] && left 390; then
  inw kc timeout -s KILL $((580 - (SECONDS - T0))) python3 -m pytest -m gpu tests/test_numerics_hard.py tests/test_gpu_prefill.py \
    tests/test_fused_plan.py tests/test_gpu_concurrency.py tests/test_gpu_sanitizer.py -q -p no:cacheprovider -rfE \
    -k "hard or isolated or single or fused or low_precision or fp8 or deterministic or concurrent or watchdog or spine or pair or dual or segment or sanitizer" \
    >$OUT/tests_kc.log 2>&1
  TESTS=$(grep -E "passed|failed" $OUT/tests_kc.log | tail -1); echo "tests kc: $TESTS at $((SECONDS - T0)) s"
fi
# the single plan under the soak (8 x 1024 at 16/32: the plan the rule picks), while time is left
left 500 && inw new timeout -s KILL $((585 - (SECONDS - T0))) python3 benchmarks/soak_streams.py --impls gdn \
  --shape 8x1024 --heads 16/32 --runs 3 --iters 100 --md $OUT/soak_single.md >$OUT/soak_single.log 2>&1
echo "soak: $(grep -c "'hangs': 0, 'errors': 0" $OUT/soak_single.log 2>/dev/null) clean rows at $((SECONDS - T0)) s"
# the verdict: kc only if its time wins and its bits, sanitizer runs and tests pass
python3 - "$OUT/ab_single.txt" "$OUT/ab_two.txt" "$BITS" "$SAN" "$TESTS" <<'PY' | tee $OUT/verdict.txt
import sys, collections
ab, ab2, bits, san, tests = sys.argv[1:]
def table(path, col, tags):
    t = collections.defaultdict(list)
    for line in open(path):
        f = line.split()        # AB tag l2=. pool=. row heads single us [SM-us/chunk x] [two us ...]
        t[(f[2], f[4], f[5], f[1])].append(float(f[col]))
    rows = sorted({k[:3] for k in t}); ratios = {}
    print("| setting | row | " + " | ".join(tags) + " |"); print("|---|---|" + "---|" * len(tags))
    for r in rows:
        base = t[r + ("new",)]
        if not base: continue
        m = sum(base) / len(base); cells = []
        for tag in tags:
            v = t[r + (tag,)]
            cells.append("-" if not v else "/".join(f"{x:.1f}" for x in v) + f" ({sum(v) / len(v) / m:.3f})")
            if v: ratios[(tag,) + r] = sum(v) / len(v) / m
        print(f"| {'engine' if r[0] == 'l2=1' else 'pre-normed'} | {r[1]} {r[2]} | " + " | ".join(cells) + " |")
    return ratios
print("single plan"); r1 = table(ab, 7, ["new", "kp", "cl", "kc"])
print("\ntwo-launch plan"); r2 = table(ab2, 12, ["new", "cl"])
eng = [v for k, v in r1.items() if k[0] == "kc" and k[1] == "l2=1"]
pre = [v for k, v in r1.items() if k[0] == "kc" and k[1] == "l2=0"]
two = [v for k, v in r2.items() if k[0] == "cl"]
faster = (len(eng) == 3 and len(pre) == 3 and max(pre) <= 1.0 and max(eng) <= 1.0 and min(pre + eng) <= 0.98
          and len(two) == 4 and max(two) <= 1.02)
clean = bits == "0" and san == "ok" and "passed" in tests and " failed" not in tests and " error" not in tests
v = "kc" if faster and clean else "new"
print(f"kc checks: bits rc={bits}, sanitizer {san}, tests [{tests}]; faster={faster} clean={clean}")
print("VERDICT", v)
open("/tmp/gdn_verdict", "w").write(v)
PY
(cd $OUT && tar czf logs_s1.tgz *.log && rm -f *.log)
echo "total $((SECONDS - T0)) s"
