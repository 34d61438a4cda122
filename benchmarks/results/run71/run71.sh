#!/usr/bin/env bash
# run 71: racecheck of spine_rs per build and plan (solo with slot reuse, pair serial, pair overlap)
set -u
OUT=${OUT:-/tmp/gdn_out}; mkdir -p "$OUT"; export PYTHONUNBUFFERED=1
GDN_PREFILL_PREBUILT=build/aot_a python3 -m pip install -q --no-build-isolation --no-deps -e . >"$OUT/build.log" 2>&1 || { tail -5 "$OUT/build.log"; exit 1; }
for c in solo_reuse pair_serial pair_overlap; do
  ov=0; [ $c = pair_overlap ] && ov=1
  GDN_PREFILL_OVERLAP=$ov timeout 100 compute-sanitizer --tool racecheck --racecheck-report hazard python3 build/race_probe.py $c >"$OUT/race_$c.txt" 2>&1
  echo "== $c rc=$?"; grep -E "^$c|SUMMARY|case done" "$OUT/race_$c.txt"
done
