#!/usr/bin/env bash
# run 116: why run 115's cheaper row norms (build/aot_nrm) made stage 1 slower: ncu (--set full, source
# counters) of stage 1 at 8x4K on main (build/aot) and on nrm; per barrier-delimited segment: executed
# warp instructions and shared-memory wavefronts per CTA, stall samples (tools/ncu_hot.py --phases).
#   carry: build/aot build/aot_nrm build/run116.sh
set -u
export PYTHONUNBUFFERED=1; t0=$SECONDS
inst() { GDN_PREFILL_PREBUILT=$1 timeout -s KILL 90 python3 -m pip install -q --no-build-isolation --no-deps -e . >/tmp/build_$2.log 2>&1 || { tail -20 /tmp/build_$2.log; exit 1; }; }
prof() {  # dir tag
  inst $1 $2
  timeout -s KILL 150 ncu --clock-control none --set full --import-source no -k regex:recompute -c 1 -o /tmp/wu_$2 \
    python3 tools/profile_one.py 8x4096 fused >/tmp/ncu_$2.log 2>&1 || tail -3 /tmp/ncu_$2.log
  ncu -i /tmp/wu_$2.ncu-rep --page source --csv --print-source sass > /tmp/src_$2.csv 2>/dev/null
  ncu -i /tmp/wu_$2.ncu-rep --page details > $OUT/details_$2.txt 2>&1
  { echo "== $2"; grep -E "^ +Duration|Registers Per|Warp Cycles Per Issued|Issue Slots Busy|Achieved Occupancy|Executed Ipc A|L1/TEX Hit|Mem Busy|Max Bandwidth" $OUT/details_$2.txt
    python3 tools/ncu_hot.py /tmp/src_$2.csv --top 30 --phases --ctas 16640 --cubin "$(ls $1/cubin/recompute_wu_bf16_betaf32_a16_pqk/*.cubin)"; } > $OUT/hot_$2.txt 2>&1
  grep -E "^==|Duration|Issue Slots|seg |^[0-9]+ SASS" $OUT/hot_$2.txt
  echo "$((SECONDS-t0)) s"
}
prof build/aot main
head -1 /tmp/src_main.csv | tr ',' '\n' | head -60 > $OUT/src_columns.txt
prof build/aot_nrm nrm
tar -czf $OUT/src_csv.tgz -C /tmp src_main.csv src_nrm.csv
