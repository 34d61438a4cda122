#!/usr/bin/env bash
# Prepared in session 39 for the next device run (issue 54): spine_rs's table warp observes its
# ring's empty barrier through the pipeline object (ring.sync_object_empty.wait) instead of a raw
# mbarrier_wait (branches/spine-rs-table-wait-via-ring.patch).  SASS: 37 of 40 objects the same
# instructions up to register names, the three pair builds the same count (2590/2878) with
# another register allocation.  A/B against main (gp2 = daf6cb5's objects): the serial plan
# ("two": recompute_wu + spine_rs) at batched rows, the pair build at 1 x 8192, the maps build
# through the segmented rows; then spine_rs's GPU tests on srw.  Predicted: within noise.
# Slim builds in build/carry9 (gp2, srw); if gone: rebuild main (python -m cute_kernels.aot) and
# apply the patch and rebuild the 40 spine_rs objects into a copy (cute_kernels.aot --one spine_rs V).
source lab/device_lib.sh
for b in gp2 srw; do tar xJf build/carry9/$b.tar.xz -C build; done
R="1x8K:16/32,8x4K:16/32,16x512:16/32,1x8K:4/8,16x512:4/8,8x4K:2/4"
for b in gp2 srw gp2 srw; do
  inst build/slim_$b $b
  step ab_$b 60 python3 lab/ab.py --tag $b --two --rows "$R" --reps 15; grep ^AB "$OUT/ab_$b.log" | tee -a "$OUT/ab.txt"
  segrows $b
done
step tests 240 python3 -m pytest -m gpu tests/test_gpu_prefill.py tests/test_gpu_sanitizer.py tests/test_gpu_concurrency.py \
  -q -p no:cacheprovider -rfE -k "spine or fused or pair or dual or segment or sanitizer or concurrent"
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/tests.log" | tail -12
(cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log)
echo "total $((SECONDS - T0)) s"
