#!/usr/bin/env bash
# Run 159: the final build (compose_f32 on the tensor cores) beside the peers; FlashInfer travels in
# three parts over consecutive calls (phases 1-3), phase 4 while the machine is still up.
#   1: part 1; the GPU suite
#   2: part 2, FLA; the numerics table of the segmented plan
#   3: part 3 (FlashInfer installed); the README's few-heads rows, ours beside FLA and FlashInfer,
#      graph and eager, host time; the soak over the peers
#   4: the many-sequences rows with their floor column, beside the peers
#   5: ncu of compose_f32 at 1 x 32768, 2/4 (the planner's segments)
set -u
phase=${1:-1}
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site
source tools/device_lib.sh
if [ "$phase" = 1 ]; then inst build/aot run159; else python3 -c "import gdn_prefill._ext" 2>/dev/null || inst build/aot run159; fi
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout -s KILL "$limit" "$@" >"$OUT/$name.log" 2>&1; echo "$name: rc=$? at $((SECONDS - t0)) s"; }
peers() { export PYTHONPATH=/tmp/peersite:/tmp/peersite/nvidia_cutlass_dsl/dsl_packages:/tmp/site; }
common="--impls gdn:wgmma,fla,flashinfer --no-progress --no-plot --warm-s 0.5 --rep-budget-s 0.25 --max-reps 60"
case $phase in
1) bash .peer1/stage.sh
   step gpu_suite 300 python3 -m pytest -m gpu tests -q -p no:cacheprovider
   tail -3 "$OUT/gpu_suite.log" ;;
2) bash .peer2/stage.sh
   step numerics 200 python3 benchmarks/numerics_plans.py --T 4096,32768,65536 --heads 2/4,16/32 --md "$OUT/numerics.md" \
     --json "$OUT/numerics.json"
   grep "^|" "$OUT/numerics.md" || tail -5 "$OUT/numerics.log" ;;
3) bash .peer3/install_peers.sh | tail -2; peers
   step few 330 python3 benchmarks/bench_prefill.py --heads 2/4,4/8 --shapes 1x8K,1x32K,4x2K,16x512,8x4K $common \
     --modes graph,eager --out "$OUT/few" --tag prefill
   grep -E "^\| " "$OUT/few/prefill.md" | head -40
   step peersoak 240 python3 benchmarks/soak_streams.py --impls gdn,fla,flashinfer,flashinfer-cp --runs 2 --iters 30 \
     --md "$OUT/peersoak.md" --json "$OUT/peersoak.json"
   grep "^|" "$OUT/peersoak.md" || tail -5 "$OUT/peersoak.log" ;;
4) peers
   step many24 260 python3 benchmarks/bench_prefill.py --heads 2/4 --shapes 1Kx4,16Kx4,128Kx4 $common --modes graph \
     --no-host-overhead --out "$OUT/many24" --tag prefill
   grep -E "^\| " "$OUT/many24/prefill.md" | head -20
   step many1632 200 python3 benchmarks/bench_prefill.py --heads 16/32 --shapes 64x4K,256x1K,1Kx512 $common --modes graph \
     --no-host-overhead --out "$OUT/many1632" --tag prefill
   grep -E "^\| " "$OUT/many1632/prefill.md" | head -20 ;;
5) OUT=$OUT bash tools/ncu_kernel.sh compose compose 1x32768 rule 2/4 | head -30 ;;
esac
