#!/usr/bin/env bash
# run 103: diagnostics on main (build/aot): the overlap plan replay by replay (tools/overlap_parts.py)
# at 1x8K / 1x64K and several splits; ncu source-level stall samples of stage 1 at 8x4K.
#   carry: build/aot build/run103.sh
set -u
REPO=$PWD; FINAL=$OUT; export OUT=/tmp/r103; mkdir -p $OUT; export PYTHONUNBUFFERED=1; t0=$SECONDS
fin() { tar -C /tmp -czf $FINAL/run103.tgz r103; exit $1; }
GDN_PREFILL_PREBUILT=build/aot timeout -s KILL 90 python3 -m pip install -q --no-build-isolation --no-deps -e . >$OUT/build.log 2>&1 || { tail -20 $OUT/build.log; fin 1; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
timeout -s KILL 60 python3 tools/overlap_parts.py 1x8192 1x65536 --reps 60 2>&1 | tee $OUT/parts_rule.txt | grep -v "spans sorted"
for p in 10 35 50; do timeout -s KILL 40 python3 tools/overlap_parts.py 1x8192 --reps 60 --pct $p 2>&1 | tee $OUT/parts_8k_$p.txt | grep -E "==|median|half"; done
timeout -s KILL 60 python3 tools/overlap_parts.py 1x65536 --reps 30 --pct 40 2>&1 | tee $OUT/parts_64k_40.txt | grep -E "==|median|half"
echo "$((SECONDS-t0)) s"
OUT=$OUT/ncu timeout -s KILL 60 bash tools/ncu_stages.sh 8x4096 1x8192 2>&1 | grep -E "==|recompute|spine|sum"
timeout -s KILL 150 ncu --clock-control none --set full --import-source no -k regex:recompute -c 1 -o $OUT/wu8x4k python3 tools/profile_one.py 8x4096 fused >$OUT/ncu_wu.log 2>&1; tail -2 $OUT/ncu_wu.log
ncu -i $OUT/wu8x4k.ncu-rep --page source --csv --print-source sass > $OUT/wu_src.csv 2>/dev/null
python3 tools/ncu_hot.py $OUT/wu_src.csv --top 30 --phases --cubin "$(ls build/aot/cubin/recompute_wu_bf16_betaf32_a16_pqk/*.cubin | head -1)" > $OUT/wu_hot.txt 2>&1; head -70 $OUT/wu_hot.txt
ncu -i $OUT/wu8x4k.ncu-rep --page details --csv > $OUT/wu_details.csv 2>/dev/null
grep -E "Duration|Issue Slots Busy|Achieved Occupancy|Registers Per|Memory Throughput|L1/TEX Hit|Mem Pipes Busy|Executed Ipc A" $OUT/wu_details.csv | cut -c1-200 | head -20
echo "$((SECONDS-t0)) s"
fin 0
