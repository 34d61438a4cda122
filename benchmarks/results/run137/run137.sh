#!/usr/bin/env bash
# run 137 (session 24): the whole GPU suite at the default (serial) plan after run 136's -x stop
# (the threads4 test's heartbeat lines interleaved: fixed), and where the many-sequences time goes
# (the fused plan's two launches alone).  Carry build/aot, .whl.  (The sweep test, still being written, is left out.)
# Prediction: suite all pass; at 4 tokens per sequence stage 1 and the spine each cost ~0.1-0.2 us
# per sequence (Hv = 4): per-CTA fixed costs (a 64-row chunk computed for 4 rows; a spine CTA's
# prologue, state zeroing and epilogue), neither dominated by the other.
set -u
t0=$SECONDS
source tools/device_lib.sh
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
inst build/aot new
timeout -s KILL 330 python3 -m pytest -m gpu tests -q -p no:cacheprovider --ignore=tests/test_malformed_sweep.py >"$OUT/gpu_suite.txt" 2>&1; tail -4 "$OUT/gpu_suite.txt"
echo "suite done $((SECONDS-t0)) s"
timeout -s KILL 120 python3 benchmarks/bench_many_seqs.py --ns 1K,16K,128K --spines wgmma --stages --reps 5 \
  --md "$OUT/many_stages.md" >"$OUT/many_stages.log" 2>&1; echo "many rc=$?"; grep "^|" "$OUT/many_stages.md"
echo "$((SECONDS-t0)) s"
