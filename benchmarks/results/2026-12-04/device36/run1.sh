#!/usr/bin/env bash
# Scratch device run 1 (session 36): the whole GPU suite on main, transformers tests included.
source lab/device_lib.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/tfsite .tfw/*.whl 2>&1 | tail -2
export PYTHONPATH=$PYTHONPATH:/tmp/tfsite
python3 -c "import transformers, fla; print('transformers', transformers.__version__, 'fla', fla.__version__)"
inst build/aot_main main
step smoke 60 python3 benchmarks/bench_fused.py --smoke; tail -3 "$OUT/smoke.log"
step suite 500 python3 -m pytest -m gpu tests -q -p no:cacheprovider -rfEs --durations=15
grep -E "^(FAILED|ERROR|SKIPPED)|passed|failed" "$OUT/suite.log" | tail -30
(cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log)
echo "total $((SECONDS - T0)) s"
