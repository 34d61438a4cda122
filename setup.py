"""Build gdn-prefill: AOT-compile the CuTe DSL kernels, cythonize pyx/, link.

Environment:
  GDN_PREFILL_PREBUILT=DIR   link the kernel objects in DIR (made by
                             `python -m cute_kernels.aot --out DIR` on any machine
                             with the DSL) instead of compiling them; DIR holds
                             <variant>.o/.h, gdn_kernels.c, manifest.json, cubin/ and
                             libcuda_dialect_runtime_static.a, so the DSL is not needed.
  CUDA_HOME                  CUDA 13.x toolkit with cuda_runtime.h and libcudart_static.a
                             (default: /usr/local/cuda).  The wheel then needs a CUDA 13
                             driver (R580+), checked at import (gdn_prefill/_driver.py).

Release (docs/RELEASE.md): `python -m build --sdist`, then `python -m build --wheel` on the sdist
(the kernels compile once, inside that isolated build), `auditwheel repair --exclude libcuda.so.1`.
"""
from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))
STATIC_RUNTIME = "libcuda_dialect_runtime_static.a"


def _cuda_home() -> str:
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home and os.path.isfile(os.path.join(home, "include", "cuda_runtime.h")):
            return home
    raise SystemExit("gdn-prefill: no CUDA toolkit found (set CUDA_HOME to a directory with "
                     "include/cuda_runtime.h and lib64/libcudart_static.a)")


def _check_cuda_major(home: str) -> None:
    """The toolkit is the CUDA major the kernels are compiled for (the DSL's cu13 flavor) and the one
    gdn_prefill/_driver.py asks the driver for at import: static cudart of another major would
    make the driver check wrong (docs/RELEASE.md)."""
    # read, not imported: importing _driver checks this machine's driver, which a build host need not have
    driver = open(os.path.join(ROOT, "gdn_prefill", "_driver.py")).read()
    major = int(re.search(r"^REQUIRED_VERSION = (\d+)", driver, re.M).group(1)) // 1000
    header = open(os.path.join(home, "include", "cuda_runtime_api.h")).read()
    found = re.search(r"^#define\s+CUDART_VERSION\s+(\d+)", header, re.M)
    version = int(found.group(1)) if found else 0
    if version // 1000 != major:
        raise SystemExit(f"gdn-prefill: {home} is CUDA {version // 1000}.{version % 1000 // 10}; the kernels "
                         f"are CUDA {major} cubins and the import check asks for a CUDA {major} driver: set "
                         f"CUDA_HOME to a CUDA {major}.x toolkit")


def _cudart_static(home: str) -> str:
    for sub in ("lib64", "lib", os.path.join("targets", "x86_64-linux", "lib")):
        path = os.path.join(home, sub, "libcudart_static.a")
        if os.path.isfile(path):
            return path
    raise SystemExit(f"gdn-prefill: libcudart_static.a not found under {home}")


def _aot_dir() -> str:
    prebuilt = os.environ.get("GDN_PREFILL_PREBUILT")
    if prebuilt:
        out = os.path.abspath(prebuilt)
        print(f"gdn-prefill: linking prebuilt kernels from {out}")
    else:
        out = os.path.join(ROOT, "build", "aot")
        print(f"gdn-prefill: compiling the kernels ahead of time into {out}")
        subprocess.check_call([sys.executable, "-m", "cute_kernels.aot", "--out", out], cwd=ROOT)
    for need in ("manifest.json", "gdn_kernels.c", STATIC_RUNTIME):
        if not os.path.isfile(os.path.join(out, need)):
            raise SystemExit(f"gdn-prefill: {out} lacks {need}; rebuild it with python -m cute_kernels.aot")
    return out


def _generated(manifest: dict) -> str:
    """Write the Cython the extension's planner includes, generated from their one source (no DSL
    needed): variants_table.pxi, the launcher's variant tables from the build's manifest
    (cute_kernels/registry.py maps each compiled variant's VARIANTS kwargs to its table entry), and
    plan_formulas.pxi, the planner's nogil copies of gdn_prefill/grids.py's slot and grid formulas.
    Checks that gdn_abi.pxd declares exactly the header's constants.  Returns the directory, for
    Cython's include path."""
    sys.path.insert(0, ROOT)
    from cute_kernels import registry
    from gdn_prefill import grids

    _check_abi_pxd()
    out = os.path.join(ROOT, "build", "generated")
    os.makedirs(out, exist_ok=True)
    for name, text in (("variants_table.pxi", registry.launch_table_pxi(manifest["variants"], ROOT)),
                       ("plan_formulas.pxi", grids.c_formulas_pxi())):
        path = os.path.join(out, name)
        if not os.path.isfile(path) or open(path).read() != text:      # unchanged: no recompile
            with open(path, "w") as f:
                f.write(text)
    return out


