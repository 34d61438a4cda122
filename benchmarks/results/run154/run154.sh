#!/usr/bin/env bash
# Run 154 (first of three calls in a row; FlashInfer's bundle part 1 rides along): the GPU suite on
# the final build, and the soak of the segmented plan (1 x 32768 at 2/4: two streams, four threads,
# each result bitwise against one stream).
set -u
bash .peer1/stage.sh
source tools/device_lib.sh
inst build/aot run154
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout -s KILL "$limit" "$@" >"$OUT/$name.log" 2>&1; echo "$name: rc=$? at $((SECONDS - t0)) s"; }
step gpu_suite 340 python3 -m pytest -m gpu tests -q -p no:cacheprovider
tail -4 "$OUT/gpu_suite.log"
step soak 150 python3 benchmarks/soak_streams.py --shape 1x32768 --heads 2/4 --runs 4 --iters 40 --md "$OUT/soak.md"
grep "^|" "$OUT/soak.md" || tail -5 "$OUT/soak.log"
