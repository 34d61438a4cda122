#!/usr/bin/env bash
# run 99: release check of main (fb6a252; kernels = d4a7ad9's, build/aot) with the sustained-clock
# harness (--warm-s 1.5): GPU suite, main job, prefill benchmark with FLA 0.6.0 in the same process
# (README's table), host overhead, wheel smoke, spine --quick.  Results straight into $OUT.
#   carry: build/aot build/run99.sh .whl
set -u
export PYTHONUNBUFFERED=1; t0=$SECONDS
nvidia-smi dmon -s pc -d 1 > $OUT/dmon.txt 2>&1 &
timeout -s KILL 170 bash tools/h200_check.sh 2>&1 | grep -E "passed|failed|FAILED" | tail -8
cp $OUT/pytest.log $OUT/gpu_suite.log 2>/dev/null
echo "suite $((SECONDS-t0)) s"
export PYTHONPATH=/tmp/site
timeout -s KILL 150 python3 -m gdn_prefill >"$OUT/main_job.txt" 2>&1; echo "main job rc=$? $((SECONDS-t0)) s"
grep -E "^\| (1x|8x|32x|varlen)" $OUT/main_job.txt | grep -E "gdn:wgmma \||fla" | head -8
timeout -s KILL 200 python3 benchmarks/bench_prefill.py --heads 16/32 --budget-s 140 --no-progress \
  --out "$OUT/bench" >$OUT/bench.txt 2>&1; echo "bench rc=$? $((SECONDS-t0)) s"
grep -E "^\| (1x|8x|32x|varlen)" $OUT/bench.txt | grep -E "gdn:wgmma \||fla"
timeout -s KILL 50 python3 tools/host_overhead.py >"$OUT/host_overhead.md" 2>&1; echo "host rc=$?"
grep -E "prefill\(\)|one DSL" "$OUT/host_overhead.md"
python3 -m pip uninstall -y -q gdn-prefill >/dev/null 2>&1
GDN_PREFILL_PREBUILT=build/aot timeout -s KILL 100 python3 -m build --wheel --no-isolation --skip-dependency-check --outdir /tmp/dist . \
  >$OUT/wheel.log 2>&1 || tail -5 $OUT/wheel.log
python3 -m pip install -q --no-deps --target /tmp/wheelsite /tmp/dist/*.whl
(cd /tmp && PYTHONPATH=/tmp/wheelsite:/tmp/site timeout -s KILL 40 python3 "$OLDPWD/tools/wheel_smoke.py") > $OUT/wheel_smoke.txt 2>&1; echo "wheel rc=$?"; tail -2 $OUT/wheel_smoke.txt
echo "$((SECONDS-t0)) s"
GDN_PREFILL_PREBUILT=build/aot python3 -m pip install -q --no-build-isolation --no-deps -e . >/dev/null 2>&1
timeout -s KILL $((575-(SECONDS-t0))) python3 benchmarks/bench_spine.py --quick --json "$OUT/spine.json" --md "$OUT/spine.md" >$OUT/spine.txt 2>&1
echo "spine rc=$?"; grep -E "^\| (scalar|wgmma)" $OUT/spine.md | tail -12
kill %1 2>/dev/null
echo "$((SECONDS-t0)) s"
