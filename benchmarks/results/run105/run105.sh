#!/usr/bin/env bash
# run 105: main b9e9060 (stage 1 merges on mma.sync, build/aot): the overlap plan replay by replay
# (tools/overlap_parts.py, fixed grouping), the README table with FLA 0.6.0 in the same process, then
# the overlap plan's second part at four CTAs per SM (build/aot_o4) against three (main), alternated.
#   carry: build/aot build/aot_o4 build/run105.sh .whl
set -u
REPO=$PWD; FINAL=$OUT; export OUT=/tmp/r105; mkdir -p $OUT; export PYTHONUNBUFFERED=1; t0=$SECONDS
fin() { tar -C /tmp -czf $FINAL/run105.tgz r105; exit $1; }
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
inst() { GDN_PREFILL_PREBUILT=$1 timeout -s KILL 90 python3 -m pip install -q --no-build-isolation --no-deps -e . >$OUT/build_$2.log 2>&1 || { tail -20 $OUT/build_$2.log; fin 1; }; }
one() {  # tag
  mkdir -p $OUT/$1
  timeout -s KILL 45 python3 benchmarks/bench_prefill.py --shapes 1x8K,1x16K,1x64K --heads 16/32 --modes graph \
    --no-progress --no-plot --no-host-overhead --impls gdn:wgmma --out "$OUT/$1" --tag prefill >"$OUT/$1/bench.log" 2>&1
  echo "$1: $(grep -E "^\| (1x|8x|32x|varlen)" "$OUT/$1/prefill.md" | awk -F'|' '{printf "%s %s, ", $2, $6}')"
}
inst build/aot main
timeout -s KILL 90 python3 tools/overlap_parts.py 1x8192 1x16384 1x65536 --reps 60 >$OUT/parts_main.txt 2>&1; grep -v Warn $OUT/parts_main.txt | grep -v _warn
echo "$((SECONDS-t0)) s"
timeout -s KILL 150 python3 benchmarks/bench_prefill.py --heads 16/32 --modes graph --impls gdn:wgmma,fla --no-progress \
  --no-plot --no-host-overhead --out $OUT/table --tag prefill >$OUT/table.log 2>&1; echo "table rc=$?"
grep -E "^\| (1x|8x|32x|varlen)" $OUT/table/prefill.md | awk -F'|' '{printf "%s %s %s %s\n", $2, $5, $6, $8}'
echo "$((SECONDS-t0)) s"
one main1
inst build/aot_o4 o4; one o4a
timeout -s KILL 60 python3 tools/overlap_parts.py 1x8192 1x65536 --reps 40 >$OUT/parts_o4.txt 2>&1; grep -E "==|median|half" $OUT/parts_o4.txt
inst build/aot main2; one main2
inst build/aot_o4 o4b; one o4b
echo "$((SECONDS-t0)) s"
fin 0
