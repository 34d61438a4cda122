#!/usr/bin/env bash
# run 102: branch overlap-split-20 (this tree; kernels = main's build/aot, the fold of run 100):
# overlap GPU tests, the prefill table gdn:wgmma + FLA 0.6.0 (warm harness), then the one-sequence
# rows on main (build/src_main.tgz, split 35 %) and the branch again.
#   carry: build/aot build/src_main.tgz build/run102.sh .whl
set -u
REPO=$PWD; FINAL=$OUT; export OUT=/tmp/r102; mkdir -p $OUT; export PYTHONUNBUFFERED=1; t0=$SECONDS
fin() { tar -C /tmp -czf $FINAL/run102.tgz r102; exit $1; }
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
inst() { (cd $1 && GDN_PREFILL_PREBUILT=$REPO/build/aot timeout -s KILL 90 python3 -m pip install -q --no-build-isolation --no-deps -e . >$OUT/build_$2.log 2>&1) || { tail -20 $OUT/build_$2.log; fin 1; }; }
one() {  # tag dir
  mkdir -p $OUT/$1
  (cd $2 && timeout -s KILL 45 python3 benchmarks/bench_prefill.py --shapes 1x8K,1x16K,1x64K --heads 16/32 --modes graph \
    --no-progress --no-plot --no-host-overhead --impls gdn:wgmma --out "$OUT/$1" --tag prefill >"$OUT/$1/bench.log" 2>&1)
  echo "$1: $(grep -E "^\| (1x|8x|32x|varlen)" "$OUT/$1/prefill.md" | awk -F'|' '{printf "%s %s, ", $2, $6}')"
}
inst $REPO s20
timeout -s KILL 60 python3 -m pytest -m gpu tests/test_gpu_overlap.py -q -p no:cacheprovider -x >$OUT/gpu.txt 2>&1; tail -1 $OUT/gpu.txt
echo "$((SECONDS-t0)) s"
timeout -s KILL 130 python3 benchmarks/bench_prefill.py --heads 16/32 --modes graph --impls gdn:wgmma,fla --no-progress \
  --no-plot --no-host-overhead --out $OUT/table --tag prefill >$OUT/table.log 2>&1; echo "table rc=$?"
grep -E "^\| (1x|8x|32x|varlen)" $OUT/table/prefill.md | awk -F'|' '{printf "%s %s %s %s\n", $2, $5, $6, $8}'
echo "$((SECONDS-t0)) s"
mkdir -p /tmp/wt_main && tar -xzf build/src_main.tgz -C /tmp/wt_main
inst /tmp/wt_main main; one main1 /tmp/wt_main
inst $REPO s20b; one s20 $REPO
echo "$((SECONDS-t0)) s"
fin 0
