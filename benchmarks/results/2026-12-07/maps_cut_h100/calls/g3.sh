#!/usr/bin/env bash
# After `bash .peerq1/stage.sh` (carry .peerq1) on the same warm machine; carry .peerq2 .gpu .whl.
# FlashQLA beside gdn (the ext already built on this machine), fast and mixed gates
set -u; export PYTHONUNBUFFERED=1; T0=$SECONDS; OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/r
bash .peerq2/install_qla.sh 2>&1 | tail -2
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
python3 -c "import setuptools, sys; sys.exit(int(setuptools.__version__.split('.')[0]) < 77)" || \
  sed -i 's/^license = "Apache-2.0"/license = { text = "Apache-2.0" }/; /^license-files/d' pyproject.toml
ls gdn_prefill/_ext*.so > /dev/null 2>&1 || GDN_PREFILL_PREBUILT=.gpu/aot python3 setup.py build_ext --inplace > /tmp/build.log 2>&1
M16=5000+3000+2000+1500+1200+1000+800+600+400+300+200+200+100+84
for G in fast mixed; do
PYTHONPATH=$PWD:/tmp/qlasite:/tmp/site timeout -s KILL $(( ${END:-560} - (SECONDS - T0) )) python3 benchmarks/bench_prefill.py \
  --warm-s 0.2 --rep-budget-s 0.15 --max-reps 30 --no-progress --no-plot --no-host-overhead --budget-s 90 \
  --impls gdn:wgmma,flashqla --modes graph --qk-l2norm --pool --heads 8/16,4/16,2/8,4/8,16/32 --gates $G \
  --shapes 1x32K,1x64K --out /tmp/r/q$G --tag qla$G > /tmp/r/qla$G.log 2>&1; echo "qla $G rc=$?"
python3 lab/s50/table.py /tmp/r/q$G/qla$G.json | sed "s/^/$G /"; tail -2 /tmp/r/qla$G.log
done; (cd /tmp/r && tar czf "$OUT/qla.tgz" .)
