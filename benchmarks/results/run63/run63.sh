#!/usr/bin/env bash
# run 63: branch spine-rs-out-wg (the fused spine's output in its own warpgroup, build/aot_ow)
# against main (build/aot): GPU tests of the fused plan on aot_ow; bench_spine's wgmma-o rows
# (ow, main, ow); the whole prefill in graph mode on both.
set -u
OUT=${OUT:-/tmp/gdn_out}; mkdir -p "$OUT"; export PYTHONUNBUFFERED=1
inst() { GDN_PREFILL_PREBUILT=$1 python3 -m pip install -q --no-build-isolation --no-deps -e . >"$OUT/build_$(basename $1).log" 2>&1 || { tail -5 "$OUT/build_$(basename $1).log"; exit 1; }; }
inst build/aot_ow
echo "### tests aot_ow"
timeout 260 python3 -m pytest -m gpu -q -p no:cacheprovider --timeout 60 -x tests/test_gpu_prefill.py tests/test_gpu_overlap.py tests/test_gpu_sanitizer.py 2>&1 | tail -4
n=0
for d in build/aot_ow build/aot build/aot_ow; do
  n=$((n+1)); tag=$(basename $d); inst $d
  timeout 120 python3 benchmarks/bench_spine.py --spines wgmma-o --json "$OUT/spine_${tag}_$n.json" >/tmp/sp.txt 2>&1
  echo "### spine $tag"; grep -E "^\| wgmma" /tmp/sp.txt | awk -F'|' '{print $3, $4, $5, $7}'
  if [ $n -le 2 ]; then
    timeout 120 python3 benchmarks/bench_prefill.py --shapes 1x1K,1x8K,1x64K,8x4K --heads 16/32 \
      --modes graph --rep-budget-s 0.2 --max-reps 50 --no-progress --no-plot --no-host-overhead \
      --impls gdn:wgmma --out "$OUT/prefill_$tag" --tag prefill >"$OUT/prefill_$tag.log" 2>&1
    echo "### prefill $tag"; grep -E "^\| (1x|8x)" "$OUT/prefill_$tag/prefill.md" || tail -5 "$OUT/prefill_$tag.log"
  fi
done
