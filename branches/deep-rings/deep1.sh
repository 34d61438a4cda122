#!/usr/bin/env bash
# Session 41's candidates for issue 53 (no device that session), call 1 of 2: correctness of dr.
#   f16b = main 79069b5's objects (build/carry10), sk = split key sums (branch split-keys,
#   5c9472f), dr = sk + KQ 4 slots / P 3 + loads K,q a chunk ahead + table a chunk behind
#   (branch deep-rings) -- build/carry12.  The arithmetic is the same in all three: dr's and sk's
#   single-plan outputs must equal f16b's bit for bit (tools/bitwise_outputs.py --runs single).
# Run with the deep-rings branch checked out (its tools/bitwise_outputs.py has --runs single).
source lab/device_lib.sh
for b in f16b; do [ -d build/slim_$b ] || tar xJf build/carry10/$b.tar.xz -C build; done
for b in sk dr; do [ -d build/slim_$b ] || tar xJf build/carry12/$b.tar.xz -C build; done
inst build/slim_dr dr
step smoke 60 python3 benchmarks/bench_fused.py --smoke; tail -2 "$OUT/smoke.log"
step bw_dr 120 python3 tools/bitwise_outputs.py --runs single,prefill --save /tmp/bw_dr.pt; tail -1 "$OUT/bw_dr.log"
inst build/slim_sk sk
step bw_sk 120 python3 tools/bitwise_outputs.py --runs single,prefill --save /tmp/bw_sk.pt; tail -1 "$OUT/bw_sk.log"
inst build/slim_f16b f16b
step bw_main 120 python3 tools/bitwise_outputs.py --runs single,prefill --save /tmp/bw_main.pt; tail -1 "$OUT/bw_main.log"
for b in dr sk; do
  step cmp_$b 60 python3 tools/bitwise_outputs.py --compare /tmp/bw_main.pt /tmp/bw_$b.pt; cat "$OUT/cmp_$b.log"
done
inst build/slim_dr dr
step tests 240 python3 -m pytest -m gpu tests/test_gpu_prefill.py tests/test_numerics_hard.py tests/test_fused_plan.py \
  tests/test_gpu_sanitizer.py tests/test_gpu_concurrency.py -q -p no:cacheprovider -rfE -k "single or fused or sanitizer or concurrent"
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/tests.log" | tail -12
(cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log)
echo "total $((SECONDS - T0)) s"
