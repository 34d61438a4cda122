#!/usr/bin/env bash
# Session 51, call 3 (after .peer1/.peer2 staged): FlashInfer installed, build A (this tree's objects)
# and build B (276ed57's 8 wg2 objects) linked, the wg2 A/B interleaved, then the Qwen3.5 rows
# engine-style in graph mode with FLA and FlashInfer in one process.
set -u; export PYTHONUNBUFFERED=1
T0=$SECONDS; OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; END=${END:-575}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
PP=/tmp/site
if [ -d .peer3 ]; then
  bash .peer3/install_peers.sh > "$OUT/peers.log" 2>&1 && PP=/tmp/peersite:/tmp/peersite/nvidia_cutlass_dsl/dsl_packages:/tmp/site
  grep -m1 -o "PEERS_OK\|install_peers: .*" "$OUT/peers.log"; echo "peers at $((SECONDS-T0)) s"
fi
echo "$PP" > /tmp/pp
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
python3 -c "import setuptools, sys; sys.exit(int(setuptools.__version__.split('.')[0]) < 77)" || \
  sed -i 's/^license = "Apache-2.0"/license = { text = "Apache-2.0" }/; /^license-files/d' pyproject.toml
rm -rf /tmp/abtree; mkdir /tmp/abtree
tar --exclude=./.peer3 --exclude=./.peer1 --exclude=./.peer2 -cf - . | tar -C /tmp/abtree -xf -
cp .gpu/ab/*.o /tmp/abtree/.gpu/aot/
( GDN_PREFILL_PREBUILT=.gpu/aot python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1; echo "build A rc=$?" ) &
( cd /tmp/abtree && GDN_PREFILL_PREBUILT=.gpu/aot python3 setup.py build_ext --inplace > "$OUT/buildB.log" 2>&1; echo "build B rc=$?" ) &
wait; echo "builds at $((SECONDS-T0)) s"
for i in 1 2; do
  PYTHONPATH=$PWD:/tmp/site timeout 60 python3 lab/s51/ab_wg2.py A$i 2>&1 | grep -E "^AB|Error" | tee -a "$OUT/ab_wg2.txt"
  PYTHONPATH=/tmp/abtree:/tmp/site timeout 60 python3 lab/s51/ab_wg2.py B$i 2>&1 | grep -E "^AB|Error" | tee -a "$OUT/ab_wg2.txt"
done
echo "ab at $((SECONDS-T0)) s"
export PYTHONPATH=$PWD:$PP
B=$(( END - (SECONDS - T0) - 25 ))
timeout -s KILL $(( B + 20 )) python3 benchmarks/bench_prefill.py --heads ${HEADS:-qwen3.5} \
  --shapes ${SHAPES:-16x512,8x4K,1x32768,varlen16,1x8K} --modes ${MODES:-graph} \
  --impls gdn:wgmma,fla,flashinfer ${FLAGS:---qk-l2norm --pool} --warm-s 0.3 --rep-budget-s 0.12 --min-reps 8 \
  --no-plot --no-progress --no-host-overhead --budget-s $B --out "$OUT" --tag ${TAG:-qwen35_engine} > "$OUT/bench.log" 2>&1
echo "bench rc=$? at $((SECONDS-T0)) s"; tail -3 "$OUT/bench.log"
python3 lab/s50/table.py "$OUT/${TAG:-qwen35_engine}.json" 2>&1 | tee "$OUT/table.md"
