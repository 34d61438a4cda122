#!/usr/bin/env bash
# run 101: the overlap split swept on main a81515f (the cheaper fold), warm harness, 1x4K..1x64K.
#   carry: build/aot build/run101.sh
set -u
FINAL=$OUT; export OUT=/tmp/r101; mkdir -p $OUT; export PYTHONUNBUFFERED=1; t0=$SECONDS
fin() { tar -C /tmp -czf $FINAL/run101.tgz r101; exit $1; }
GDN_PREFILL_PREBUILT=build/aot timeout -s KILL 90 python3 -m pip install -q --no-build-isolation --no-deps -e . >$OUT/build.log 2>&1 || { tail -20 $OUT/build.log; fin 1; }
timeout -s KILL 300 python3 benchmarks/bench_overlap.py --shapes 1x4K,1x8K,1x16K,1x32K,1x64K --pcts 10,15,20,25,35 \
  --json $OUT/overlap.json --md $OUT/overlap.md >$OUT/overlap.log 2>&1; echo "rc=$?"
cat $OUT/overlap.md
echo "$((SECONDS-t0)) s"
fin 0
