#!/usr/bin/env bash
# run 78: run 77's release check found the overlap plan's second part at four CTAs per SM (57,344 B
# fits four: the per-CTA overhead is 1 KB, not 2); this build asks for 67,584 B.  ncu of stage 1's
# launches at 1x8192, the overlap GPU tests, and the prefill benchmark with FLA again.
set -u
FINAL=$OUT; export OUT=/tmp/r78; mkdir -p $OUT; export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
GDN_PREFILL_PREBUILT=build/aot python3 -m pip install -q --no-build-isolation --no-deps -e . >$OUT/build.log 2>&1 || { tail -20 $OUT/build.log; exit 1; }
export PYTHONPATH=/tmp/site
timeout 60 ncu --metrics launch__shared_mem_per_block_dynamic,launch__occupancy_limit_shared_mem -k regex:recompute_wu \
  python3 tools/profile_one.py 1x8192 >$OUT/ncu_wu_smem.txt 2>&1; grep -E "shared_mem" $OUT/ncu_wu_smem.txt | head -6
timeout 100 python3 -m pytest -m gpu -q -p no:cacheprovider --timeout 60 tests/test_gpu_overlap.py 2>&1 | tail -1
timeout 200 python3 benchmarks/bench_prefill.py --heads 16/32 --budget-s 110 --no-progress \
  --out "$OUT/bench" >$OUT/bench.txt 2>&1; echo "bench rc=$?"
grep -E "^\| (1x|8x|32x|varlen)" $OUT/bench.txt | grep -E "gdn:wgmma \||fla"
tar -C /tmp -czf $FINAL/run78.tgz r78
