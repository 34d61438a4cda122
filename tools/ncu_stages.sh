#!/usr/bin/env bash
# Duration of each kernel of one prefill (the second of two calls of tools/profile_one.py),
# measured by ncu (gpu__time_duration), for each shape given:
#   bash tools/ncu_stages.sh 1x8192 8x4096 ...      (needs an installed gdn_prefill)
set -u
OUT=${OUT:-/tmp/gdn_out}; mkdir -p "$OUT"
for shape in "$@"; do
  timeout 300 ncu --clock-control none --metrics gpu__time_duration.sum --csv \
    python3 tools/profile_one.py "$shape" >"$OUT/ncu_stages_$shape.csv" 2>"$OUT/ncu_stages_$shape.log" \
    || tail -5 "$OUT/ncu_stages_$shape.log"
  python3 - "$OUT/ncu_stages_$shape.csv" "$shape" <<'PY'
import csv, io, sys
text = open(sys.argv[1]).read()
rows = list(csv.DictReader(io.StringIO(text[text.find('"ID"'):])))
rows = [r for r in rows if r.get("Metric Name") == "gpu__time_duration.sum"]
half = rows[len(rows) // 2:]            # the second prefill call
tot = 0.0
print(f"== {sys.argv[2]}")
for r in half:
    scale = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3}[r["Metric Unit"]]
    us = float(r["Metric Value"].replace(",", "")) * scale
    tot += us
    print(f"  {r['Kernel Name'][:60]:<60} {us:9.1f} us")
print(f"  {'sum':<60} {tot:9.1f} us")
PY
done
