#!/usr/bin/env bash
# Scratch device run 4 (FlashInfer part 2 staged): ro timed on run 3's rows, right after e2.
source tools/device_lib.sh
bash .peer2/stage.sh
inst build/slim_ro ro
step ab 60 python3 lab/ab.py --tag ro --rows 8x4K:16/32,32x2K:16/32,4x2K:16/32,16x512:16/32,8x4K:8/16,16x512:8/16,16x512:4/8
grep ^AB "$OUT/ab.log"
step abl 40 python3 lab/ab.py --tag ro --l2norm --rows 8x4K:16/32,16x512:8/16; grep ^AB "$OUT/abl.log"
(cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log)
echo "total $((SECONDS - T0)) s"
