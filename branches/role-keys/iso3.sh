#!/usr/bin/env bash
# Session 42, call 3: the chosen build's GPU tests (single plan, sanitizers, concurrency).
# Usage: B=dk bash lab/next_iso3.sh (with that build's branch checked out: deep-rings-rk2 for dk,
# role-keys for rc, engine-keys for ek, deep-rings-ek for de, isolation for iso).
source lab/device_lib.sh
B=${B:-dk}
[ -d build/slim_$B ] || tar xJf build/carry13/$B.tar.xz -C build
inst build/slim_$B $B
step tests_$B 420 python3 -m pytest -m gpu tests/test_gpu_prefill.py tests/test_numerics_hard.py tests/test_fused_plan.py \
  tests/test_gpu_sanitizer.py tests/test_gpu_concurrency.py -q -p no:cacheprovider -rfE -k "single or fused or sanitizer or concurrent or isolated"
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/tests_$B.log" | tail -12
(cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log)
echo "total $((SECONDS - T0)) s"
