#!/usr/bin/env bash
# first call (carry .gpu .whl): build A (main's objects) here and B (WORKER_GROUPS = 4
# workers objects) in /tmp/B; one prompt engine-style in graph mode, gdn only: the default plans (A),
# the overlap plan opted in (A, B); bench_overlap's short shapes (A, B); the overlap tests on B.
set -u; export PYTHONUNBUFFERED=1
T0=$SECONDS; OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; END=${END:-585}
left() { echo $(( END - (SECONDS - T0) )); }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
python3 -c "import setuptools, sys; sys.exit(int(setuptools.__version__.split('.')[0]) < 77)" || \
  sed -i 's/^license = "Apache-2.0"/license = { text = "Apache-2.0" }/; /^license-files/d' pyproject.toml
rm -rf /tmp/B && mkdir -p /tmp/B && tar --exclude='./.peer*' --exclude=./.git -cf - . | tar -xf - -C /tmp/B
cp -r .gpu/aot /tmp/B/aotB && cp .gpu/wg4/* /tmp/B/aotB/
(cd /tmp/B && GDN_PREFILL_PREBUILT=aotB python3 setup.py build_ext --inplace > "$OUT/buildB.log" 2>&1; echo "build B rc=$?") &
GDN_PREFILL_PREBUILT=.gpu/aot python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1; echo "build A rc=$? at $((SECONDS-T0)) s"
wait; echo "ready at $((SECONDS-T0)) s"
S=${SHAPES:-1x4096,1x8K,1x32768,1x64K}; H=${HEADS:-16/32,8/32,8/24,4/16,2/8,8/16,4/8}
b() { local tag=$1 lim=$2 root=$3; shift 3
  (cd $root && PYTHONPATH=$root:/tmp/site timeout -s KILL $((lim + 15)) python3 benchmarks/bench_prefill.py --modes graph --shapes $S --heads $H \
    --warm-s 0.3 --rep-budget-s 0.12 --min-reps 8 --no-plot --no-progress --no-host-overhead --budget-s $lim \
    --out "$OUT" --tag $tag "$@" > "$OUT/$tag.log" 2>&1); echo "$tag rc=$? at $((SECONDS-T0)) s"
  python3 lab/s50/table.py "$OUT/$tag.json" 2>&1 | tee "$OUT/$tag.md"; }
b eng_A 80 $PWD --qk-l2norm --pool --impls gdn:wgmma
export GDN_PREFILL_OVERLAP=1
b eng_ovA 80 $PWD --qk-l2norm --pool --impls gdn:wgmma
b eng_ovB 80 /tmp/B --qk-l2norm --pool --impls gdn:wgmma
unset GDN_PREFILL_OVERLAP
for H in 16/32 8/32; do for R in A B; do root=$PWD; [ $R = B ] && root=/tmp/B
  (cd $root && PYTHONPATH=$root:/tmp/site timeout -s KILL 60 python3 benchmarks/bench_overlap.py --shapes 1x1K,1x2K,1x4K,1x8K \
    --heads $H --ctas rule 2>&1 | grep -E "us$|^\|" | tee -a "$OUT/overlap_$R.txt"); echo "overlap $R $H at $((SECONDS-T0)) s"
done; done
(cd /tmp/B && PYTHONPATH=/tmp/B:/tmp/site timeout -s KILL $(( $(left) - 10 )) python3 -m pytest -q -p no:cacheprovider -rf -n 4 \
  tests/test_gpu_overlap.py tests/test_gpu_concurrency.py > "$OUT/testsB.log" 2>&1)
echo "tests B rc=$? at $((SECONDS-T0)) s: $(tail -1 $OUT/testsB.log)"; grep -E "^FAILED|^ERROR" "$OUT/testsB.log" | head -12
echo "done at $((SECONDS-T0)) s"
