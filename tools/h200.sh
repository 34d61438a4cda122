#!/usr/bin/env bash
# One parametrised H200 run: link the carried objects, then run the named tasks in order, each
# under a timeout (a hung kernel never eats the device budget), every log under $OUT; a short
# table last.  Replaces the per-run copies of these steps.
#
#   bash tools/h200.sh [--aot DIR] TASK...        (through the device tool; carry DIR, and .whl for fla)
#
# TASKS   suite     pytest -m gpu tests                         -> $OUT/gpu_suite.txt
#         table     bench_prefill, the README's table, with FLA -> $OUT/table/prefill.md
#         soak      soak_streams, gdn only, 20 runs of each mode -> $OUT/soak.md
#         peersoak  soak_streams over gdn, FLA and FlashInfer's two routes, 2 runs of 30 iterations
#                   of each mode -> $OUT/peersoak.md, .json (FlashInfer: PYTHONPATH from
#                   .peer3/install_peers.sh; an implementation not installed gets a "not installed" row)
#         many      bench_many_seqs --stages                    -> $OUT/many.md
#         spine     bench_spine --quick                         -> $OUT/spine.md
#         overlap   bench_overlap (the opt-in plan's split)     -> $OUT/overlap.md
#         numerics  the fp64 oracle table at T = 4K, 16K        -> $OUT/numerics.txt
#         numerics16  fp32 and bf16 state pools against the oracle at T = 4K, 64K -> $OUT/numerics16.md
#         mainjob   python -m gdn_prefill (the README's first command) -> $OUT/mainjob.log
#         host      a call's host cost, and a bare launch's      -> $OUT/host.log, launch_cost.log
#         wheel     the wheel built from the objects, installed alone, used (last: it uninstalls the editable package)
# The environment passes through (GDN_PREFILL_OVERLAP=1 soaks or times the opt-in overlap plan).
set -u
aot=build/aot
if [ "${1:-}" = "--aot" ]; then aot=$2; shift 2; fi
[ $# -gt 0 ] || { sed -n "2,/^set -u/p" "$0" | grep "^#"; exit 2; }
t0=$SECONDS
source "$(dirname "$0")/device_lib.sh"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
inst "$aot" run
echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'), objects $aot, $(date -u +%F)"
step() {  # name timeout_s command...
  local name=$1 limit=$2; shift 2
  timeout -s KILL "$limit" "$@" >"$OUT/$name.log" 2>&1
  echo "$name: rc=$? at $((SECONDS - t0)) s"
}
for task in "$@"; do
  case $task in
    suite)    step gpu_suite 330 python3 -m pytest -m gpu tests -q -p no:cacheprovider
              tail -1 "$OUT/gpu_suite.log" ;;
    table)    step table 280 python3 benchmarks/bench_prefill.py --heads 16/32 --modes graph \
                --impls gdn:wgmma,gdn:wgmma-overlap,fla --no-progress --no-plot --out "$OUT/table" --tag prefill
              grep -E "^\| (1x|8x|32x|varlen)" "$OUT/table/prefill.md" | awk -F'|' '{printf "%s %s %s %s\n", $2, $5, $6, $8}' ;;
    soak)     step soak 320 python3 benchmarks/soak_streams.py --impls gdn --runs 20 --iters 100 --md "$OUT/soak.md"
              grep "^|" "$OUT/soak.md" ;;
    peersoak) step peersoak 300 python3 benchmarks/soak_streams.py --impls gdn,fla,flashinfer,flashinfer-cp \
                --runs 2 --iters 30 --md "$OUT/peersoak.md" --json "$OUT/peersoak.json"
              grep "^|" "$OUT/peersoak.md" ;;
    many)     step many 200 python3 benchmarks/bench_many_seqs.py --ns 1K,16K,128K --stages --md "$OUT/many.md"
              grep "^|" "$OUT/many.md" ;;
    spine)    step spine 200 python3 benchmarks/bench_spine.py --quick --md "$OUT/spine.md"
              grep "^|" "$OUT/spine.md" ;;
    overlap)  step overlap 250 python3 benchmarks/bench_overlap.py --shapes 1x4K,1x8K,1x16K,1x64K --heads 16/32 \
                --slots 2,4,8 --md "$OUT/overlap.md"
              grep -E "^\| 1x" "$OUT/overlap.md" ;;
    numerics) num run ;;
    numerics16) step numerics16 200 python3 benchmarks/numerics_state_dtype.py --md "$OUT/numerics16.md"
              grep "^|" "$OUT/numerics16.md" ;;
    mainjob)  step mainjob 160 python3 -m gdn_prefill
              tail -12 "$OUT/mainjob.log" ;;
    host)     step host 100 python3 tools/host_overhead.py
              nvcc -O2 -arch=sm_90a -o /tmp/launch_cost tools/launch_cost.cu && step launch_cost 30 /tmp/launch_cost
              grep "^|" "$OUT/host.log"; grep -E "^\| (<<<|cuda)" "$OUT/launch_cost.log" ;;
    wheel)    python3 -m pip uninstall -y -q gdn-prefill >/dev/null 2>&1
              step wheel_build 200 env GDN_PREFILL_PREBUILT="$aot" python3 -m build --wheel --no-isolation \
                --skip-dependency-check --outdir /tmp/dist .
              python3 -m pip install -q --no-deps --target /tmp/wheelsite /tmp/dist/*.whl
              (cd /tmp && PYTHONPATH=/tmp/wheelsite:${PYTHONPATH:-} python3 "$OLDPWD/tools/wheel_smoke.py"); echo "wheel rc=$?" ;;
    *)        echo "unknown task: $task"; exit 2 ;;
  esac
done
echo "$((SECONDS - t0)) s"
