#!/usr/bin/env bash
# Call 3 (~8 min), at once after call 2: the README's rows, gdn (call 1's verdict: kp or main), FLA and
# FlashInfer in one process: engine style (--qk-l2norm --pool; graph and eager; the README's engine
# table and 1x32K at 16/32) and pre-normed (graph; the single plan's rows and 1x32K).
#   bash lab/next/s3_tables.sh       Carry: nothing (call 1 left build/ and /tmp/peersite)
N=$(dirname "$0")     # this folder, relative to the repo root
source $N/device_lib.sh
if [ ! -f /tmp/peersite/.partA ] || [ ! -f /tmp/peersite/.partB ]; then echo "no FlashInfer: the machine went cold; calls 1-2 again"; exit 3; fi
V=$(cat /tmp/gdn_verdict 2>/dev/null || echo new); echo "gdn build: slim_$V"
[ -d build/slim_$V ] || { echo "build/slim_$V missing: the machine went cold"; exit 3; }
peers
inst build/slim_$V $V
LIMIT=${LIMIT:-590}; fits() { [ $((SECONDS - T0 + $1)) -lt $LIMIT ]; }   # skip a step that would not end in time
M8=4096+2048+1024+512+256+128+64+64          # the README's mixed 8K
M16=5000+3000+2000+1500+1200+1000+800+600+400+300+200+200+100+84   # mixed 16K
P="--impls gdn:wgmma,fla,flashinfer --warm-s 0.2 --rep-budget-s 0.15 --max-reps 30 --no-progress --no-plot --no-host-overhead"
step e16 170 python3 benchmarks/bench_prefill.py --heads 16/32 --modes graph,eager --qk-l2norm --pool \
  --shapes 8x4K,32x2K,4x2K,16x512,$M8,$M16,1x32K $P --out "$OUT/e16" --tag prefill_engine_pool_16-32
grep -E "^\| " "$OUT/e16/"*.md | grep -v "^|---" | awk -F'|' '{print $2,$3,$5,$6,$7}'
fits 90 && step p16 90 python3 benchmarks/bench_prefill.py --heads 16/32 --modes graph \
  --shapes 8x4K,32x2K,4x2K,16x512,2048+2048+2048+1500+700+100,1x32K $P --out "$OUT/p16" --tag prefill_16-32_prenormed
grep -E "^\| " "$OUT/p16/"*.md | grep -v "^|---" | awk -F'|' '{print $2,$3,$5,$6}'
fits 130 && step e8 130 python3 benchmarks/bench_prefill.py --heads 8/16,4/8 --modes graph,eager --qk-l2norm --pool \
  --shapes 8x4K,16x512,1x32K,$M16 $P --out "$OUT/e8" --tag prefill_engine_pool_8-16_4-8
grep -E "^\| " "$OUT/e8/"*.md | grep -v "^|---" | awk -F'|' '{print $2,$3,$5,$6,$7}'
fits 75 && step p8 75 python3 benchmarks/bench_prefill.py --heads 8/16,4/8 --modes graph --shapes 8x4K,16x512,1x32K $P \
  --out "$OUT/p8" --tag prefill_8-16_4-8_prenormed
grep -E "^\| " "$OUT/p8/"*.md | grep -v "^|---" | awk -F'|' '{print $2,$3,$5,$6,$7}'
# at most 8 files come back: the four tables in one Markdown file, everything in one archive
(cd "$OUT" && cat e16/*.md p16/*.md e8/*.md p8/*.md > tables.md 2>/dev/null; tar czf tables_s3.tgz e16 p16 e8 p8 *.log && rm -rf e16 p16 e8 p8 *.log)
echo "total $((SECONDS - T0)) s"
