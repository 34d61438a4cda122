#!/usr/bin/env bash
# Scratch device run B (FlashInfer part 2 staged): ncu of our single kernel at 8x4K 16/32 (fr build).
source lab/device_lib.sh
bash .peer2/stage.sh
[ -d build/slim_fr ] || { tar xJf build/fr.tar.xz -C build; inst build/slim_fr fr; }
source lab/ncu.sh gdn gdn
(cd "$OUT" && tar czf logsB.tgz *.log && rm -f *.log)
echo "total $((SECONDS - T0)) s"
