#!/usr/bin/env bash
# Run 145 (session 26): issue 35's numerics table again (run 144's script reused one fp32 pool for
# both runs, fixed), the bf16 pool's timing twice; issue 36's one-GPU errors (tests -s) and the
# emulated ranks' times with the two passes side by side; the unfused plan's spines A/B:
# main's objects (checkpoint in the loop), branch unfused-ck-segments' (segmented), 247b7a4's.
set -u
t0=$SECONDS
source tools/device_lib.sh
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
fi
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
inst build/aot main
timeout -s KILL 100 python3 benchmarks/numerics_state_dtype.py --md "$OUT/numerics16.md" > "$OUT/numerics16.log" 2>&1
echo "numerics16 rc=$? at $((SECONDS - t0)) s"; grep "^| [0-9]" "$OUT/numerics16.md"
timeout -s KILL 100 python3 -m pytest -m gpu tests/test_distributed.py -q -s -p no:cacheprovider > "$OUT/distributed.log" 2>&1
echo "distributed rc=$? at $((SECONDS - t0)) s: $(tail -1 "$OUT/distributed.log")"; grep "context parallel emulated" "$OUT/distributed.log"
timeout -s KILL 120 python3 benchmarks/bench_context_parallel.py --emulate 2 --tokens 1M --md "$OUT/cp_emulate2.md" > "$OUT/cp_emulate2.log" 2>&1
echo "cp emulate rc=$? at $((SECONDS - t0)) s"; grep "^|" "$OUT/cp_emulate2.md"; tail -2 "$OUT/cp_emulate2.log"
for r in 1 2; do
  timeout -s KILL 60 python3 benchmarks/bench_checkpoints.py --pools fp32,bf16 --shapes 8x4K,1x8K --every 1024 \
    --md "$OUT/checkpoints$r.md" > "$OUT/checkpoints$r.log" 2>&1
  echo "checkpoints $r rc=$? at $((SECONDS - t0)) s"; grep "^| [0-9]" "$OUT/checkpoints$r.md"
done
export SHAPES=1x8K,8x4K
for tag in main ucs old main ucs; do
  case $tag in main) inst build/aot main ;; ucs) inst build/aot_ucs ucs ;; old) inst build/aot_247b7a4 old ;; esac
  pre $tag --impls gdn:wgmma-4k,gdn:scalar
  [ $((SECONDS - t0)) -gt 540 ] && { echo "time up at $((SECONDS - t0)) s"; break; }
done
echo "done at $((SECONDS - t0)) s"
