#!/usr/bin/env bash
# Branch device-check2, after c7.sh passed, .peer1 and .peer2 staged (FlashInfer's first two parts):
# FlashInfer installed; build A as in c7.sh if this machine lacks it; one prompt engine-style in graph
# mode beside FlashInfer and FLA: the default plans (gdn:wgmma), then the overlap plan opted in
# (GDN_PREFILL_OVERLAP=1, a second process: gdn only), on the same rows.
set -u; export PYTHONUNBUFFERED=1
T0=$SECONDS; OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; END=${END:-570}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
bash .peer3/install_peers.sh > "$OUT/peers.log" 2>&1; grep -m1 -o "PEERS_OK\|install_peers: .*" "$OUT/peers.log"
PP=/tmp/peersite:/tmp/peersite/nvidia_cutlass_dsl/dsl_packages:/tmp/site
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
if ! ls gdn_prefill/_ext*.so > /dev/null 2>&1; then
  python3 -c "import setuptools, sys; sys.exit(int(setuptools.__version__.split('.')[0]) < 77)" || \
    sed -i 's/^license = "Apache-2.0"/license = { text = "Apache-2.0" }/; /^license-files/d' pyproject.toml
  GDN_PREFILL_PREBUILT=.gpu/aot python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1; echo "build rc=$?"
fi
echo "ready at $((SECONDS-T0)) s"
export PYTHONPATH=$PWD:$PP
S=${SHAPES:-1x8K,1x32768}; H=${HEADS:-16/32,8/32,8/24,4/16,8/16}
b() { local tag=$1 lim=$2; shift 2
  timeout -s KILL $((lim + 15)) python3 benchmarks/bench_prefill.py --modes graph --shapes $S --heads $H --qk-l2norm --pool \
    --warm-s 0.3 --rep-budget-s 0.12 --min-reps 8 --no-plot --no-progress --no-host-overhead --budget-s $lim \
    --out "$OUT" --tag $tag "$@" > "$OUT/$tag.log" 2>&1; echo "$tag rc=$? at $((SECONDS-T0)) s"
  python3 lab/s50/table.py "$OUT/$tag.json" 2>&1 | tee "$OUT/$tag.md"; }
b one_prompt_peers $(( (END - (SECONDS - T0)) * 2 / 3 )) --impls gdn:wgmma,fla,flashinfer
export GDN_PREFILL_OVERLAP=1; b one_prompt_overlap $(( END - (SECONDS - T0) - 25 )) --impls gdn:wgmma
