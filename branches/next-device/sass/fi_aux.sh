#!/bin/bash
# fi_aux.sh: FlashInfer's auxiliary warpgroup's path through a chunk (the counterpart of our role),
# from its SM90 kernel compiled here.  Needs the CuTe DSL (4.8.1, as FlashInfer 0.7.2 pins), torch
# (CPU) and nvdisasm; FlashInfer's sources from .peerB/flashinfer_slim.zip (peers/make_peers.sh).
# Its delta_rule_dsl package is imported under a two-function stand-in for flashinfer.utils (the
# SM count and a scratch buffer), so that no other part of FlashInfer (its JIT, CUDA) loads.
set -e
D=$(cd $(dirname "$0") && pwd); W=$(mktemp -d)
unzip -q "${FI_ZIP:-.peerB/flashinfer_slim.zip}" 'flashinfer/gdn_kernels/delta_rule_dsl/*' -d $W/src
mkdir -p $W/pkg/flashinfer/gdn_kernels
mv $W/src/flashinfer/gdn_kernels/delta_rule_dsl $W/pkg/flashinfer/gdn_kernels/
touch $W/pkg/flashinfer/__init__.py $W/pkg/flashinfer/gdn_kernels/__init__.py
cat > $W/pkg/flashinfer/utils.py <<'PY'
import torch
def get_device_sm_count(device): return 132
def _get_cache_buf(name, size, device): return torch.empty(size, dtype=torch.uint8)
PY
PYTHONPATH=$W/pkg CUTE_DSL_ARCH=sm_90a python3 $D/compile_fi.py $W/cubin > /dev/null
$D/path.sh $W/cubin/*.cubin 0x68 "$@"
rm -rf $W
