#!/usr/bin/env bash
# run 87: branch fused-tform: the overlap split swept again (stage 1 ~23 % cheaper, the B=1 chain
# ~10 % longer than main's: the spine starts too late at 35 %?).
set -u
REPO=$PWD; FINAL=$OUT; export OUT=/tmp/r87; mkdir -p $OUT; export PYTHONUNBUFFERED=1; t0=$SECONDS
mkdir -p /tmp/wt_ft && tar -xzf build/src_ft.tgz -C /tmp/wt_ft && cd /tmp/wt_ft
GDN_PREFILL_PREBUILT=$REPO/build/aot_ft python3 -m pip install -q --no-build-isolation --no-deps -e . >$OUT/build_ft.log 2>&1 || { tail -20 $OUT/build_ft.log; exit 1; }
timeout 250 python3 $REPO/benchmarks/bench_overlap.py --shapes 1x2K,1x4K,1x8K,1x16K,1x64K --pcts 15,20,25,30,35 \
  --md $OUT/overlap.md --json $OUT/overlap.json >$OUT/overlap.log 2>&1 || tail -3 $OUT/overlap.log
grep -E '^\| 1x' $OUT/overlap.md | awk -F'|' '{printf "%s%s:%s ", $2, $3, $5} END {print ""}'
echo "$((SECONDS-t0)) s"
tar -C /tmp -czf $FINAL/run87.tgz r87
