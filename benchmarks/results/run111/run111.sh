#!/usr/bin/env bash
# run 111: why the one-sequence rows lost 3-5 % on the faster stage 1 (run 110): the overlap plan's parts
# per replay on main (build/aot), the new build (build/aot_new) and the new build with the second part at
# two CTAs per SM beside the spine (build/aot_o2); the split swept on the new build; then the owed
# bench_spine --rs-skew rows on the pre-order build (build/aot_pre) and the new one.
#   carry: build/aot build/aot_new build/aot_o2 build/aot_pre build/run111.sh
set -u
export PYTHONUNBUFFERED=1; t0=$SECONDS
inst() { GDN_PREFILL_PREBUILT=$1 timeout -s KILL 90 python3 -m pip install -q --no-build-isolation --no-deps -e . >/tmp/build_$2.log 2>&1 || { tail -20 /tmp/build_$2.log; exit 1; }; }
one() {  # tag
  mkdir -p /tmp/$1
  timeout -s KILL 60 python3 benchmarks/bench_prefill.py --shapes 1x8K,1x16K,1x64K,8x4K --heads 16/32 --modes graph \
    --no-progress --no-plot --no-host-overhead --impls gdn:wgmma --out "/tmp/$1" --tag prefill >"/tmp/$1/bench.log" 2>&1
  echo "$1: $(grep -E "^\| (1x|8x|32x|varlen)" "/tmp/$1/prefill.md" | awk -F'|' '{printf "%s %s, ", $2, $6}')" | tee -a $OUT/b1_ab.txt
}
parts() { { echo "== $1"; timeout -s KILL 60 python3 tools/overlap_parts.py 1x8192 1x65536 --reps 40 2>&1 | grep -v -i warn; } >> $OUT/parts.txt; }
inst build/aot_new new; one new1; parts new
echo "$((SECONDS-t0)) s"
inst build/aot_o2 o2; one o2a; parts o2
inst build/aot main; one main1; parts main


echo "$((SECONDS-t0)) s"
inst build/aot_new new3
timeout -s KILL 90 python3 benchmarks/bench_overlap.py --shapes 1x8K,1x64K --pcts 5,20 > $OUT/split_new.txt 2>&1; grep -E "split" $OUT/split_new.txt | head -12
echo "$((SECONDS-t0)) s"
timeout -s KILL 70 python3 benchmarks/bench_spine.py --rs-skew >$OUT/skew_new.txt 2>&1; grep -E "^\| [0-9m]" $OUT/skew_new.txt
inst build/aot_pre pre
timeout -s KILL 70 python3 benchmarks/bench_spine.py --rs-skew >$OUT/skew_pre.txt 2>&1; grep -E "^\| [0-9m]" $OUT/skew_pre.txt
echo "$((SECONDS-t0)) s"
