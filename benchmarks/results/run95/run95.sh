#!/usr/bin/env bash
# run 95: timing-only probes of stage 1 (branch wu-phase-probe, wrong results): the fused plan's
# recompute_wu without the inverse (p1), and without phase 2 as well (p2), against main, by ncu at
# 8x4K: what each phase of stage 1 costs in time (run 83 counted instructions only).
set -u
REPO=$PWD; FINAL=$OUT; export OUT=/tmp/r95; mkdir -p $OUT; export PYTHONUNBUFFERED=1; t0=$SECONDS
for d in aot aot_p1 aot_p2; do
  GDN_PREFILL_PREBUILT=build/$d timeout -s KILL 60 python3 -m pip install -q --no-build-isolation --no-deps -e . >$OUT/build_$d.log 2>&1 || { echo "$d build failed"; break; }
  echo "### $d"
  OUT=$OUT/$d timeout -s KILL 75 bash tools/ncu_stages.sh 8x4096 2>&1 | grep -E "recompute|spine|sum"
  echo "$((SECONDS-t0)) s"
done
tar -C /tmp -czf $FINAL/run95.tgz r95
