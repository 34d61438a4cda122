#!/usr/bin/env bash
# run 69: spine_wgmma latency build with 3 (main), 4, 5 ring stages (bench_spine wgmma, alternated
# s3 s4 s5 s3), GPU tests of s4/s5; then the pair spine's local own-CTA arrive (build/aot_fix):
# the sanitizer tests (memcheck, racecheck, synccheck, timed) and the fused plan's GPU tests.
set -u
OUT=${OUT:-/tmp/gdn_out}; mkdir -p "$OUT"; export PYTHONUNBUFFERED=1
inst() { GDN_PREFILL_PREBUILT=$1 python3 -m pip install -q --no-build-isolation --no-deps -e . >"$OUT/build_$(basename $1).log" 2>&1 || { tail -5 "$OUT/build_$(basename $1).log"; exit 1; }; }
n=0
for d in build/aot_fix build/aot_s4 build/aot_s5 build/aot_fix; do
  n=$((n+1)); tag=$(basename $d); inst $d
  if [ $tag != aot_fix ]; then
    echo "### tests $tag"
    timeout 100 python3 -m pytest -m gpu tests -q -p no:cacheprovider --timeout 60 -x \
      -k "(4k or stages or unaligned or long_sequence or deterministic or graph) and not overlap and not sanitizer" 2>&1 | tail -2
  fi
  timeout 80 python3 benchmarks/bench_spine.py --spines wgmma --json "$OUT/spine_${tag}_$n.json" >/tmp/sp.txt 2>&1
  echo "### spine $tag"; grep -E '^\| wgmma \|' /tmp/sp.txt | awk -F'|' '$4+0==1 {print $5, $7, $11}'
done
echo "### sanitizer (aot_fix)"
s=$(date +%s); timeout 300 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu_sanitizer.py -rfE --durations=5 2>&1 | tail -12 | tee "$OUT/san.txt"; echo "sanitizer $(( $(date +%s) - s )) s"
echo "### fused-plan GPU tests (aot_fix)"
timeout 150 python3 -m pytest -m gpu -q -p no:cacheprovider --timeout 60 tests/test_gpu_overlap.py tests/test_gpu_prefill.py 2>&1 | tail -3
