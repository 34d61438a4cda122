#!/usr/bin/env bash
# Run 143 (session 25): spine_rs's chunk loop without the checkpoint code (segments of
# checkpoint_chunks, the store between them): the one-sequence rows A/B against 247b7a4's objects,
# and the checkpoint tests, on the fixed build.
set -u
source tools/device_lib.sh
export SHAPES=1x8K,1x64K
inst build/aot_s25c new; pre new
inst build/aot old; pre old
inst build/aot_s25c new
timeout -s KILL 60 python3 -m pytest -m gpu tests/test_gpu_prefill.py -q -p no:cacheprovider -k "checkpoints and rs" \
  > "$OUT/ck_tests.log" 2>&1; echo "checkpoint tests: $(tail -1 "$OUT/ck_tests.log")"
