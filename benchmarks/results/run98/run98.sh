#!/usr/bin/env bash
# run 98: main d4a7ad9 (the dual lead rule with a per-CTA fixed cost; objects build/aot_n) — smoke,
# GPU suite, bench_spine --rs-skew; the same rows with the previous rule (build/aot_h: aot_n with
# d468efd's dual objects); then build/series.py (per-replay time series + SM clock: the harness gap).
#   carry: build/aot_n build/aot_h build/run98.sh build/smoke_dual.py build/series.py
set -u
REPO=$PWD; FINAL=$OUT; export OUT=/tmp/r98; mkdir -p $OUT; export PYTHONUNBUFFERED=1; t0=$SECONDS
fin() { tar -C /tmp -czf $FINAL/run98.tgz r98; exit $1; }
inst() { GDN_PREFILL_PREBUILT=$1 timeout -s KILL 90 python3 -m pip install -q --no-build-isolation --no-deps -e . >$OUT/build_$2.log 2>&1 || { tail -20 $OUT/build_$2.log; fin 1; }; }
inst build/aot_n n
timeout -s KILL 40 python3 build/smoke_dual.py 2>&1 | tail -3
[ ${PIPESTATUS[0]} = 0 ] || { echo "smoke failed or hung"; fin 1; }
timeout -s KILL 150 python3 -m pytest -m gpu tests -q -p no:cacheprovider -x >$OUT/gpu.txt 2>&1; tail -2 $OUT/gpu.txt
grep -E "^(FAILED|ERROR)" $OUT/gpu.txt | head -5
timeout -s KILL 120 python3 benchmarks/bench_spine.py --rs-skew --md $OUT/skew_n.md --json $OUT/skew_n.json >$OUT/skew_n.log 2>&1 || tail -3 $OUT/skew_n.log
cat $OUT/skew_n.md; echo "$((SECONDS-t0)) s"
inst build/aot_h h
timeout -s KILL 120 python3 benchmarks/bench_spine.py --rs-skew --md $OUT/skew_h.md --json $OUT/skew_h.json >$OUT/skew_h.log 2>&1 || tail -3 $OUT/skew_h.log
cat $OUT/skew_h.md; echo "$((SECONDS-t0)) s"
inst build/aot_n n2
timeout -s KILL 120 python3 build/series.py 8x4K varlen16 2>&1 | tail -12
echo "$((SECONDS-t0)) s"
fin 0
