#!/usr/bin/env bash
# Two-part FlashInfer bundle for the H200 (cp312, no network, 64 MiB a call), from the repo root:
#   bash lab/peers/make_peers.sh        (~5 min: xz -9e of the DSL's cu13 libraries)
# .peerA: nvidia-cutlass-dsl-libs-cu13 4.8.1 unpacked and re-packed as one tar.xz (~61 MiB: the
#         wheel's zip is 88 MiB; it must travel alone, beside the ~3 MB work tree)
# .peerB: flashinfer-python 0.7.2.post1 without its C++ sources and data (python only, ~11 MB; its
#         SM90 GDN prefill is a CuTe-DSL kernel compiled at the first call), the other DSL wheels,
#         apache-tvm-ffi, the pure-Python modules it may miss, and install.sh (~20 MB; travels with builds)
# On the device, in either order while it stays warm: bash .peerA/install.sh; bash .peerB/install.sh
# (each unpacks its part into /tmp/peersite; the second prints PEERS_OK once FlashInfer's GDN imports).
set -euo pipefail
R=$(pwd); here=$(cd "$(dirname "$0")" && pwd)
PY=${PEER_PY:-3.12}                 # the device's python (3.11 here only to test the bundle on this machine)
C=${PEER_CACHE:-/tmp/peer_wheels}; [ "$PY" = 3.12 ] || C=$C-$PY; mkdir -p "$C/w" "$C/opt"
plat=(--only-binary=:all: --python-version $PY --implementation cp --platform manylinux_2_28_x86_64 --no-deps)
python3 -m pip download -q "${plat[@]}" -d "$C/w" flashinfer-python==0.7.2.post1 nvidia-cutlass-dsl==4.8.1 \
  nvidia-cutlass-dsl-libs-base==4.8.1 nvidia-cutlass-dsl-libs-core==4.8.1 nvidia-cutlass-dsl-libs-cu13==4.8.1 \
  "apache-tvm-ffi==0.1.15.post2"
python3 -m pip download -q --no-deps -d "$C/opt" packaging requests urllib3 idna certifi tqdm nvidia-ml-py einops
O=${PEER_OUT:-.}; rm -rf $O/.peerA $O/.peerB; mkdir -p $O/.peerA $O/.peerB/w $O/.peerB/optional; O=$(cd $O && pwd)
T=$(mktemp -d)
[ -s "$C/cu13.tar.xz" ] || (cd "$T" && unzip -q "$C"/w/nvidia_cutlass_dsl_libs_cu13-*.whl && tar cf - . | xz -9e -T2 > "$C/cu13.tar.xz.part" && mv "$C/cu13.tar.xz.part" "$C/cu13.tar.xz")
cp "$C/cu13.tar.xz" $O/.peerA/
rm -rf "$T"; T=$(mktemp -d)
(cd "$T" && unzip -q "$C"/w/flashinfer_python-*.whl
 # python only, except what the GDN kernels and the JIT helpers ship; the experimental tree only
 # where gdn_kernels imports it
 find flashinfer -type f ! -name "*.py" ! -path "flashinfer/gdn_kernels/*" ! -path "flashinfer/cute_dsl/*" \
   ! -path "flashinfer/jit/*" ! -name "*.typed" -delete
 find flashinfer/data -mindepth 1 -maxdepth 1 -type d -exec rm -rf {} +
 mv flashinfer/experimental exp; mkdir flashinfer/experimental; cp exp/__init__.py flashinfer/experimental/
 cp -r exp/cake_nvfp4_per_token flashinfer/experimental/
 rm -f flashinfer_python-*.dist-info/RECORD
 zip -qr9 "$O/.peerB/flashinfer_slim.zip" flashinfer flashinfer_python-*.dist-info)
rm -rf "$T"
for w in "$C"/w/*.whl; do case "$w" in *flashinfer_python*|*libs_cu13*) ;; *) cp "$w" $O/.peerB/w/ ;; esac; done
cp "$C"/opt/*.whl $O/.peerB/optional/
cp "$here/install.sh" $O/.peerA/; cp "$here/install.sh" $O/.peerB/
du -sh $O/.peerA $O/.peerB
