#!/usr/bin/env bash
# run 138 (session 24): issue 32's soak, and the README table at the default (serial) plan with the
# opt-in overlap plan's row beside it and FLA 0.6.0 in the same process.  Carry build/aot, .whl.
# (The GPU suite ran on these objects in the sweep helper's call: 626 passed, 7 skipped.)
# Predictions: soak, default plan, 20 runs of each mode at 1x8192 16/32: 0 hangs, 0 mismatches.
# Table: the batched rows as run 133 (same kernels, serial plan) within the between-machines spread
# (8x4K ~615-630, 32x2K ~1260-1295, varlen16 ~640-660 us); the one-sequence rows now serial:
# 1x8K ~230 (run 132: 230.1), 1x64K ~1750 (run 131: 1749), 1x1K ~39 (below the overlap's minimum);
# the gdn:wgmma-overlap row ~179 / ~1440 as run 133.
set -u
t0=$SECONDS
source tools/device_lib.sh
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
inst build/aot new
timeout -s KILL 300 python3 benchmarks/soak_streams.py --runs 20 --iters 100 --md "$OUT/soak.md" --json "$OUT/soak.json" \
  >"$OUT/soak.log" 2>&1; echo "soak rc=$? $((SECONDS-t0)) s"; grep "^|" "$OUT/soak.md"
left=$((590 - (SECONDS - t0)))
timeout -s KILL $left python3 benchmarks/bench_prefill.py --heads 16/32 --modes graph --impls gdn:wgmma,gdn:wgmma-overlap,fla \
  --no-progress --no-plot --out $OUT/table --tag prefill >$OUT/table.log 2>&1; echo "table rc=$?"
grep -E "^\| (1x|8x|32x|varlen)" $OUT/table/prefill.md | awk -F'|' '{printf "%s %s %s %s\n", $2, $5, $6, $8}'
grep -i -A6 "host" $OUT/table/prefill.md | head -8
echo "$((SECONDS-t0)) s"
