#!/usr/bin/env bash
# Warm after c5 (carry .gpu .whl): the Qwen3.5 head counts' one-prompt cells on main's objects, FlashInfer beside.
source lab/s54/common.sh
[ -f /tmp/peers_ok ] || { echo "no FlashInfer"; exit 3; }
b qe $(( $(left) * 55 / 100 )) --impls gdn:wgmma,flashinfer --heads 16/64,8/32,16/48,16/16 --modes graph --qk-l2norm --pool --shapes 1x32K,1x8K
b qp $(( $(left) - 12 )) --impls gdn:wgmma,flashinfer --heads 16/64,16/48,2/8 --modes graph --shapes 1x32K
pack c6; echo "done at $((SECONDS-T0)) s"
