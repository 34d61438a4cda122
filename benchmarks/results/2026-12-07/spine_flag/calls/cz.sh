#!/usr/bin/env bash
# Without FlashInfer (carry .gpu .whl): these objects' overlap, concurrency, batch-invariance, vLLM and
# README tests; then engine style in graph mode beside FLA: the README's head counts and the Qwen3.5 ones.
source calls/common.sh
timeout -s KILL 150 python3 -m pytest -q -n 6 -p xdist tests/test_gpu_overlap.py tests/test_gpu_concurrency.py tests/test_gpu_batch_invariant.py tests/test_gpu_vllm.py tests/test_readme_api.py > /tmp/r/tests.log 2>&1
rc=$?; cp /tmp/r/tests.log "$OUT/"; echo "tests rc=$rc at $((SECONDS-T0)) s: $(tail -1 /tmp/r/tests.log)"
b z $(( $(left) - 25 )) --impls gdn:wgmma,fla --heads 16/32,8/16,4/8,16/64,8/32,4/16,2/8,16/48,8/24,16/16 --modes graph --qk-l2norm --pool \
  --shapes 8x4K,16x512,1x32K
pack cz; echo "done at $((SECONDS-T0)) s"
