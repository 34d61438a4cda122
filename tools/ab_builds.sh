#!/usr/bin/env bash
# A/B of prebuilt kernel directories on one Hopper host, in one device call: for each directory,
# link it, run the GPU tests of the fused plan, time each kernel with ncu (tools/ncu_stages.sh)
# and the whole prefill in graph mode (gdn only; FLA too with FLA=1 and .whl/ carried).
#   bash tools/ab_builds.sh build/aot build/aot_exp          (results in ${OUT:-/tmp/gdn_out}/<dir>)
#   SHAPES="1x8192 8x4096" PYTEST_K="fused or stage" bash tools/ab_builds.sh ...
#   PACK=1 bash tools/ab_builds.sh ...   (then $OUT holds one ab_builds.tgz: the device tool returns
#                                          only a few files per call, run 74 lost most of its)
set -u
OUT=${OUT:-/tmp/gdn_out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
SHAPES=${SHAPES:-1x8192 8x4096 32x2048}
PYTEST_K=${PYTEST_K:-wgmma or fused or spine or stage or graph or search}
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
for d in "$@"; do
  tag=$(basename "$d"); mkdir -p "$OUT/$tag"
  GDN_PREFILL_PREBUILT=$d python3 -m pip install -q --no-build-isolation --no-deps -e . >"$OUT/$tag/build.log" 2>&1 \
    || { echo "$tag: build failed"; tail -20 "$OUT/$tag/build.log"; continue; }
  echo "### $tag"
  timeout 240 python3 -m pytest -m gpu tests -q -p no:cacheprovider --timeout 100 -x -k "$PYTEST_K" 2>&1 | tail -2
  OUT=$OUT/$tag timeout 150 bash tools/ncu_stages.sh $SHAPES 2>&1 | grep -E "==|recompute|spine|fwd_o|sum"
  impls=gdn:wgmma; [ "${FLA:-0}" = 1 ] && impls=gdn:wgmma,fla
  timeout 150 python3 benchmarks/bench_prefill.py --shapes 1x1K,1x8K,8x4K,32x2K,varlen16,1x64K --heads 16/32 \
    --modes graph --rep-budget-s 0.2 --max-reps 50 --no-progress --no-plot --no-host-overhead \
    --impls "$impls" --out "$OUT/$tag" --tag prefill >"$OUT/$tag/bench.log" 2>&1
  grep -E "^\| (1x|8x|32x|varlen)" "$OUT/$tag/prefill.md" || tail -5 "$OUT/$tag/bench.log"
done
if [ "${PACK:-0}" = 1 ]; then
  tmp=$(mktemp -d) && tar -czf "$tmp/ab_builds.tgz" -C "$OUT" . && rm -rf "${OUT:?}"/* && mv "$tmp/ab_builds.tgz" "$OUT/"
fi
