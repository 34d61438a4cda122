#!/usr/bin/env bash
# The session's one device call (session 49), in order of need, each step skipped once the call nears
# its limit: build the new extension from carried objects; the door and vLLM GPU tests; the GPU tests of
# prefill the change touches; the baseline (main 37d9a73) built beside it and an A/B of the engine-style
# rows (one pass each, base then new, then base again); a short table last.
set -u
export PYTHONUNBUFFERED=1
T0=$SECONDS
END=${END:-560}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
left() { echo $((END - (SECONDS - T0))); }
step() { local name=$1 limit=$2; shift 2; local l; l=$(left); [ "$l" -lt 30 ] && { echo "$name: skipped (time)"; return; }
         [ "$limit" -gt "$l" ] && limit=$l; timeout -s KILL "$limit" "$@" >"$OUT/$name.log" 2>&1; echo "$name: rc=$? at $((SECONDS - T0)) s"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
python3 -c "import setuptools, sys; sys.exit(int(setuptools.__version__.split('.')[0]) < 77)" || \
  sed -i 's/^license = "Apache-2.0"/license = { text = "Apache-2.0" }/; /^license-files/d' pyproject.toml
step build_new 200 env GDN_PREFILL_PREBUILT=.gpu/aot_new python3 setup.py build_ext --inplace
(cd .gpu/base && GDN_PREFILL_PREBUILT=build/aot timeout -s KILL 200 python3 setup.py build_ext --inplace > "$OUT/build_base.log" 2>&1; echo "build_base: rc=$?") &
export PYTHONPATH=$PWD:/tmp/site
step doors 200 python3 -m pytest -q -p no:cacheprovider -rf tests/test_gpu_doors.py tests/test_gpu_vllm.py tests/test_flashinfer_api.py
tail -4 "$OUT/doors.log"
step prefill_ck 120 python3 -m pytest -q -p no:cacheprovider -rf tests/test_gpu_prefill.py -k "checkpoint or initial_state or isolated or graph_replay"
tail -4 "$OUT/prefill_ck.log"
wait
ab() {   # tag root
  step "$1" 60 env PYTHONPATH="$2:/tmp/site" python3 benchmarks/bench_prefill.py --shapes "8x4K,16x512,varlen16,1x8K" --heads 16/32 \
    --modes graph --no-progress --no-plot --no-host-overhead --impls gdn:wgmma --qk-l2norm --pool --out "$OUT/$1" --tag prefill \
    --rep-budget-s 0.2 --warm-s 1.0
}
ab base_a_1 "$PWD/.gpu/base"; ab new_a_1 "$PWD"; ab base_a_2 "$PWD/.gpu/base"; ab new_a_2 "$PWD"
python3 lab/s70/ab_table.py "$OUT" | tee "$OUT/ab_table.md"
step guards 90 python3 -m pytest -q -p no:cacheprovider -rf tests/test_doors.py tests/test_guards.py tests/test_state_pools.py tests/test_vllm_adapter.py
tail -3 "$OUT/guards.log"
echo "total $((SECONDS - T0)) s"
