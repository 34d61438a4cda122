#!/usr/bin/env bash
# Right after c3n and the two stage calls (carry .peer3 .gpu .whl; the -16 build in place): FlashInfer
# beside main's objects: pre-normed one prompt at 8/32, 8/24, 16/16, 4/16; engine style fast and mixed.
source lab/s54/common.sh
[ -f /tmp/peers_ok ] || { echo "no FlashInfer"; exit 3; }
b pre $(( $(left) * 40 / 100 )) --impls gdn:wgmma,flashinfer --heads 8/32,8/24,16/16,4/16 --modes graph --shapes 1x32K,1x8K
b engf $(( $(left) * 45 / 100 )) --impls gdn:wgmma,flashinfer --heads 4/16,8/16,2/8,8/24 --modes graph --qk-l2norm --pool --shapes 1x32K
b engm $(( $(left) - 15 )) --impls gdn:wgmma,flashinfer --heads 4/16,8/16,2/8,8/24 --modes graph --qk-l2norm --pool --shapes 1x32K --gates mixed
pack c5; echo "done at $((SECONDS-T0)) s"
