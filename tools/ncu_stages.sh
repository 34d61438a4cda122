#!/usr/bin/env bash
# Duration and DRAM traffic of each kernel of one prefill (the second of two calls of
# tools/profile_one.py), measured by ncu (gpu__time_duration, dram__bytes_read/write), per shape:
#   bash tools/ncu_stages.sh 1x8192 8x4096 ...      (needs an installed gdn_prefill)
set -u
OUT=${OUT:-/tmp/gdn_out}; mkdir -p "$OUT"
for shape in "$@"; do
  timeout 300 ncu --clock-control none --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum --csv \
    python3 tools/profile_one.py "$shape" >"$OUT/ncu_stages_$shape.csv" 2>"$OUT/ncu_stages_$shape.log" \
    || tail -5 "$OUT/ncu_stages_$shape.log"
  python3 - "$OUT/ncu_stages_$shape.csv" "$shape" <<'PY'
import csv, io, sys
text = open(sys.argv[1]).read()
rows = list(csv.DictReader(io.StringIO(text[text.find('"ID"'):])))
launches = {}
for r in rows:                          # one row per (launch, metric)
    launches.setdefault(r["ID"], {"name": r["Kernel Name"]})[r["Metric Name"]] = (r["Metric Unit"], r["Metric Value"])
scale = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3,
         "byte": 1e-6, "Kbyte": 1e-3, "Mbyte": 1.0, "Gbyte": 1e3}
def val(m, name):
    unit, v = m.get(name, ("byte", "0"))
    return float(v.replace(",", "")) * scale[unit]
ids = sorted(launches, key=int)
half = ids[len(ids) // 2:]              # the second prefill call
tot = rd_t = wr_t = 0.0
print(f"== {sys.argv[2]}   {'kernel':<50} {'us':>9} {'DRAM rd MB':>11} {'wr MB':>8} {'GB/s':>7}")
for i in half:
    m = launches[i]
    us, rd, wr = val(m, "gpu__time_duration.sum"), val(m, "dram__bytes_read.sum"), val(m, "dram__bytes_write.sum")
    tot, rd_t, wr_t = tot + us, rd_t + rd, wr_t + wr
    print(f"  {m['name'][:60]:<60} {us:9.1f} {rd:11.1f} {wr:8.1f} {(rd + wr) / us * 1e3:7.0f}")
print(f"  {'sum':<60} {tot:9.1f} {rd_t:11.1f} {wr_t:8.1f}")
PY
done
