#!/usr/bin/env bash
# run 79: where the overlap plan starts to pay with the four-CTA stage 1 (runs 77-78: 1x1K serial
# 46.6-46.8 us against overlap 50.8-52.1): the split swept at short shapes.
set -u
FINAL=$OUT; export OUT=/tmp/r79; mkdir -p $OUT; export PYTHONUNBUFFERED=1
GDN_PREFILL_PREBUILT=build/aot python3 -m pip install -q --no-build-isolation --no-deps -e . >$OUT/build.log 2>&1 || { tail -20 $OUT/build.log; exit 1; }
timeout 150 python3 benchmarks/bench_overlap.py --shapes 1x1K,1x1536,1x2K,1x3K --md $OUT/overlap_short.md >$OUT/overlap_short.log 2>&1; echo "rc=$?"
grep -E "^\| 1x" $OUT/overlap_short.md | awk -F'|' '{printf "%s%s:%s ", $2, $3, $5} END {print ""}'
tar -C /tmp -czf $FINAL/run79.tgz r79
