#!/usr/bin/env bash
# run 86: branch fused-tform.  The fused plan's stage 1 ends at Tu = (I + A)^-1 diag(beta) (no V
# load, no W / U), and spine_rs forms Vnew = Tu (V - diag(exp(gcum) rk) K S) itself (G1 = S^T K^T
# on the K tile it already loads, Y^T = V^T - Z diag(a), G1b = Y^T Tu^T; V from the input by TMA).
# The whole GPU suite (sanitizer included), ncu per kernel, the spine alone, the prefill on ft and main.
set -u
REPO=$PWD; FINAL=$OUT; export OUT=/tmp/r86; mkdir -p $OUT; export PYTHONUNBUFFERED=1; t0=$SECONDS
mkdir -p /tmp/wt_ft && tar -xzf build/src_ft.tgz -C /tmp/wt_ft
pre() {  # tag
  mkdir -p $OUT/$1
  timeout 80 python3 benchmarks/bench_prefill.py --shapes 1x1K,1x8K,8x4K,32x2K,varlen16,1x64K --heads 16/32 \
    --modes graph --rep-budget-s 0.2 --max-reps 50 --no-progress --no-plot --no-host-overhead \
    --impls gdn:wgmma --out "$OUT/$1" --tag prefill >"$OUT/$1/bench.log" 2>&1
  echo "$1: $(grep -E "^\| (1x|8x|32x|varlen)" "$OUT/$1/prefill.md" | awk -F'|' '{printf "%s %s, ", $2, $6}')"
}
cd /tmp/wt_ft
GDN_PREFILL_PREBUILT=$REPO/build/aot_ft python3 -m pip install -q --no-build-isolation --no-deps -e . >$OUT/build_ft.log 2>&1 || { tail -20 $OUT/build_ft.log; exit 1; }
timeout 200 python3 -m pytest -m gpu tests -q -p no:cacheprovider --timeout 120 -x >$OUT/ft_gpu.txt 2>&1; tail -4 $OUT/ft_gpu.txt
echo "suite $((SECONDS-t0)) s"
OUT=$OUT/ft_ncu timeout 80 bash tools/ncu_stages.sh 8x4096 1x8192 2>&1 | grep -E "==|recompute|spine|sum"
timeout 60 python3 benchmarks/bench_spine.py --quick --spines wgmma-o --md $OUT/ft_spine.md >$OUT/ft_spine.log 2>&1 || tail -3 $OUT/ft_spine.log
grep -E "^\| wgmma" $OUT/ft_spine.md | awk -F'|' '{print $3,$4,$5,$7,$8}'
pre ft; echo "$((SECONDS-t0)) s"
cd $REPO
GDN_PREFILL_PREBUILT=build/aot python3 -m pip install -q --no-build-isolation --no-deps -e . >$OUT/build_main.log 2>&1 || { tail -20 $OUT/build_main.log; exit 1; }
pre main; echo "$((SECONDS-t0)) s"
tar -C /tmp -czf $FINAL/run86.tgz r86
