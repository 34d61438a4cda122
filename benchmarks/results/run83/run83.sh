#!/usr/bin/env bash
# run 83: main's build.  The overlap split re-swept around the rule's 35 % with stage 1 at four CTAs
# per SM (three beside the spine), and ncu's stall samples of stage 1 (fused plan, 8x4096).
set -u
FINAL=$OUT; export OUT=/tmp/r83; mkdir -p $OUT; export PYTHONUNBUFFERED=1; t0=$SECONDS
GDN_PREFILL_PREBUILT=build/aot python3 -m pip install -q --no-build-isolation --no-deps -e . >$OUT/build.log 2>&1 || { tail -20 $OUT/build.log; exit 1; }
timeout 300 python3 benchmarks/bench_overlap.py --shapes 1x4K,1x8K,1x16K,1x64K --pcts 25,30,35,40,45 \
  --md $OUT/overlap.md --json $OUT/overlap.json >$OUT/overlap.log 2>&1 || tail -3 $OUT/overlap.log
grep -E '^\| 1x' $OUT/overlap.md | awk -F'|' '{printf "%s%s:%s ", $2, $3, $5} END {print ""}'
echo "overlap $((SECONDS-t0)) s"
CUBIN=$(ls build/aot/cubin/recompute_wu_bf16_betaf32_a16_pqk/*.cubin) timeout 150 bash tools/ncu_kernel.sh recompute_wu wu 8x4096 2>&1 | head -40
echo "ncu $((SECONDS-t0)) s"
tar -C /tmp -czf $FINAL/run83.tgz r83
