#!/usr/bin/env bash
# maps-cut beside FlashInfer: pre-normed (no in-kernel l2norm) and eager engine style at mid heads,
# one long prompt, fast gates.  After lab/s53/stage.sh 1 and 2; carry .peer3 .gpu .whl
rm -rf /tmp/cut; cp -r .gpu/aot /tmp/cut; cp -r .gpu/cutdelta/. /tmp/cut/
python3 -c "import setuptools, sys; sys.exit(int(setuptools.__version__.split('.')[0]) < 77)" || \
  sed -i 's/^license = "Apache-2.0"/license = { text = "Apache-2.0" }/; /^license-files/d' pyproject.toml
ls gdn_prefill/_ext*.so > /dev/null 2>&1 || { GDN_PREFILL_PREBUILT=/tmp/cut python3 setup.py build_ext --inplace > /tmp/build.log 2>&1; echo "cut build rc=$?"; }
source lab/s54/common.sh
b pre $(( $(left) * 50 / 100 )) --impls gdn:wgmma,flashinfer --heads 4/16,8/16,2/8,4/8,16/32 --modes graph --shapes 1x32K,1x8K
b eag $(( $(left) * 90 / 100 )) --impls gdn:wgmma,flashinfer --heads 4/16,8/16,2/8,4/8 --modes eager --qk-l2norm --pool --shapes 1x32K,1x8K
pack c2; echo "done at $((SECONDS-T0)) s"
