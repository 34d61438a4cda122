#!/usr/bin/env bash
# Session 50, the measuring call: FlashInfer (if staged) installed, the merged build linked from
# carried objects, the batch-invariance and README GPU tests, then the Qwen3.5 rows engine-style
# with FLA (and FlashInfer) in one process.   END: seconds this call may take.
set -u
export PYTHONUNBUFFERED=1
T0=$SECONDS; OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; END=${END:-570}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
PP=/tmp/site
if [ -d .peer3 ]; then
  bash .peer3/install_peers.sh > "$OUT/peers.log" 2>&1 && PP=/tmp/peersite:/tmp/peersite/nvidia_cutlass_dsl/dsl_packages:/tmp/site
  grep -m1 -o "PEERS_OK\|install_peers: .*" "$OUT/peers.log"
fi
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
python3 -c "import setuptools, sys; sys.exit(int(setuptools.__version__.split('.')[0]) < 77)" || \
  sed -i 's/^license = "Apache-2.0"/license = { text = "Apache-2.0" }/; /^license-files/d' pyproject.toml
GDN_PREFILL_PREBUILT=.gpu/aot python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1; echo "build rc=$? at $((SECONDS-T0)) s"
export PYTHONPATH=$PWD:/tmp/site
timeout -s KILL 150 python3 -m pytest -q -p no:cacheprovider -rf tests/test_gpu_batch_invariant.py tests/test_readme_api.py \
  > "$OUT/inv_tests.log" 2>&1
echo "tests rc=$? at $((SECONDS-T0)) s"; grep -E "passed|failed|FAILED|Error" "$OUT/inv_tests.log" | head -12
export PYTHONPATH=$PWD:$PP
B=$(( END - (SECONDS - T0) - 25 ))
timeout -s KILL $(( B + 20 )) python3 benchmarks/bench_prefill.py --heads ${HEADS:-16/64,4/16,2/8,16/48,8/32,8/24,16/16} \
  --shapes ${SHAPES:-16x512,8x4K,1x32768,varlen16,1x8K} --modes ${MODES:-graph} \
  --impls gdn:wgmma,gdn:invariant,fla${FI:-,flashinfer} --qk-l2norm --pool --warm-s 0.3 --rep-budget-s 0.12 --min-reps 8 \
  --no-plot --no-progress --no-host-overhead --budget-s $B --out "$OUT" --tag qwen35_engine > "$OUT/bench.log" 2>&1
echo "bench rc=$? at $((SECONDS-T0)) s"; tail -3 "$OUT/bench.log"
python3 lab/s50/table.py "$OUT/qwen35_engine.json" 2>&1 | tee "$OUT/table.md"
