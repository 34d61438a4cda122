#!/usr/bin/env bash
# Device call 4 (session 49): the FLA keyword test as fixed; the serial rows of the A/B again, three
# alternating passes (varlen16 came out +2 % in call 1's two).
set -u
export PYTHONUNBUFFERED=1
T0=$SECONDS
END=${END:-260}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
left() { echo $((END - (SECONDS - T0))); }
step() { local name=$1 limit=$2; shift 2; local l; l=$(left); [ "$l" -lt 20 ] && { echo "$name: skipped (time)"; return; }
         [ "$limit" -gt "$l" ] && limit=$l; timeout -s KILL "$limit" "$@" >"$OUT/$name.log" 2>&1; echo "$name: rc=$? at $((SECONDS - T0)) s"; }
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
python3 -c "import setuptools, sys; sys.exit(int(setuptools.__version__.split('.')[0]) < 77)" || \
  sed -i 's/^license = "Apache-2.0"/license = { text = "Apache-2.0" }/; /^license-files/d' pyproject.toml
ls gdn_prefill/_ext*.so >/dev/null 2>&1 || step build_new 120 env GDN_PREFILL_PREBUILT=.gpu/aot_new python3 setup.py build_ext --inplace &
ls .gpu/base/gdn_prefill/_ext*.so >/dev/null 2>&1 || (cd .gpu/base && GDN_PREFILL_PREBUILT=build/aot timeout -s KILL 120 python3 setup.py build_ext --inplace > "$OUT/build_base.log" 2>&1) &
wait
export PYTHONPATH=$PWD:/tmp/site
step fla_kw 60 python3 -m pytest -q -p no:cacheprovider -rf tests/test_gpu_fla_layout.py
tail -2 "$OUT/fla_kw.log"
ab() { step "$1" 40 env PYTHONPATH="$2:/tmp/site" python3 benchmarks/bench_prefill.py --shapes "varlen16,32x2K" --heads 16/32 \
    --modes graph --no-progress --no-plot --no-host-overhead --impls gdn:wgmma --qk-l2norm --pool --out "$OUT/$1" --tag prefill \
    --rep-budget-s 0.3 --warm-s 1.0; }
for p in 1 2 3; do ab base_a_$p "$PWD/.gpu/base"; ab new_a_$p "$PWD"; done
python3 lab/s70/ab_table.py "$OUT" | tee "$OUT/ab_table.md"
echo "total $((SECONDS - T0)) s"
