#!/usr/bin/env bash
# Next device session: issue 53's norm-sum candidates (rp, ws, gl, gx) and issue 54's srw.  Phases,
# one device call each, back to back (the machine stays warm 30 s):
#   bash lab/next_53.sh ab          main rp ws gl gx: A/B engine style + pre-normed, twice  (~7 min)
#   bash lab/next_53.sh tests [B]   B (default gx): bits against main; GPU tests of the single plan, its sanitizer and
#                                   concurrency cases (~7 min)
#   bash lab/next_53.sh srw         srw against main on the two-launch plan; spine_rs's GPU tests on srw  (~5 min)
#   bash lab/next_53.sh ncu [B]     ncu source page of the single plan, engine style, 8x4K 16/32: main and B  (~4 min)
# Carry: build/slim_main build/delta_rp build/delta_ws build/delta_gl build/delta_gx build/delta_srw .whl
# (build/slim_X = slim_main with delta_X copied over it: X's objects, cubins and regenerated glue).
# Each build links in its own copy of the tree (/tmp/w_<b>), all at once.
source lab/device_lib.sh
R0=$PWD
PHASE=${1:-ab}
B=${2:-gx}
case $PHASE in ab) BUILDS="main rp ws gl gx";; tests) BUILDS="main $B";; srw) BUILDS="main srw";; ncu) BUILDS="main $B";;
  *) echo "phase?"; exit 2;; esac
for b in $BUILDS; do
  [ -d build/delta_$b ] && { rm -rf build/slim_$b; cp -r build/slim_main build/slim_$b; cp -r build/delta_$b/. build/slim_$b/; }
done
for b in $BUILDS; do
  ( rm -rf /tmp/w_$b && mkdir -p /tmp/w_$b && cp -r $(ls -A | grep -v -x -e build -e .git) /tmp/w_$b/ && cd /tmp/w_$b &&
    GDN_PREFILL_PREBUILT=$R0/build/slim_$b timeout -s KILL 200 python3 setup.py build_ext --inplace -q >$OUT/build_$b.log 2>&1
    echo "build $b rc=$? at $((SECONDS - T0)) s" ) &
done; wait
inw() { local b=$1; shift; (cd /tmp/w_$b && PYTHONPATH=/tmp/w_$b:$PYTHONPATH "$@"); }
R="8x4K:16/32,16x512:16/32,8x4K:8/16"
ab() { inw $1 timeout -s KILL 70 python3 lab/ab.py --tag $1 --both --rows "$R" --reps 15 >$OUT/ab_$1_$2.log 2>&1
       grep ^AB $OUT/ab_$1_$2.log | tee -a $OUT/ab.txt; echo "ab $1 at $((SECONDS - T0)) s"; }
if [ $PHASE = ab ]; then
  ab main 1; ab rp 1; ab ws 1; ab gl 1; ab gx 1; ab main 2; ab gx 2; ab gl 2; ab ws 2; ab rp 2
  # the table: each build's two passes per row and setting, and its ratio to main's mean
  python3 - "$OUT/ab.txt" <<'PY' | tee $OUT/ab_table.txt
import collections, sys
t = collections.defaultdict(list)
for line in open(sys.argv[1]):
    w = line.split()             # AB tag l2=. pool=. row heads single us ...
    if len(w) > 6 and w[0] == "AB":
        t[(w[2], w[4] + " " + w[5], w[1])].append(float(w[7]))
keys = sorted({k[:2] for k in t})
tags = ["main", "rp", "ws", "gl", "gx"]
print("| setting | row | " + " | ".join(tags) + " |")
print("|---|---|" + "---|" * len(tags))
for k in keys:
    base = sum(t[k + ("main",)]) / max(1, len(t[k + ("main",)]))
    cells = []
    for tag in tags:
        v = t.get(k + (tag,), [])
        cells.append("-" if not v else "/".join(f"{x:.1f}" for x in v) + (f" ({sum(v) / len(v) / base:.3f})" if base else ""))
    print(f"| {'engine' if k[0] == 'l2=1' else 'pre-normed'} | {k[1]} | " + " | ".join(cells) + " |")
