#!/usr/bin/env bash
# Session 51 call 5 (warm machine, peers and build in place): 16/16 engine-style, then the Qwen3.5
# ratios pre-normed; gdn, FLA, FlashInfer in one process per part, graph mode.
set -u; export PYTHONUNBUFFERED=1; T0=$SECONDS; OUT=${OUT:-/tmp/out}; END=${END:-540}
export PYTHONPATH=$PWD:$(cat /tmp/pp)
b() { local tag=$1 lim=$2; shift 2
  timeout -s KILL $((lim + 15)) python3 benchmarks/bench_prefill.py --modes graph --impls gdn:wgmma,fla,flashinfer \
    --warm-s 0.3 --rep-budget-s 0.12 --min-reps 8 --no-plot --no-progress --no-host-overhead --budget-s $lim \
    --out "$OUT" --tag $tag "$@" > "$OUT/$tag.log" 2>&1; echo "$tag rc=$? at $((SECONDS-T0)) s"
  python3 lab/s50/table.py "$OUT/$tag.json" 2>&1 | tee "$OUT/$tag.md"; }
b qwen35_engine_1616 90 --heads 16/16 --shapes 16x512,8x4K,1x32768,varlen16,1x8K --qk-l2norm --pool
b qwen35_prenormed $(( END - (SECONDS - T0) - 30 )) --heads qwen3.5 --shapes 16x512,8x4K,1x32768
