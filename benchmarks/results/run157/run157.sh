#!/usr/bin/env bash
# Run 157: FlashInfer's call site (gdn_prefill.flashinfer_api) on the GPU, bit for bit against
# prefill(); the segmented plan's tests once more on the objects of the helper refactor (SASS
# identical to run 154's, compared on the CPU).
set -u
source tools/device_lib.sh
inst build/aot run157
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout -s KILL "$limit" "$@" >"$OUT/$name.log" 2>&1; echo "$name: rc=$? at $((SECONDS - t0)) s"; }
step fi_door 90 python3 -m pytest -m gpu tests/test_flashinfer_api.py -q -p no:cacheprovider
tail -2 "$OUT/fi_door.log"
step seg_tests 90 python3 -m pytest -m gpu tests/test_gpu_prefill.py -q -p no:cacheprovider -k "seg"
tail -2 "$OUT/seg_tests.log"
