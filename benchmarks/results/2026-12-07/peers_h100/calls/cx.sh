#!/usr/bin/env bash
# engine style graph, FLA and FlashInfer in the same process: README heads, then Qwen3.5 heads
source calls/common.sh
b e $(( $(left) * 42 / 100 )) --impls gdn:wgmma,fla,flashinfer --heads 16/32,8/16,4/8 --modes graph --qk-l2norm --pool \
  --shapes 8x4K,16x512,$M16,1x32K
b q $(( $(left) - 25 )) --impls gdn:wgmma,flashinfer --heads 16/64,8/32,4/16,2/8,16/48,8/24,16/16 --modes graph --qk-l2norm --pool \
  --shapes 16x512,8x4K,1x32K
pack cx; echo "done at $((SECONDS-T0)) s"
