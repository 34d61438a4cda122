#!/usr/bin/env bash
# call 3 (after .peer1, .peer2 staged; carry .peer3 .gpu .whl): FlashInfer installed,
# build A (main's objects) here and B (WORKER_GROUPS = 4 workers objects) in /tmp/B; one prompt
# engine-style in graph mode: gdn default + FLA + FlashInfer; then the overlap plan opted in, A and B.
set -u; export PYTHONUNBUFFERED=1
T0=$SECONDS; OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; END=${END:-580}
left() { echo $(( END - (SECONDS - T0) )); }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee /tmp/gpu.txt
bash .peer3/install_peers.sh > /tmp/peers.log 2>&1; grep -m1 -o "PEERS_OK\|install_peers: .*" /tmp/peers.log
PP=/tmp/peersite:/tmp/peersite/nvidia_cutlass_dsl/dsl_packages:/tmp/site
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
python3 -c "import setuptools, sys; sys.exit(int(setuptools.__version__.split('.')[0]) < 77)" || \
  sed -i 's/^license = "Apache-2.0"/license = { text = "Apache-2.0" }/; /^license-files/d' pyproject.toml
if ! ls /tmp/B/gdn_prefill/_ext*.so > /dev/null 2>&1; then
  rm -rf /tmp/B && mkdir -p /tmp/B && tar --exclude='./.peer*' --exclude=./.git -cf - . | tar -xf - -C /tmp/B
  cp -r .gpu/aot /tmp/B/aotB && cp .gpu/wg4/* /tmp/B/aotB/
  (cd /tmp/B && GDN_PREFILL_PREBUILT=aotB python3 setup.py build_ext --inplace > /tmp/buildB.log 2>&1; echo "build B rc=$?") &
fi
ls gdn_prefill/_ext*.so > /dev/null 2>&1 || { GDN_PREFILL_PREBUILT=.gpu/aot python3 setup.py build_ext --inplace > /tmp/build.log 2>&1; echo "build A rc=$? at $((SECONDS-T0)) s"; }
wait; echo "ready at $((SECONDS-T0)) s"
S=${SHAPES:-1x8K,1x32768,1x64K,varlen16}; H=${HEADS:-16/32,8/32,8/24,4/16,2/8,8/16,4/8}
b() { local tag=$1 lim=$2 root=$3; shift 3
  (cd $root && PYTHONPATH=$root:$PP timeout -s KILL $((lim + 15)) python3 benchmarks/bench_prefill.py --modes graph --shapes $S --heads $H \
    --warm-s 0.3 --rep-budget-s 0.12 --min-reps 8 --no-plot --no-progress --no-host-overhead --budget-s $lim \
    --out "$OUT" --tag $tag "$@" > /tmp/$tag.log 2>&1); echo "$tag rc=$? at $((SECONDS-T0)) s"
  python3 lab/s50/table.py "$OUT/$tag.json" 2>&1 | tee /tmp/$tag.md; }
b eng_peers $(( $(left) * 5 / 10 )) $PWD --qk-l2norm --pool --impls gdn:wgmma,fla,flashinfer
export GDN_PREFILL_OVERLAP=1
b eng_ov $(( $(left) * 3 / 10 )) ${OV:-/tmp/B} --qk-l2norm --pool --impls gdn:wgmma
unset GDN_PREFILL_OVERLAP
S=1x32768,1x64K H=16/32,8/32,4/16,8/16
b pre_peers $(( $(left) - 60 )) $PWD --impls gdn:wgmma,fla,flashinfer
export GDN_PREFILL_OVERLAP=1
b pre_ov $(( $(left) - 15 )) ${OV:-/tmp/B} --impls gdn:wgmma
echo "done at $((SECONDS-T0)) s"
