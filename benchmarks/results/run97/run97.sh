#!/usr/bin/env bash
# run 97 (prepared in session 15): branch spine-rs-dual-skew (build/src_sk.tgz + build/aot_sk)
# against main (working tree + build/aot).  Smoke first under a hard timeout, then the branch's GPU
# suite, bench_spine --rs-skew and the prefill on both.
#   carry: build/aot build/aot_sk build/src_sk.tgz build/run97.sh build/smoke_dual.py .whl
set -u
REPO=$PWD; FINAL=$OUT; export OUT=/tmp/r97; mkdir -p $OUT; export PYTHONUNBUFFERED=1; t0=$SECONDS
fin() { tar -C /tmp -czf $FINAL/run97.tgz r97; exit $1; }
pre() {  # tag
  mkdir -p $OUT/$1
  timeout -s KILL 80 python3 benchmarks/bench_prefill.py --shapes 1x1K,1x8K,8x4K,32x2K,varlen16,1x64K --heads 16/32 \
    --modes graph --rep-budget-s 0.2 --max-reps 50 --no-progress --no-plot --no-host-overhead \
    --impls gdn:wgmma --out "$OUT/$1" --tag prefill >"$OUT/$1/bench.log" 2>&1
  echo "$1: $(grep -E "^\| (1x|8x|32x|varlen)" "$OUT/$1/prefill.md" | awk -F'|' '{printf "%s %s, ", $2, $6}')"
}
mkdir -p /tmp/wt_sk && tar -xzf build/src_sk.tgz -C /tmp/wt_sk && cd /tmp/wt_sk
GDN_PREFILL_PREBUILT=$REPO/build/aot_sk python3 -m pip install -q --no-build-isolation --no-deps -e . >$OUT/build_sk.log 2>&1 || { tail -20 $OUT/build_sk.log; fin 1; }
timeout -s KILL 40 python3 $REPO/build/smoke_dual.py 2>&1 | tail -3
[ ${PIPESTATUS[0]} = 0 ] || { echo "smoke failed or hung"; fin 1; }
timeout -s KILL 150 python3 -m pytest -m gpu tests -q -p no:cacheprovider -x >$OUT/sk_gpu.txt 2>&1; tail -2 $OUT/sk_gpu.txt
grep -E "^(FAILED|ERROR)" $OUT/sk_gpu.txt | head -5
timeout -s KILL 90 python3 benchmarks/bench_spine.py --rs-skew --md $OUT/skew_sk.md >$OUT/skew_sk.log 2>&1 || tail -3 $OUT/skew_sk.log
cat $OUT/skew_sk.md
pre sk; echo "$((SECONDS-t0)) s"
cd $REPO && GDN_PREFILL_PREBUILT=build/aot python3 -m pip install -q --no-build-isolation --no-deps -e . >$OUT/build_main.log 2>&1 || fin 1
timeout -s KILL 90 python3 benchmarks/bench_spine.py --rs-skew --md $OUT/skew_main.md >$OUT/skew_main.log 2>&1 || tail -3 $OUT/skew_main.log
cat $OUT/skew_main.md
pre main; echo "$((SECONDS-t0)) s"
fin 0
