"""Ahead-of-time build of every kernel variant: DSL -> sm_90a objects + C launch glue.

    python -m cute_kernels.aot --out build/aot [--jobs 2]

For each variant in cute_kernels.registry a worker process (the DSL compiler is
not thread-safe, and the environment must be set before `import cutlass`)
compiles the launch function (module.LAUNCH, or module.launch_for(**variant kwargs)
where a module builds one per variant; THREADS and SMEM_BYTES may likewise be
functions of the variant kwargs) against its fake tensors and `export_to_c`s
`<variant>.h` + `<variant>.o`, keeping the cubin for SASS checks.  The parent
then writes
  gdn_kernels.c   the launch table of include/gdn/gdn_kernels.h: each DSL argument
                  bound to the gdn_problem_t field of the same name (a kernel
                  parameter with no such field fails the build here);
  manifest.json   variants, their parameters and cubins, for explain() and tests;
and copies the DSL's static runtime (libcuda_dialect_runtime_static.a) beside the
objects, so a GPU host without the DSL can link from this directory alone.
"""
from __future__ import annotations

import argparse
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ABI_HEADER = os.path.join(ROOT, "include", "gdn", "gdn_abi.h")
ARCH = "sm_90a"
STATIC_RUNTIME = "libcuda_dialect_runtime_static.a"


def _problem_fields() -> dict[str, str]:
    """Field name -> C type of gdn_problem_t, read from the ABI header."""
    text = open(ABI_HEADER).read()
    body = re.search(r"typedef struct \{([^{}]*)\}\s*gdn_problem_t;", text, re.S).group(1)
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    fields = {}
    for decl in body.split(";"):
        decl = decl.strip()
        if not decl:
            continue
        ctype, names = decl.split(None, 1)
        for name in names.split(","):
            fields[name.strip()] = ctype
    return fields


# --------------------------------------------------------------------------- worker
def compile_one(module_name: str, variant: str, out_dir: str) -> dict:
    """Compile and export one variant (runs in its own process)."""
    cubin_dir = os.path.join(out_dir, "cubin", variant)
    shutil.rmtree(cubin_dir, ignore_errors=True)    # a cubin of an older signature must not linger
    os.makedirs(cubin_dir)
    os.environ["CUTE_DSL_ARCH"] = ARCH
    os.environ["CUTE_DSL_DUMP_DIR"] = cubin_dir
    sys.path.insert(0, ROOT)
    import cutlass  # noqa: F401  (after the environment is set)
    import cutlass.cute as cute
    from cutlass.cute.typing import SymInt

    from cute_kernels import fake, registry

    module = registry.load(module_name)
    kwargs = module.VARIANTS[variant]
    launch = _launch(module, kwargs)
    args = module.fake_args(fake.Dims(), **kwargs)
    params = [p for p in inspect.signature(launch).parameters if p != "stream"]
    if len(params) != len(args):
        raise SystemExit(f"{variant}: fake_args gives {len(args)} values for {len(params)} parameters")
    fields = _problem_fields()
    described = []
    for name, arg in zip(params, args):
        if name not in fields:
            raise SystemExit(f"{variant}: kernel parameter '{name}' is not a gdn_problem_t field")
        if hasattr(arg, "shape") and hasattr(arg, "stride"):
            if fields[name] != "gdn_tensor_t":
                raise SystemExit(f"{variant}: '{name}' is a tensor but gdn_problem_t.{name} is {fields[name]}")
            described.append({
                "name": name, "kind": "tensor",
                "dtype": str(arg.element_type.__name__ if hasattr(arg.element_type, "__name__") else arg.element_type),
                "rank": len(arg.shape),
                "dynamic_shape_modes": [i for i, s in enumerate(arg.shape) if isinstance(s, SymInt)],
                "dynamic_stride_modes": [i for i, s in enumerate(arg.stride) if isinstance(s, SymInt)],
                "static_shape": [s if isinstance(s, int) else None for s in arg.shape],
                "static_stride": [s if isinstance(s, int) else None for s in arg.stride],
            })
        else:
            described.append({"name": name, "kind": "scalar", "ctype": fields[name]})
    start = time.time()
    compiled = cute.compile(launch, *args, cute.runtime.make_fake_stream(), options="--keep-cubin")
    compiled.export_to_c(file_path=out_dir, file_name=variant, function_prefix=f"gdn_{variant}")
    cubins = sorted(f for f in os.listdir(cubin_dir) if f.endswith(".cubin"))
    info = {"variant": variant, "module": module_name, "kwargs": {k: str(v) for k, v in kwargs.items()},
            "threads": _per_variant(module, "THREADS", kwargs), "smem_bytes": _smem_bytes(module, kwargs),
            "cluster": _per_variant(module, "CLUSTER", kwargs) or 1,
            "params": described, "cubins": [os.path.join("cubin", variant, c) for c in cubins],
            "compile_seconds": round(time.time() - start, 2)}
    _check_header(os.path.join(out_dir, variant + ".h"), variant, described)
    with open(os.path.join(out_dir, variant + ".json"), "w") as f:
        json.dump(info, f, indent=1)
    return info