PY
fi
if [ $PHASE = tests ]; then
  # bits: pre-normed equal to main's for every candidate; engine style rp equal, ws/gl/gx differ in rk, rq's last bits
  for b in main $B; do inw $b timeout -s KILL 40 python3 tools/bitwise_outputs.py --runs prefill --save /tmp/bits_$b.pt >$OUT/bits_$b.log 2>&1; done
  { echo "== main vs $B"; inw $B python3 tools/bitwise_outputs.py --compare /tmp/bits_main.pt /tmp/bits_$B.pt 2>&1 | tail -14; } | tee $OUT/bits.txt
  inw $B timeout -s KILL 240 python3 -m pytest -m gpu tests/test_numerics_hard.py tests/test_gpu_prefill.py tests/test_fused_plan.py \
    -q -p no:cacheprovider -rfE -k "hard or isolated or single or fused or low_precision or fp8 or deterministic" >$OUT/tests_$B.log 2>&1
  echo "tests $B: $(grep -E "passed|failed" $OUT/tests_$B.log | tail -1) at $((SECONDS - T0)) s"; grep -E "^(FAILED|ERROR)" $OUT/tests_$B.log | head -5
  inw $B timeout -s KILL 100 python3 -m pytest -m gpu tests/test_gpu_sanitizer.py tests/test_gpu_concurrency.py -q -p no:cacheprovider -rfE \
    -k "single or fused" >$OUT/san_$B.log 2>&1
  echo "sanitizer+concurrency $B: $(grep -E "passed|failed" $OUT/san_$B.log | tail -1) at $((SECONDS - T0)) s"; grep -E "^(FAILED|ERROR)" $OUT/san_$B.log | head -5
fi
if [ $PHASE = srw ]; then
  RS="1x8K:16/32,8x4K:16/32,16x512:16/32,1x8K:4/8,16x512:4/8,8x4K:2/4"
  for b in main srw main srw; do
    inw $b timeout -s KILL 60 python3 lab/ab.py --tag $b --two --rows "$RS" --reps 15 >$OUT/abs_$b.log 2>&1
    grep ^AB $OUT/abs_$b.log | tee -a $OUT/ab_srw.txt
  done
  inw srw timeout -s KILL 90 python3 -m pytest -m gpu tests/test_gpu_prefill.py -q -p no:cacheprovider -rfE -k "spine or pair or dual or segment" >$OUT/tests_srw.log 2>&1
  echo "tests srw: $(grep -E "passed|failed" $OUT/tests_srw.log | tail -1) at $((SECONDS - T0)) s"
fi
if [ $PHASE = ncu ]; then
  for b in main $B; do
    inw $b timeout -s KILL 120 ncu --clock-control none --set full --import-source no --profile-from-start off -k regex:fused -c 1 \
      -o /tmp/rep_$b python3 tools/profile_one.py 8x4096 single 16/32 l2norm >$OUT/ncu_$b.log 2>&1
    inw $b ncu -i /tmp/rep_$b.ncu-rep --page source --csv --print-source sass >/tmp/src_$b.csv 2>>$OUT/ncu_$b.log
    inw $b python3 tools/ncu_hot.py /tmp/src_$b.csv --top 40 --phases --cubin $R0/build/slim_$b/cubin/fused_prefill_betaf32_kv/*.cubin \
      >$OUT/ncu_hot_$b.txt 2>&1; echo "ncu $b at $((SECONDS - T0)) s"; head -5 $OUT/ncu_hot_$b.txt
  done
fi
(cd "$OUT" && tar czf logs_$PHASE.tgz *.log && rm -f *.log)
echo "total $((SECONDS - T0)) s"
