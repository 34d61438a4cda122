# overlay.sh BASE_SLIM NEW_OBJDIR OUT_SLIM: a copy of BASE with NEW's objects, the glue regenerated
# (run from the repo root, in the environment that has the CuTe DSL)
set -e
rm -rf $3; cp -r $1 $3
for f in $2/*.o $2/*.h $2/*.json; do cp $f $3/; done
python - $3 <<'PY'
import json, os, sys
sys.path.insert(0, '.')
from cute_kernels import aot, registry
d = sys.argv[1]
infos = [json.load(open(os.path.join(d, v + ".json"))) for _, v, _ in registry.variants()]
open(os.path.join(d, "gdn_kernels.c"), "w").write(aot._glue(infos))
json.dump({"arch": aot.ARCH, "variants": infos}, open(os.path.join(d, "manifest.json"), "w"), indent=1)
PY