def _check_abi_pxd() -> None:
    """gdn_abi.pxd (Cython's view of include/gdn/gdn_abi.h) declares every integer constant of the
    header and no other: the header is their one source, the .pxd only names them."""
    header = open(os.path.join(ROOT, "include", "gdn", "gdn_abi.h")).read()
    pxd = open(os.path.join(ROOT, "pyx", "gdn_prefill", "gdn_abi.pxd")).read()
    defined = set(re.findall(r"^\s*#define\s+(GDN_[A-Z0-9_]+)\s+-?\d+\b", header, re.M))
    declared = set(re.findall(r"^\s+(GDN_[A-Z0-9_]+)\s*$", pxd, re.M))
    if defined != declared:
        raise SystemExit(f"gdn-prefill: gdn_abi.pxd and gdn_abi.h disagree: only in the header "
                         f"{sorted(defined - declared)}, only in the .pxd {sorted(declared - defined)}")


class BuildExt(build_ext):
    """Compile (or find) the kernel objects, then build the Cython extension against them."""

    def run(self):
        from Cython.Build import cythonize

        aot = _aot_dir()
        manifest = json.load(open(os.path.join(aot, "manifest.json")))
        objects = [os.path.join(aot, v["variant"] + ".o") for v in manifest["variants"]]
        generated = _generated(manifest)
        home = _cuda_home()
        _check_cuda_major(home)
        ext = Extension(
            "gdn_prefill._ext",
            sources=["pyx/gdn_prefill/_ext.pyx", os.path.join(aot, "gdn_kernels.c")],
            include_dirs=[os.path.join(ROOT, "include"), os.path.join(ROOT, "include", "gdn"), aot,
                          os.path.join(home, "include")],
            # cudart is linked statically: the extension needs only the driver at run time
            # and still imports on a machine with no GPU at all.
            extra_objects=objects + [os.path.join(aot, STATIC_RUNTIME), _cudart_static(home)],
            libraries=["dl", "pthread", "rt", "stdc++"],
            # what the extension is compiled or linked from besides its sources: a changed ABI header
            # or a new set of kernel objects rebuilds it (setuptools compares only these and the
            # sources with the built extension)
            depends=sorted(glob.glob(os.path.join(ROOT, "include", "gdn", "*.h"))) + objects,
        )
        (cythonized,) = cythonize([ext], include_path=[os.path.join(ROOT, "pyx"), generated], language_level=3,
                                  build_dir=os.path.join(ROOT, "build", "cython"))
        # setuptools has already finalised self.extensions: fill the placeholder in place.
        (target,) = self.extensions
        for attr in ("sources", "include_dirs", "extra_objects", "libraries", "depends"):
            setattr(target, attr, getattr(cythonized, attr))
        super().run()
        self._install_data(aot, manifest)

    def _install_data(self, aot: str, manifest: dict) -> None:
        """Ship the manifest, the cubins (for SASS checks), the ABI header and the .pxd files."""
        pkg = os.path.join(ROOT, "gdn_prefill") if self.inplace else os.path.join(self.build_lib, "gdn_prefill")
        shutil.copy(os.path.join(aot, "manifest.json"), os.path.join(pkg, "_aot_manifest.json"))
        cubins = os.path.join(pkg, "_cubins")
        os.makedirs(cubins, exist_ok=True)
        for v in manifest["variants"]:
            # one folder per variant: the DSL's cubin file names are truncated and collide across variants
            dest = os.path.join(cubins, v["variant"])
            os.makedirs(dest, exist_ok=True)
            for c in v["cubins"]:
                shutil.copy(os.path.join(aot, c), dest)
        os.makedirs(os.path.join(pkg, "include", "gdn"), exist_ok=True)
        for h in glob.glob(os.path.join(ROOT, "include", "gdn", "*.h")):
            shutil.copy(h, os.path.join(pkg, "include", "gdn"))
        for pxd in glob.glob(os.path.join(ROOT, "pyx", "gdn_prefill", "*.pxd")):
            if not pxd.endswith("__init__.pxd"):
                shutil.copy(pxd, pkg)


setup(
    ext_modules=[Extension("gdn_prefill._ext", sources=[])],  # replaced in BuildExt.run
    cmdclass={"build_ext": BuildExt},
)