def _launch(module, kwargs):
    """The launch function of a variant: module.launch_for(**kwargs) if the module builds one per
    variant (e.g. a compile-time tile parameter), else module.LAUNCH."""
    launch_for = getattr(module, "launch_for", None)
    return launch_for(**kwargs) if launch_for is not None else module.LAUNCH


def _per_variant(module, name, kwargs):
    """A module constant that may also be a function of the variant kwargs (THREADS, SMEM_BYTES,
    CLUSTER: CTAs per cluster, 1 when absent)."""
    value = getattr(module, name, None)
    return value(**kwargs) if callable(value) else value


def _smem_bytes(module, kwargs):
    """A module states its dynamic shared memory as SMEM_BYTES (an int or a function of the variant)."""
    return _per_variant(module, "SMEM_BYTES", kwargs)


def _check_header(path: str, variant: str, params: list[dict]) -> None:
    """The exported tensor structs must hold exactly the dynamic modes we bind."""
    text = open(path).read()
    for p in params:
        if p["kind"] != "tensor":
            continue
        m = re.search(r"typedef struct \{([^}]*)\}\s*gdn_%s_Tensor_%s_t;" % (re.escape(variant), p["name"]), text)
        if m is None:
            raise SystemExit(f"{variant}: no tensor struct for '{p['name']}' in {path}")
        shapes = re.search(r"dynamic_shapes\[(\d+)\]", m.group(1))
        strides = re.search(r"dynamic_strides\[(\d+)\]", m.group(1))
        n_shapes = int(shapes.group(1)) if shapes else 0
        n_strides = int(strides.group(1)) if strides else 0
        if (n_shapes, n_strides) != (len(p["dynamic_shape_modes"]), len(p["dynamic_stride_modes"])):
            raise SystemExit(f"{variant}: '{p['name']}' exports {n_shapes} shapes/{n_strides} strides, "
                             f"expected {len(p['dynamic_shape_modes'])}/{len(p['dynamic_stride_modes'])}")
        p["struct_has_shapes"] = n_shapes > 0
        p["struct_has_strides"] = n_strides > 0


