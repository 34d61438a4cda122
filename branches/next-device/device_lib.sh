#!/usr/bin/env bash
# Helpers for device-run scripts (benchmarks/results/runNN/runNN.sh): source this file instead of
# copying the functions into each script (earlier scripts copied them).
#   source tools/device_lib.sh
#   inst build/aot_x tag        link prebuilt objects build/aot_x into the package (editable install)
#   pre tag [bench args...]     whole-prefill timing, graph mode, gdn only; appends one line to
#                               $OUT/prefill_ab.txt and the table to $OUT/prefill_tables.md
#                               (SHAPES overrides the default shapes)
#   num tag [bench args...]     numerics against the fp64 oracle at T = 4K, 16K -> $OUT/numerics.txt
#   parts tag                   tools/overlap_parts.py at 1x8192, 1x65536 -> $OUT/parts.txt
#   sweep tag pcts              bench_overlap's split sweep at those percentages (e.g. 2,5,7,10) ->
#                               $OUT/overlap_<tag>.md, its rows echoed (SWEEP_SHAPES overrides the shapes)
#   step name limit cmd...      cmd under `timeout -s KILL limit`, its output in $OUT/name.log; prints
#                               its exit status and the seconds since T0 (set when sourced; reset it)
#   peers                       PYTHONPATH for the FlashInfer bundle installed by .peer3/install_peers.sh
#   segrows tag                 the segmented plan's rows (1x8K, 1x32K at 2/4 and 4/8), graph mode, gdn
#                               only; appends one line to $OUT/prefill_ab.txt
#   many128k                    the many-sequences row 128K x 4 at 2/4 (gdn, FLA) with bench_prefill's
#                               memory cap -> $OUT/many128k/prefill.md, its rows echoed
# Sourcing it also installs the wheels carried in .whl/ (FLA) into /tmp/site, on PYTHONPATH.
# Every step runs under `timeout -s KILL` so that a hung kernel cannot eat the device budget.
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/gdn_out}; mkdir -p "$OUT"
T0=$SECONDS
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
fi
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}

step() { local name=$1 limit=$2; shift 2; timeout -s KILL "$limit" "$@" >"$OUT/$name.log" 2>&1; echo "$name: rc=$? at $((SECONDS - T0)) s"; }
peers() { export PYTHONPATH=/tmp/peersite:/tmp/peersite/nvidia_cutlass_dsl/dsl_packages:/tmp/site; }

inst() {
  GDN_PREFILL_PREBUILT=$1 timeout -s KILL 90 python3 -m pip install -q --no-build-isolation --no-deps -e . \
    >"/tmp/build_$2.log" 2>&1 || { tail -20 "/tmp/build_$2.log"; exit 1; }
}

pre() {
  local tag=$1; shift
  mkdir -p "/tmp/$tag"
  timeout -s KILL 70 python3 benchmarks/bench_prefill.py --shapes "${SHAPES:-8x4K,32x2K,varlen16,1x8K}" --heads 16/32 \
    --modes graph --no-progress --no-plot --no-host-overhead --impls gdn:wgmma --out "/tmp/$tag" --tag prefill "$@" \
    >"/tmp/$tag/bench.log" 2>&1
  echo "$tag: $(grep -E "^\| ([0-9]+x|varlen)" "/tmp/$tag/prefill.md" | awk -F'|' '{printf "%s %s, ", $2, $6}')" \
    | tee -a "$OUT/prefill_ab.txt"
  cat "/tmp/$tag/prefill.md" >> "$OUT/prefill_tables.md" 2>/dev/null
}

num() {
  local tag=$1; shift
  timeout -s KILL 60 python3 benchmarks/bench_prefill.py --numerics-only --numerics-T 4096,16384 --impls gdn:wgmma \
    --out "/tmp/num_$tag" --no-progress "$@" >"/tmp/num_$tag.log" 2>&1
  { echo "== $tag $*"; grep -E "^\| " /tmp/num_"$tag"/*numerics*.md 2>/dev/null | head -8; } | tee -a "$OUT/numerics.txt"
}

parts() {
  { echo "== $1"; timeout -s KILL 60 python3 tools/overlap_parts.py 1x8192 1x65536 --reps 40 2>&1 | grep -v -i warn; } \
    >> "$OUT/parts.txt"
}

sweep() {
  local tag=$1 pcts=$2
  timeout -s KILL 200 python3 benchmarks/bench_overlap.py --shapes "${SWEEP_SHAPES:-1x4K,1x8K,1x16K,1x64K}" \
    --heads 16/32 --pcts "$pcts" --md "$OUT/overlap_$tag.md" >"/tmp/overlap_$tag.log" 2>&1 \
    || { echo "sweep $tag failed"; tail -5 "/tmp/overlap_$tag.log"; }
  echo "== $tag"; grep -E "^\| 1x" "$OUT/overlap_$tag.md"
}

segrows() {
  timeout -s KILL 90 python3 benchmarks/bench_prefill.py --shapes 1x8K,1x32K --heads 2/4,4/8 --modes graph \
    --no-progress --no-plot --no-host-overhead --impls gdn:wgmma --out "/tmp/seg_$1" --tag prefill \
    >"/tmp/seg_$1.log" 2>&1
  echo "seg_$1: $(grep -E "^\| 1x" "/tmp/seg_$1/prefill.md" | awk -F'|' '{printf "%s %s %s, ", $2, $3, $6}')" \
    | tee -a "$OUT/prefill_ab.txt"
}

many128k() {
  step many128k 400 python3 benchmarks/bench_prefill.py --heads 2/4 --shapes 128Kx4 --impls gdn:wgmma,fla \
    --modes graph --no-progress --no-plot --no-host-overhead --warm-s 0.5 --rep-budget-s 0.25 --max-reps 20 \
    --out "$OUT/many128k" --tag prefill
  grep -E "^\| " "$OUT/many128k/prefill.md" | head -8 || tail -5 "$OUT/many128k.log"
}
