#!/usr/bin/env bash
# Run 142 (session 25): bf16 state pools (32 objects) — the GPU tests of this session's features on
# them; the one-sequence rows A/B against 247b7a4's objects on one machine (run 141's 1x8K / 1x64K
# were 6-8 % above run 138's, on a host whose prefill() cost 21 us instead of 12); the host table.
set -u
source tools/device_lib.sh
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
fi
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
inst build/aot_s25b new
timeout -s KILL 200 python3 -m pytest -m gpu tests -q -p no:cacheprovider \
  -k "bf16 or fla or initial or checkpoint or sweep or guard or opcheck" > "$OUT/gpu_tests.log" 2>&1
echo "gpu tests rc=$?: $(tail -1 "$OUT/gpu_tests.log")"; grep "^FAILED" "$OUT/gpu_tests.log" | head
timeout -s KILL 90 python3 tools/host_overhead.py > "$OUT/host.log" 2>&1; grep -E "prefill\(\) \(|chunk_gated|workspace=None" "$OUT/host.log"
export SHAPES=1x8K,1x64K,8x4K
for round in 1 2; do
  inst build/aot old; pre old
  inst build/aot_s25b new; pre new
done
