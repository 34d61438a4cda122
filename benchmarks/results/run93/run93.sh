#!/usr/bin/env bash
# run 93: release check of main after the dual-build merge (tools/h200_release_check.sh's steps with
# the spine microbenchmark --quick and no launch_cost): GPU suite, main job, prefill benchmark with
# FLA 0.6.0 in the same process (README's table), spine --quick, host overhead, wheel smoke.
set -u
FINAL=$OUT; export OUT=/tmp/r93; mkdir -p $OUT; export PYTHONUNBUFFERED=1; t0=$SECONDS
fin() { tar -C /tmp -czf $FINAL/run93.tgz r93; exit $1; }
timeout -s KILL 200 bash tools/h200_check.sh 2>&1 | grep -E "passed|failed|FAILED" | tail -8
echo "suite $((SECONDS-t0)) s"
export PYTHONPATH=/tmp/site
timeout -s KILL 100 python3 -m gdn_prefill >"$OUT/main_job.txt" 2>&1; echo "main job rc=$?"; tail -3 $OUT/main_job.txt
timeout -s KILL 180 python3 benchmarks/bench_prefill.py --heads 16/32 --budget-s 110 --no-progress \
  --out "$OUT/bench" >$OUT/bench.txt 2>&1; echo "bench rc=$? $((SECONDS-t0)) s"
grep -E "^\| (1x|8x|32x|varlen)" $OUT/bench.txt | grep -E "gdn:wgmma \||fla"
timeout -s KILL 90 python3 benchmarks/bench_spine.py --quick --json "$OUT/spine.json" --md "$OUT/spine.md" >$OUT/spine.txt 2>&1
echo "spine rc=$?"; grep -E "^\| (scalar|wgmma)" $OUT/spine.md | tail -12
timeout -s KILL 60 python3 tools/host_overhead.py >"$OUT/host_overhead.md" 2>&1; echo "host rc=$?"
grep -E "prefill\(\)|one DSL" "$OUT/host_overhead.md"
python3 -m pip uninstall -y -q gdn-prefill >/dev/null 2>&1
GDN_PREFILL_PREBUILT=build/aot timeout -s KILL 120 python3 -m build --wheel --no-isolation --skip-dependency-check --outdir /tmp/dist . \
  >$OUT/wheel.log 2>&1 || tail -20 $OUT/wheel.log
python3 -m pip install -q --no-deps --target /tmp/wheelsite /tmp/dist/*.whl
(cd /tmp && PYTHONPATH=/tmp/wheelsite:/tmp/site timeout -s KILL 60 python3 "$OLDPWD/tools/wheel_smoke.py") > $OUT/wheel_smoke.txt 2>&1; echo "wheel rc=$?"; tail -2 $OUT/wheel_smoke.txt
echo "$((SECONDS-t0)) s"
fin 0
