#!/usr/bin/env bash
# run 94: why run 93's full harness shows a smaller gain than run 92's quick one (8x4K 721 vs 661).
# The old build (main before the dual merge: build/src_main.tgz + build/aot_fw) against the new
# (build/aot), alternated, the full harness's repetition settings (0.3 s, up to 300 reps), gdn only,
# with nvidia-smi dmon (SM clock, power) sampling all the while.
set -u
REPO=$PWD; FINAL=$OUT; export OUT=/tmp/r94; mkdir -p $OUT; export PYTHONUNBUFFERED=1; t0=$SECONDS
fin() { kill %1 2>/dev/null; tar -C /tmp -czf $FINAL/run94.tgz r94; exit $1; }
nvidia-smi dmon -s pc -d 1 > $OUT/dmon.txt 2>&1 &
mkdir -p /tmp/wt_old && tar -xzf build/src_main.tgz -C /tmp/wt_old
b() {  # tag dir objects
  (cd $2 && GDN_PREFILL_PREBUILT=$3 timeout -s KILL 60 python3 -m pip install -q --no-build-isolation --no-deps -e . >$OUT/build_$1.log 2>&1) || { echo "$1 build failed"; fin 1; }
  echo "$1 start $((SECONDS-t0)) s" >> $OUT/marks.txt
  (cd $2 && timeout -s KILL 70 python3 benchmarks/bench_prefill.py --shapes 8x4K,32x2K,varlen16 --heads 16/32 \
    --modes graph --no-progress --no-plot --no-host-overhead --impls gdn:wgmma --out "$OUT/$1" --tag prefill >"$OUT/$1.log" 2>&1)
  echo "$1 end $((SECONDS-t0)) s" >> $OUT/marks.txt
  echo "$1: $(grep -E "^\| (1x|8x|32x|varlen)" "$OUT/$1/prefill.md" | awk -F'|' '{printf "%s %s, ", $2, $6}')"
}
b old1 /tmp/wt_old $REPO/build/aot_fw
b new1 $REPO $REPO/build/aot
b old2 /tmp/wt_old $REPO/build/aot_fw
b new2 $REPO $REPO/build/aot
echo "$((SECONDS-t0)) s"
fin 0
