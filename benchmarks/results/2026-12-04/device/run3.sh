#!/usr/bin/env bash
# Scratch device run 3 (FlashInfer part 1 staged): the e2 build (ro + the role's next K K^T under
# its inverse) verified and timed.
source tools/device_lib.sh
bash .peer1/stage.sh
inst build/slim_e2 e2
step smoke 60 python3 benchmarks/bench_fused.py --smoke; grep single "$OUT/smoke.log"
step tests 120 python3 -m pytest -m gpu tests/test_gpu_prefill.py tests/test_numerics_hard.py -k single -q -p no:cacheprovider -rfE
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/tests.log" | tail -3
step san 120 compute-sanitizer --tool racecheck --error-exitcode 9 python3 benchmarks/bench_fused.py --smoke
grep -E "RACECHECK SUMMARY" "$OUT/san.log"
step ab 60 python3 lab/ab.py --tag e2 --rows 8x4K:16/32,32x2K:16/32,4x2K:16/32,16x512:16/32,8x4K:8/16,16x512:8/16,16x512:4/8
grep ^AB "$OUT/ab.log"
step abl 40 python3 lab/ab.py --tag e2 --l2norm --rows 8x4K:16/32,16x512:8/16; grep ^AB "$OUT/abl.log"
(cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log)
echo "total $((SECONDS - T0)) s"
