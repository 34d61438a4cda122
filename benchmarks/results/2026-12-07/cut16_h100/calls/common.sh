# sourced by the calls below: the peers installed, our extension built from .gpu/aot, helpers
set -u; export PYTHONUNBUFFERED=1
T0=$SECONDS; OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/r
left() { echo $(( ${END:-585} - (SECONDS - T0) )); }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
if [ ! -f /tmp/peers_ok ]; then
  bash .peer3/install_peers.sh > /tmp/peers.log 2>&1 && touch /tmp/peers_ok; grep -m1 -o "PEERS_OK\|install_peers: .*" /tmp/peers.log
fi
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
python3 -c "import setuptools, sys; sys.exit(int(setuptools.__version__.split('.')[0]) < 77)" || \
  sed -i 's/^license = "Apache-2.0"/license = { text = "Apache-2.0" }/; /^license-files/d' pyproject.toml
ls gdn_prefill/_ext*.so > /dev/null 2>&1 || { GDN_PREFILL_PREBUILT=.gpu/aot python3 setup.py build_ext --inplace > /tmp/build.log 2>&1; echo "build rc=$? at $((SECONDS-T0)) s"; }
export PYTHONPATH=$PWD:/tmp/peersite:/tmp/peersite/nvidia_cutlass_dsl/dsl_packages:/tmp/site
M8=4096+2048+1024+512+256+128+64+64
M16=5000+3000+2000+1500+1200+1000+800+600+400+300+200+200+100+84
P="--warm-s 0.2 --rep-budget-s 0.15 --max-reps 30 --no-progress --no-plot --no-host-overhead"
# b tag budget_s args...: one bench_prefill process, its tables to /tmp/r/tag, a short table printed
b() { local tag=$1 lim=$2; shift 2
  [ "$lim" -lt 20 ] && { echo "$tag skipped: $lim s left"; return; }
  timeout -s KILL $((lim + 20)) python3 benchmarks/bench_prefill.py $P --budget-s $lim --out /tmp/r/$tag --tag $tag "$@" \
    > /tmp/r/$tag.log 2>&1; echo "$tag rc=$? at $((SECONDS-T0)) s"
  python3 lab/s50/table.py /tmp/r/$tag/$tag.json 2>&1 | tail -n +3 | sed "s/^/$tag /"; }
pack() { (cd /tmp/r && tar czf "$OUT/$1.tgz" . ) ; cat /tmp/r/*/*.md > "$OUT/$1.md" 2>/dev/null; }
