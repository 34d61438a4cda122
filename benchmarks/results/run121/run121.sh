#!/usr/bin/env bash
# run 121: GDN_OVERLAP_SPLIT_PCT 25 -> 15 (run 120's sweep), alternated whole-prefill timing of the
# one-sequence rows, same objects (build/aot_tma = main daa2cc1); the header is edited between installs.
#   carry: build/aot_tma build/run121.sh
set -u
export PYTHONUNBUFFERED=1; t0=$SECONDS
inst() { sed -i "s/^#define GDN_OVERLAP_SPLIT_PCT [0-9]*/#define GDN_OVERLAP_SPLIT_PCT $1/" include/gdn/gdn_abi.h
  GDN_PREFILL_PREBUILT=build/aot_tma timeout -s KILL 90 python3 -m pip install -q --no-build-isolation --no-deps -e . >/tmp/build_$2.log 2>&1 || { tail -20 /tmp/build_$2.log; exit 1; }
  python3 -c "from gdn_prefill import _ext; import sys" || exit 1; }
pre() {  # tag
  mkdir -p /tmp/$1
  timeout -s KILL 50 python3 benchmarks/bench_prefill.py --shapes 1x8K,1x16K,1x64K --heads 16/32 \
    --modes graph --no-progress --no-plot --no-host-overhead --impls gdn:wgmma --out "/tmp/$1" --tag prefill >"/tmp/$1/bench.log" 2>&1
  echo "$1: $(grep -E "^\| (1x|8x|32x|varlen)" "/tmp/$1/prefill.md" | awk -F'|' '{printf "%s %s, ", $2, $6}')" | tee -a $OUT/prefill_ab.txt
}
inst 15 s15; pre s15a
inst 25 s25; pre s25a
inst 15 s15b; pre s15b
inst 25 s25b; pre s25b
echo "$((SECONDS-t0)) s"
