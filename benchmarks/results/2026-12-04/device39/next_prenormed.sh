#!/usr/bin/env bash
# Prepared in session 39 for the next device run (issue 53's Show): on the final build, the soak of
# the single plan, then (after .peer1/.peer2 staged by two short calls while the machine is warm:
# `bash .peerN/stage.sh`, carrying .peerN) FlashInfer installed and the README's pre-normed rows
# re-measured, gdn, FLA and FlashInfer in one process (the commands of prefill_16-32_prenormed.md
# and prefill_8-16_prenormed.md).  Needs lab/device_lib.sh (git show 3355726:.../device38/) and
# the final build's slim objects (carry it, e.g. build/carry9/gp2.tar.xz for daf6cb5's objects).
source lab/device_lib.sh
B=${BUILD:-gp2}
[ -d build/slim_$B ] || tar xJf build/carry9/$B.tar.xz -C build
inst build/slim_$B $B
if [ -z "${SKIP_SOAK:-}" ]; then
  step soak 200 python3 benchmarks/soak_streams.py --impls gdn --shape 8x2048 --heads 16/32 --runs 2 --iters 20
  tail -6 "$OUT/soak.log"
fi
if [ -n "${WITH_PEERS:-}" ]; then
  bash .peer3/install_peers.sh 2>&1 | tail -2
  peers
  P="--impls gdn:wgmma,fla,flashinfer --warm-s 0.3 --no-progress --no-plot --no-host-overhead"
  step p16 200 python3 benchmarks/bench_prefill.py --heads 16/32 --modes graph \
    --shapes 8x4K,32x2K,4x2K,16x512,2048+2048+2048+1500+700+100 $P --out "$OUT/p16" --tag prefill_16-32_prenormed
  grep -E "^\| " "$OUT/p16/"*.md | grep -v "^|---" | awk -F'|' '{print $2,$3,$5,$6}'
  step p8 200 python3 benchmarks/bench_prefill.py --heads 8/16 --modes graph,eager --rep-budget-s 0.15 --max-reps 30 \
    --shapes 8x4K,16x512,1x32K,5000+3000+2000+1500+1200+1000+800+600+400+300+200+200+100+84 $P --out "$OUT/p8" \
    --tag prefill_8-16_prenormed
  grep -E "^\| " "$OUT/p8/"*.md | grep -v "^|---" | awk -F'|' '{print $2,$3,$5,$6,$7}'
fi
(cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log)
echo "total $((SECONDS - T0)) s"
