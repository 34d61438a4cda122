#!/usr/bin/env bash
# Issue 53 candidates prepared in the 41st session (no device then), call 1 of 4: correctness.
#   f16b = main's objects (build/carry10); build/carry12: sk = split-keys, sp = sk-phys (row sums
#   read in storage order), dr = deep-rings (sk + KQ 4 slots / P 3, K,q loads a chunk ahead, the
#   table a chunk behind), dp = deep-rings-phys (dr + sp).
# Expected bits against main (tools/bitwise_outputs.py --runs single,prefill): sk and dr the same
# everywhere (same arithmetic); sp and dp the same on pre-normed cases, different in the last bits
# where l2norm runs in the kernel (l2norm_16_32: rk, rq summed in another order).
# Then dp's single-plan GPU tests (all of dr's and sp's code), sanitizers and concurrency.
# Run with the deep-rings-phys branch checked out (tools/bitwise_outputs.py --runs single).
source lab/device_lib.sh
[ -d build/slim_f16b ] || tar xJf build/carry10/f16b.tar.xz -C build
for b in sk sp dr dp; do [ -d build/slim_$b ] || tar xJf build/carry12/$b.tar.xz -C build; done
inst build/slim_dp dp
step smoke 60 python3 benchmarks/bench_fused.py --smoke; tail -2 "$OUT/smoke.log"
for b in dp dr sp sk f16b; do
  [ $b = dp ] || inst build/slim_$b $b
  step bw_$b 90 python3 tools/bitwise_outputs.py --runs single,prefill --save /tmp/bw_$b.pt; tail -1 "$OUT/bw_$b.log"
done
for b in dp dr sp sk; do
  echo "== $b against main"; python3 tools/bitwise_outputs.py --compare /tmp/bw_f16b.pt /tmp/bw_$b.pt | tee "$OUT/cmp_$b.txt"
done
inst build/slim_dp dp
step tests 240 python3 -m pytest -m gpu tests/test_gpu_prefill.py tests/test_numerics_hard.py tests/test_fused_plan.py \
  tests/test_gpu_sanitizer.py tests/test_gpu_concurrency.py -q -p no:cacheprovider -rfE -k "single or fused or sanitizer or concurrent"
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/tests.log" | tail -12
(cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log)
echo "total $((SECONDS - T0)) s"
