#!/usr/bin/env bash
# Run 144 (session 26): the whole GPU suite on main's final objects (ea0caa6; tests/test_distributed.py's
# GPU half among them), issue 33 step 1 (branch issue33-intra-chunk, exported to ic_tree/: its GPU test
# and bench_intra_chunk), issue 35's two open measurements (numerics16, a bf16 pool's timing row).
set -u
t0=$SECONDS
source tools/device_lib.sh
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
fi
nvidia-smi --query-gpu=name,clocks.sm,driver_version --format=csv,noheader
inst build/aot main
echo "installed at $((SECONDS - t0)) s"
timeout -s KILL 300 python3 -m pytest -m gpu tests -q -p no:cacheprovider > "$OUT/gpu_suite.log" 2>&1
echo "suite rc=$? at $((SECONDS - t0)) s: $(tail -1 "$OUT/gpu_suite.log")"; grep -E "^(FAILED|ERROR)" "$OUT/gpu_suite.log" | head -20
grep -E "test_distributed" "$OUT/gpu_suite.log" | head -5
timeout -s KILL 100 python3 benchmarks/bench_checkpoints.py --pools fp32,bf16 --shapes 8x4K,1x8K --every 1024 \
  --md "$OUT/checkpoints.md" > "$OUT/checkpoints.log" 2>&1
echo "checkpoints rc=$? at $((SECONDS - t0)) s"; grep "^|" "$OUT/checkpoints.md"
# issue 33 step 1 on the branch's tree and objects
( cd ic_tree && cp -r ../.whl . 2>/dev/null; mkdir -p build && ln -sfn ../../build/aot_ic build/aot_ic
  inst build/aot_ic ic
  echo "ic installed at $((SECONDS - t0)) s"
  timeout -s KILL 90 python3 -m pytest -m gpu tests/test_gpu_prefill.py -q -p no:cacheprovider -k intra_chunk > "$OUT/ic_test.log" 2>&1
  echo "ic test rc=$? at $((SECONDS - t0)) s: $(tail -1 "$OUT/ic_test.log")"; grep -E "^(FAILED|E  )" "$OUT/ic_test.log" | head -20
  timeout -s KILL 90 python3 benchmarks/bench_intra_chunk.py --shapes 1x8K,1x64K,8x4K > "$OUT/ic_bench.log" 2>&1
  echo "ic bench rc=$? at $((SECONDS - t0)) s"; grep "^|" "$OUT/ic_bench.log"; tail -3 "$OUT/ic_bench.log" )
inst build/aot main
timeout -s KILL 150 python3 benchmarks/numerics_state_dtype.py --md "$OUT/numerics16.md" > "$OUT/numerics16.log" 2>&1
echo "numerics16 rc=$? at $((SECONDS - t0)) s"; grep "^|" "$OUT/numerics16.md"; tail -3 "$OUT/numerics16.log"
