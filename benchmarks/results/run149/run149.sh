#!/usr/bin/env bash
# Run 149 (session 26): context parallelism's ranks emulated on one GPU at R = 4 and 8 (1M tokens,
# 16/32): run 146's R = 2 predicted ~20 ms per rank at R = 4 and ~10 at R = 8 against 27.3 for one GPU.
set -u
t0=$SECONDS
source tools/device_lib.sh
inst build/aot main
for R in 4 8; do
  timeout -s KILL 100 python3 benchmarks/bench_context_parallel.py --emulate $R --tokens 1M --md "$OUT/cp_emulate$R.md" \
    > "$OUT/cp_emulate$R.log" 2>&1
  echo "R=$R rc=$? at $((SECONDS - t0)) s"; grep "^| [0-9]" "$OUT/cp_emulate$R.md"; tail -1 "$OUT/cp_emulate$R.log"
done
