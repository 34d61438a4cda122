#!/usr/bin/env bash
# main with iso's objects (build/carry13/iso = main 289cd10's fused objects; the rest are main's):
# the whole GPU suite, sanitizers and concurrency included, under one cap.
source lab/device_lib.sh
[ -d build/slim_iso ] || tar xJf build/carry13/iso.tar.xz -C build
inst build/slim_iso iso
step suite 480 python3 -m pytest -m gpu tests/test_gpu_prefill.py tests/test_numerics_hard.py tests/test_fused_plan.py tests/test_gpu_sanitizer.py tests/test_gpu_concurrency.py -q -p no:cacheprovider -rfE -k "single or fused or sanitizer or concurrent or isolated"
grep -E "^(FAILED|ERROR)|passed|failed|error" "$OUT/suite.log" | tail -12
tail -c 600 "$OUT/suite.log" > "$OUT/suite_tail.txt"
(cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log)
echo "total $((SECONDS - T0)) s"
