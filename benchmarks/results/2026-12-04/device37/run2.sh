#!/usr/bin/env bash
# Scratch device run 2 (FlashInfer part 2 staged): the whole GPU suite on the swr build.
source lab/device_lib.sh
bash .peer2/stage.sh
[ -d build/slim_swr ] || tar xJf build/swr.tar.xz -C build
inst build/slim_swr swr
step suite 480 python3 -m pytest -m gpu tests -q -p no:cacheprovider -rfEs -x --durations=10
grep -E "^(FAILED|ERROR|SKIPPED)|passed|failed" "$OUT/suite.log" | tail -25
(cd "$OUT" && tar czf logs2.tgz *.log && rm -f *.log)
echo "total $((SECONDS - T0)) s"
