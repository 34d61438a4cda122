#!/usr/bin/env bash
# Run 140 (session 25): state checkpoints (issue 35) in every spine and plan: the whole GPU suite
# on this build (test_checkpoints_against_oracle: 7 plans x 2 layouts x 2 intervals), the cost
# benchmark (bench_checkpoints: 8x4K, 1x8K, 1x64K, every 1024 and 256 tokens).
set -u
bash tools/h200.sh --aot build/aot_ck suite
timeout -s KILL 200 python3 benchmarks/bench_checkpoints.py --shapes 8x4K,1x8K,1x64K --every 1024,256 \
  --md "$OUT/checkpoints.md" > "$OUT/checkpoints.log" 2>&1; echo "bench_checkpoints rc=$?"
grep "^|" "$OUT/checkpoints.md"
grep -E "passed|failed" "$OUT/gpu_suite.log" | tail -3
grep -E "^FAILED|Error" "$OUT/gpu_suite.log" | head -20
