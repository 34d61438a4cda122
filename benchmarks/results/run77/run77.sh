#!/usr/bin/env bash
# run 77: release check of session 13's final build (tools/h200_release_check.sh without the spine
# microbenchmark: the spine kernels are those of run 72), plus ncu of stage 1's launches at 1x8192
# (the overlap plan's second part must launch at 57,344 B, three CTAs per SM).  Everything is
# tarred into one file so that it all comes back.
set -u
FINAL=$OUT; export OUT=/tmp/r77; mkdir -p $OUT; export PYTHONUNBUFFERED=1
bash tools/h200_check.sh 2>&1 | grep -E "passed|failed|FAILED" | tail -8
export PYTHONPATH=/tmp/site
timeout 60 ncu --metrics launch__shared_mem_per_block_dynamic,launch__occupancy_limit_shared_mem -k regex:recompute_wu \
  python3 tools/profile_one.py 1x8192 >$OUT/ncu_wu_smem.txt 2>&1; grep -E "shared_mem" $OUT/ncu_wu_smem.txt | head -6
timeout 100 python3 -m gdn_prefill >"$OUT/main_job.txt" 2>&1; echo "main job rc=$?"; tail -4 $OUT/main_job.txt
timeout 170 python3 benchmarks/bench_prefill.py --heads 16/32 --budget-s 110 --no-progress \
  --out "$OUT/bench" >$OUT/bench.txt 2>&1; echo "bench rc=$?"
grep -E "^\| (1x|8x|32x|varlen)" $OUT/bench.txt
timeout 100 python3 tools/host_overhead.py >"$OUT/host_overhead.md" 2>&1; echo "host rc=$?"
grep -E "prefill\(\)|one DSL" "$OUT/host_overhead.md"
nvcc -O2 -arch=sm_90a -o /tmp/launch_cost tools/launch_cost.cu && /tmp/launch_cost >"$OUT/launch_cost.md" 2>&1
grep -E "^\| (<<<|cuda)" "$OUT/launch_cost.md"
python3 -m pip uninstall -y -q gdn-prefill >/dev/null 2>&1
GDN_PREFILL_PREBUILT=build/aot python3 -m build --wheel --no-isolation --skip-dependency-check --outdir /tmp/dist . \
  >/tmp/wheel.log 2>&1 || tail -20 /tmp/wheel.log
python3 -m pip install -q --no-deps --target /tmp/wheelsite /tmp/dist/*.whl
(cd /tmp && PYTHONPATH=/tmp/wheelsite:/tmp/site python3 "$OLDPWD/tools/wheel_smoke.py") >$OUT/wheel_smoke.txt 2>&1; echo "wheel rc=$?"; tail -3 $OUT/wheel_smoke.txt
tar -C /tmp -czf $FINAL/run77.tgz r77
