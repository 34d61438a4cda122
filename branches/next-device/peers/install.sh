#!/usr/bin/env bash
# Unpacks this part of the two-part FlashInfer bundle (lab/peers/make_peers.sh) into /tmp/peersite;
# once both parts are there, checks that FlashInfer's SM90 GDN prefill imports and prints PEERS_OK.
#   bash .peerA/install.sh; bash .peerB/install.sh      (any order, separate calls while warm)
set -euo pipefail
export PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1
d=$(cd "$(dirname "$0")" && pwd); S=${PEER_SITE:-/tmp/peersite}; mkdir -p "$S"
if [ -f "$d/cu13.tar.xz" ]; then tar xJf "$d/cu13.tar.xz" -C "$S"; touch "$S/.partA"; echo "peers: part A unpacked"; fi
if [ -f "$d/flashinfer_slim.zip" ]; then
  # into a folder of its own, then merged: pip --target --upgrade would replace the nvidia_cutlass_dsl
  # folder that part A's libraries share with these wheels
  G=$(mktemp -d)
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$G" "$d"/w/*.whl
  python3 -c "import zipfile, sys; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])" "$d/flashinfer_slim.zip" "$G"
  cp -r "$G"/. "$S"/; rm -rf "$G"
  PP="$S:$S/nvidia_cutlass_dsl/dsl_packages:${PEER_BASE:-/tmp/site}"
  for w in "$d"/optional/*.whl; do
    mod=$(basename "$w" | cut -d- -f1); [ "$mod" = nvidia_ml_py ] && mod=pynvml
    PYTHONPATH=$PP python3 -c "import $mod" 2>/dev/null ||
      python3 -c "import zipfile, sys; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])" "$w" "$S"
  done
  touch "$S/.partB"; echo "peers: part B unpacked"
fi
[ -f "$S/.partA" ] && [ -f "$S/.partB" ] || { echo "peers: waiting for the other part"; exit 0; }
PP="$S:$S/nvidia_cutlass_dsl/dsl_packages:${PEER_BASE:-/tmp/site}"
PYTHONPATH=$PP python3 -W ignore -c "
import importlib.metadata as md, tvm_ffi, cutlass, flashinfer
from flashinfer.gdn_prefill import chunk_gated_delta_rule
import flashinfer.gdn_kernels.delta_rule_dsl.delta_rule_sm90, flashinfer.gdn_kernels.delta_rule_dsl.delta_rule_cp_sm90
print('flashinfer', flashinfer.__version__, 'nvidia-cutlass-dsl', md.version('nvidia-cutlass-dsl'), 'tvm_ffi', tvm_ffi.__version__)
" && echo PEERS_OK && echo "export PYTHONPATH=$PP"