# --------------------------------------------------------------------------- glue
def _glue(infos: list[dict]) -> str:
    out = [
        "/* Generated by cute_kernels/aot.py: do not edit. */",
        "#include <pthread.h>",
        "#include <string.h>",
        "#include <cuda_runtime.h>",
        "static cudaError_t gdn_first_load_error = cudaSuccess;",
        "#define CUTE_DSL_CUDA_ERROR_CHECK(err) { cudaError_t e_ = (err); "
        "if (e_ != cudaSuccess && gdn_first_load_error == cudaSuccess) gdn_first_load_error = e_; }",
        '#include "gdn_abi.h"',
        '#include "gdn_kernels.h"',
    ]
    out += [f'#include "{i["variant"]}.h"' for i in infos]
    out.append("")
    for i in infos:
        v = i["variant"]
        out.append(f"static gdn_{v}_Kernel_Module_t gdn_module_{v};")
        out.append(f"static int gdn_launch_{v}(const gdn_problem_t *p, cudaStream_t stream) {{")
        call = []
        for p in i["params"]:
            name = p["name"]
            if p["kind"] == "tensor":
                out.append(f"    gdn_{v}_Tensor_{name}_t {name};")
                out.append(f"    {name}.data = p->{name}.data;")
                for j, mode in enumerate(p["dynamic_shape_modes"]):
                    out.append(f"    {name}.dynamic_shapes[{j}] = (int32_t)p->{name}.shape[{mode}];")
                for j, mode in enumerate(p["dynamic_stride_modes"]):
                    out.append(f"    {name}.dynamic_strides[{j}] = p->{name}.stride[{mode}];")
                call.append(f"&{name}")
            else:
                call.append(f"p->{name}")
        call.append("stream")
        out.append(f"    return cute_dsl_gdn_{v}_wrapper(&gdn_module_{v}, {', '.join(call)});")
        out.append("}")
        out.append("")
    names = ", ".join(f'"{i["variant"]}"' for i in infos)
    out += [
        f"static const char *gdn_names[] = {{ {names} }};",
        f"int gdn_num_variants(void) {{ return {len(infos)}; }}",
        "const char *gdn_variant_name(int id) {",
        "    return (id >= 0 && id < gdn_num_variants()) ? gdn_names[id] : 0;",
        "}",
        "int gdn_variant_id(const char *name) {",
        "    for (int i = 0; i < gdn_num_variants(); ++i) if (strcmp(gdn_names[i], name) == 0) return i;",
        "    return -1;",
        "}",
        "static pthread_once_t gdn_load_once = PTHREAD_ONCE_INIT;",
        "static void gdn_load_all(void) {",
    ]
    out += [f"    gdn_{i['variant']}_Kernel_Module_Load(&gdn_module_{i['variant']});" for i in infos]
    out += [
        "}",
        "int gdn_load_modules(void) {",
        "    pthread_once(&gdn_load_once, gdn_load_all);",
        "    return (int)gdn_first_load_error;",
        "}",
        "int gdn_launch_variant(int id, const gdn_problem_t *p, cudaStream_t stream) {",
        "    switch (id) {",
    ]
    out += [f"    case {n}: return gdn_launch_{i['variant']}(p, stream);" for n, i in enumerate(infos)]
    out += ["    default: return -1;", "    }", "}", ""]
    return "\n".join(out)


def _static_runtime() -> str:
    sys.path.insert(0, ROOT)
    import importlib.util
    spec = importlib.util.find_spec("nvidia_cutlass_dsl")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("nvidia-cutlass-dsl is not installed: it is needed to compile the kernels")
    path = os.path.join(list(spec.submodule_search_locations)[0], "cu13", "lib", STATIC_RUNTIME)
    if not os.path.isfile(path):
        raise SystemExit(f"{path} not found: install nvidia-cutlass-dsl[cu13]")
    return path


def build(out_dir: str, jobs: int = 2) -> list[dict]:
    os.makedirs(out_dir, exist_ok=True)
    sys.path.insert(0, ROOT)
    os.environ.setdefault("CUTE_DSL_ARCH", ARCH)
    from cute_kernels import registry

    todo = list(registry.variants())
    procs: list[tuple[subprocess.Popen, str]] = []
    failed = []
    for module_name, variant, _ in todo:
        while len(procs) >= jobs:
            p, name = procs.pop(0)
            if p.wait() != 0:
                failed.append(name)
        cmd = [sys.executable, "-m", "cute_kernels.aot", "--one", module_name, variant, "--out", out_dir]
        procs.append((subprocess.Popen(cmd, cwd=ROOT), variant))
        print(f"[aot] compiling {variant}", flush=True)
    for p, name in procs:
        if p.wait() != 0:
            failed.append(name)
    if failed:
        raise SystemExit(f"[aot] failed variants: {', '.join(failed)}")
    infos = [json.load(open(os.path.join(out_dir, v + ".json"))) for _, v, _ in todo]
    with open(os.path.join(out_dir, "gdn_kernels.c"), "w") as f:
        f.write(_glue(infos))
    shutil.copy(_static_runtime(), os.path.join(out_dir, STATIC_RUNTIME))
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump({"arch": ARCH, "variants": infos}, f, indent=1)
    return infos


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "aot"))
    ap.add_argument("--jobs", type=int, default=max(1, min(4, os.cpu_count() or 1)))
    ap.add_argument("--one", nargs=2, metavar=("MODULE", "VARIANT"), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    out = os.path.abspath(a.out)
    if a.one:
        compile_one(a.one[0], a.one[1], out)
        return
    start = time.time()
    infos = build(out, a.jobs)
    print(f"[aot] {len(infos)} variants -> {out} in {time.time() - start:.1f}s")


if __name__ == "__main__":
    main()
