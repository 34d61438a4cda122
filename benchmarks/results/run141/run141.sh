#!/usr/bin/env bash
# Run 141 (session 25): issue 35's initial_state / has_initial_state in every spine and the FLA
# layer's own entry (no flatten, per-stream workspace, no state copy): the whole GPU suite, the host
# table (the layer's cost by step), the README table with FLA, numerics.
set -u
bash tools/h200.sh --aot build/aot_s25 suite host table numerics
grep -E "passed|failed" "$OUT/gpu_suite.log" | tail -2
grep -E "^FAILED" "$OUT/gpu_suite.log" | head -20
grep -A3 "^Host overhead" "$OUT/table/prefill.md"; grep "chunk_gated\|gdn.prefill" "$OUT/table/prefill.md"
