#!/usr/bin/env bash
# run 96: the fused spine's solo and dual builds on skewed batches (build/skew.py).
set -u
FINAL=$OUT; export OUT=/tmp/r96; mkdir -p $OUT; export PYTHONUNBUFFERED=1
GDN_PREFILL_PREBUILT=build/aot timeout -s KILL 60 python3 -m pip install -q --no-build-isolation --no-deps -e . >$OUT/build.log 2>&1 || { tail -5 $OUT/build.log; exit 1; }
timeout -s KILL 100 python3 build/skew.py 2>&1 | tee $OUT/skew.md | tail -12
tar -C /tmp -czf $FINAL/run96.tgz r96
