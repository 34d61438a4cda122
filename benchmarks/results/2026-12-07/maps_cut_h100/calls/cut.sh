#!/usr/bin/env bash
# branch maps-cut: main objects (.gpu/aot) against the cut (.gpu/cutdelta: the files that differ), FlashInfer beside, on one
# long prompt at mid heads, fast and mixed gates; then the GPU tests of the segmented plan on the cut.
# After stage.sh 1 and 2; carry .peer3 .gpu .whl.  END default 560.
source lab/s54/common.sh
S="--impls gdn:wgmma,flashinfer --heads 4/16,8/16,2/8,4/8 --modes graph --qk-l2norm --pool --shapes 1x32K,1x64K,1x8K"
b base $(( $(left) * 20 / 100 )) $S
b basem $(( $(left) * 25 / 100 )) $S --gates mixed
rm -rf /tmp/cut; cp -r .gpu/aot /tmp/cut; cp -r .gpu/cutdelta/. /tmp/cut/; rm -f gdn_prefill/_ext*.so; GDN_PREFILL_PREBUILT=/tmp/cut python3 setup.py build_ext --inplace > /tmp/build2.log 2>&1; echo "cut build rc=$?"
b cut $(( $(left) * 33 / 100 )) $S
b cutm $(( $(left) * 50 / 100 )) $S --gates mixed
timeout -s KILL $(( $(left) - 20 )) python3 -m pytest -q -n 6 -p xdist tests/test_gpu_prefill.py -k "seg" \
  tests/test_numerics_hard.py tests/test_distributed.py > /tmp/r/tests.log 2>&1; echo "tests rc=$?: $(tail -1 /tmp/r/tests.log)"
cp /tmp/r/tests.log $OUT/; pack cut; echo "done at $((SECONDS-T0)) s"
