#!/usr/bin/env bash
# Session 39 device run 4: the rest of the GPU suite on gp2 (run 3 ran the single-plan subset), and
# FlashInfer's first part staged for run 6's engine rows.
source lab/device_lib.sh
bash .peer1/stage.sh
tar xJf build/carry8/gp2.tar.xz -C build
inst build/slim_gp2 gp2
step rest 330 python3 -m pytest -m gpu tests -q -p no:cacheprovider -rfE -k "not (single or fused or sanitizer or concurrent)"
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/rest.log" | tail -12
step fla1 60 python3 -m pytest -m gpu tests/test_gpu_fla_layout.py -q -p no:cacheprovider -rfE -k "single or fused or sanitizer or concurrent"
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/fla1.log" | tail -5
(cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log)
echo "total $((SECONDS - T0)) s"
