#!/usr/bin/env bash
# Session 50's device call, no FlashInfer (the device came too late for its three transfers): the
# merged build (renames, rings) linked from carried objects; the new GPU tests; the GPU tests of
# what the merge touched (wg2's ring phase, the single plan's renamed kernel, stage names); then the
# Qwen3.5 rows engine-style with FLA and batch_invariant's cost; a short table last.
set -u
export PYTHONUNBUFFERED=1
T0=$SECONDS; OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; END=${END:-165}
left() { echo $((END - (SECONDS - T0))); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
python3 -c "import setuptools, sys; sys.exit(int(setuptools.__version__.split('.')[0]) < 77)" || \
  sed -i 's/^license = "Apache-2.0"/license = { text = "Apache-2.0" }/; /^license-files/d' pyproject.toml
GDN_PREFILL_PREBUILT=.gpu/aot python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1; echo "build rc=$? at $((SECONDS-T0)) s"
export PYTHONPATH=$PWD:/tmp/site
t() { local name=$1 lim=$2; shift 2; timeout -s KILL "$lim" python3 -m pytest -q -p no:cacheprovider -rf "$@" > "$OUT/$name.log" 2>&1
      echo "$name rc=$? at $((SECONDS-T0)) s: $(grep -E '[0-9]+ (passed|failed)' "$OUT/$name.log" | tail -1)"
      grep -E "^FAILED" "$OUT/$name.log" | head -6; }
t inv 120 tests/test_gpu_batch_invariant.py tests/test_readme_api.py
[ "$(left)" -gt 150 ] && t merged 50 tests/test_gpu_prefill.py -k "wg2 or single_plan_runs or register_state"
B=$(( $(left) - 20 ))
timeout -s KILL $(( B + 15 )) python3 benchmarks/bench_prefill.py --heads ${HEADS:-16/64,2/8,16/32} \
  --shapes ${SHAPES:-16x512,8x4K,1x32768,varlen16} --modes graph --impls gdn:wgmma,gdn:invariant${FLA:-} --qk-l2norm --pool \
  --warm-s 0.3 --rep-budget-s 0.12 --min-reps 8 --no-plot --no-progress --no-host-overhead --budget-s $B \
  --out "$OUT" --tag qwen35_engine > "$OUT/bench.log" 2>&1
echo "bench rc=$? at $((SECONDS-T0)) s"; tail -2 "$OUT/bench.log"
python3 lab/s50/table.py "$OUT/qwen35_engine.json" 2>&1 | tee "$OUT/table.md"
