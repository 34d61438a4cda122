#!/usr/bin/env bash
# Run 156 (third call; FlashInfer installed from the three parts): the README's table, ours beside FLA
# 0.6.0 and FlashInfer 0.7.2.post1 in one process per head set, graph and eager, host time per call.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
bash .peer3/install_peers.sh | tail -2
export PYTHONPATH=/tmp/peersite:/tmp/peersite/nvidia_cutlass_dsl/dsl_packages:/tmp/site
source tools/device_lib.sh
python3 -c "import gdn_prefill._ext" 2>/dev/null || inst build/aot run156
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout -s KILL "$limit" "$@" >"$OUT/$name.log" 2>&1; echo "$name: rc=$? at $((SECONDS - t0)) s"; }
common="--impls gdn:wgmma,fla,flashinfer --modes graph,eager --no-progress --no-plot --warm-s 0.5 --rep-budget-s 0.25 --max-reps 60"
step few 300 python3 benchmarks/bench_prefill.py --heads 2/4,4/8 --shapes 1x8K,1x32K,4x2K,16x512,8x4K $common \
  --out "$OUT/few" --tag prefill
grep -E "^\| " "$OUT/few/prefill.md" | head -40
step full 260 python3 benchmarks/bench_prefill.py --heads 16/32 --shapes 1x1K,1x8K,1x64K,8x4K,32x2K,varlen16 $common \
  --out "$OUT/full" --tag prefill --no-host-overhead
grep -E "^\| " "$OUT/full/prefill.md" | head -30
