"""The kernel variants every build compiles, and the launcher's tables of them.

variants() yields (module, variant name, variant kwargs) from each module's VARIANTS: what
cute_kernels.aot compiles.  launch_entries() says which entry of which launcher table a compiled
variant fills, from its kwargs as the build's manifest.json records them (str() of each value), and
launch_table_pxi() writes those tables as Cython (setup.py, at build time, into the extension's
variants_table.pxi): the launcher's variant table is generated from VARIANTS, never written by hand.
This module imports no DSL: setup.py runs it on a prebuilt manifest (GDN_PREFILL_PREBUILT).
"""
from __future__ import annotations

import importlib
import os
import re

# One stage or spine per module; each module lists its own VARIANTS.
MODULES = (
    "recompute_wu",
    "spine_scalar",
    "spine_wgmma",
    "spine_rs",
    "compose",
    "fwd_o",
    "single",
)


def load(module_name: str):
    return importlib.import_module(f"cute_kernels.{module_name}")


def variants():
    """Yield (module_name, variant_name, kwargs) for every variant to compile."""
    for module_name in MODULES:
        module = load(module_name)
        for name, kwargs in module.VARIANTS.items():
            yield module_name, name, kwargs


# ----------------------------------------------------------------------------- the launcher's tables
# An axis: (the C name of its size, its values as (the value launch_entries names, the C index)).
# The indices that gdn_abi.h defines (GDN_SPINE_*, GDN_STATE_*) are its names; the others are
# declared by the generated file (enum members) or are plain positions.
AXES: dict[str, tuple[str, tuple[tuple[str, str], ...]]] = {
    # beta's element type (the stage-1 and single builds read it as it comes)
    "beta": ("2", (("f32", "0"), ("bf16", "1"))),
    # q, k, v, out movable in 16-byte vectors: the "_a16" builds (_aligned16() picks per call)
    "aligned": ("2", (("any", "0"), ("a16", "1"))),
    # the state pool's element type (cute_kernels/state_pool.py STATE_DTYPES; _state_type() picks)
    "sdt": ("NUM_SDT", (("fp32", "SDT_F32"), ("bf16", "SDT_BF16"), ("fp16", "SDT_F16"), ("fp8e4m3", "SDT_F8E4M3"))),
    # GDN_SPINE_*: auto (index 0) has no build
    "spine": ("NUM_SPINES", (("auto", "GDN_SPINE_AUTO"), ("scalar", "GDN_SPINE_SCALAR"),
                             ("wgmma", "GDN_SPINE_WGMMA"))),
    "layout": ("NUM_LAYOUTS", (("kv", "GDN_STATE_KV"), ("vk", "GDN_STATE_VK"))),
    # warpgroups per CTA of a spine build (index warpgroups - 1; the scalar spine's one build fills both)
    "warpgroups": ("NUM_SPINE_WG", (("1", "0"), ("2", "1"))),
    # spine_rs_o's builds, in the order of the launcher's codes (gdn_prefill.grids.RS_BUILDS, checked at import)
    "rs_build": ("NUM_RS_BUILDS", (("solo", "RS_SOLO"), ("pair", "RS_PAIR"), ("dual", "RS_DUAL"))),
}

# The enum members the generated file declares (the others come from gdn_abi.h).
_ENUMS = ("sdt", "rs_build")
_SIZES = ("sdt", "spine", "layout", "warpgroups", "rs_build")

# table -> (its axes, what it holds); the C array is _v_<table>.
TABLES: dict[str, tuple[tuple[str, ...], str]] = {
    "wu": (("beta", "aligned"), "stage 1 (recompute_wu: W, U) of the unfused plan"),
    "wu_pqk": (("beta",), "stage 1 of the fused plans (recompute_wu: Tu, pqk, beta32; aligned only)"),
    "wu_workers": (("beta",), "the overlap plan's stage 1 (recompute_wu_workers: the same outputs, published)"),
    "fwd_o": (("aligned",), "stage 3 (fwd_o) of the unfused plan"),
    "spine": (("sdt", "spine", "layout", "warpgroups"), "the unfused plan's spine (h, vnew)"),
    "spine_o": (("sdt", "layout", "rs_build"), "the serial and overlap plans' register-state spine + output (spine_rs_o)"),
    "spine_maps": (("sdt", "layout"), "the segmented plan's MAPS pass (spine_rs, role maps)"),
    "spine_seg": (("sdt", "layout", "rs_build"), "the segmented plan's SEGMENT pass (spine_rs, role segment; solo or dual)"),
    "compose": ((), "the segmented plan's composition of the segment maps (pool-independent)"),
    "single": (("sdt", "layout", "beta"), "the single plan's one kernel (single_prefill)"),
}


def launch_entries(module: str, kwargs: dict[str, str]) -> list[tuple[str, dict[str, str]]]:
    """The launcher table entries, (table, {axis: value}), that a compiled variant fills, from its
    module and its VARIANTS kwargs as manifest.json records them (every value as str())."""
    kw = {k: str(v) for k, v in kwargs.items()}
    beta = "bf16" if kw.get("beta_dtype") == "BFloat16" or kw.get("beta") == "bf16" else "f32"
    aligned = "a16" if kw.get("aligned") == "True" else "any"
    sdt = kw.get("state_dtype", "fp32")
    layout = kw.get("layout", "")
    if module == "recompute_wu":
        if kw.get("with_pqk") == "True":
            if aligned != "a16":
                raise ValueError(f"recompute_wu {kwargs}: the fused plans' stage 1 is built aligned only")
            return [("wu_workers" if kw.get("workers") == "True" else "wu_pqk", {"beta": beta})]
        return [("wu", {"beta": beta, "aligned": aligned})]
    if module == "fwd_o":
        return [("fwd_o", {"aligned": aligned})]
    if module == "spine_scalar":
        return [("spine", {"sdt": sdt, "spine": "scalar", "layout": layout, "warpgroups": wg}) for wg in ("1", "2")]
    if module == "spine_wgmma":
        return [("spine", {"sdt": sdt, "spine": "wgmma", "layout": layout, "warpgroups": kw.get("warpgroups", "1")})]
    if module == "spine_rs":
        role = kw.get("role", "sequence")
        if role == "maps":
            return [("spine_maps", {"sdt": sdt, "layout": layout})]
        build = "dual" if kw.get("dual") == "True" else ("pair" if kw.get("pair") == "True" else "solo")
        if role == "segment":
            return [("spine_seg", {"sdt": sdt, "layout": layout, "rs_build": build})]
        return [("spine_o", {"sdt": sdt, "layout": layout, "rs_build": build})]
    if module == "compose":
        return [("compose", {})]
    if module == "single":
        return [("single", {"sdt": sdt, "layout": layout, "beta": beta})]
    raise ValueError(f"module {module!r}: no launcher table holds its builds (cute_kernels/registry.py TABLES)")


def _header_constants(root: str) -> dict[str, int]:
    with open(os.path.join(root, "include", "gdn", "gdn_abi.h")) as f:
        return {n: int(v) for n, v in re.findall(r"^\s*#define\s+(GDN_[A-Z0-9_]+)\s+(-?\d+)\b", f.read(), re.M)}


def launch_table_pxi(manifest_variants: list[dict], root: str | None = None) -> str:
    """The launcher's variant tables as Cython, from the build's manifest["variants"] (module,
    variant, kwargs): each table _v_<name> declared with its axes, every entry -1, then each
    compiled variant's entries set to its id (gdn_variant_id, looked up once at import).  Fails
    when a variant fills no entry, two fill one, or an axis value is unknown; and checks the axes
    that gdn_abi.h numbers against the header."""
    root = root or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    header = _header_constants(root)
    for axis, (_, values) in AXES.items():
        for i, (_, cname) in enumerate(values):
            if cname.startswith("GDN_") and header.get(cname) != i:
                raise ValueError(f"axis {axis}: {cname} is {header.get(cname)} in gdn_abi.h, the table puts it at {i}")
    filled: dict[tuple[str, tuple[str, ...]], str] = {}
    for v in manifest_variants:
        for table, index in launch_entries(v["module"], v.get("kwargs", {})):
            axes = TABLES[table][0]
            if set(index) != set(axes):
                raise ValueError(f"{v['variant']}: entry {index} of table {table} needs the axes {axes}")
            cidx = []
            for axis in axes:
                names = dict(AXES[axis][1])
                if index[axis] not in names:
                    raise ValueError(f"{v['variant']}: {axis}={index[axis]!r} is not one of {sorted(names)}")
                cidx.append(names[index[axis]])
            key = (table, tuple(cidx))
            if key in filled:
                raise ValueError(f"{v['variant']} and {filled[key]} fill one entry of table {table}: {index}")
            filled[key] = v["variant"]
    out = ["# Generated at build time by cute_kernels/registry.py (launch_table_pxi) from the kernels' VARIANTS",
           "# as the build's manifest.json records them: do not edit.  Each table _v_<name> holds the",
           "# launch-table ids of its builds by the axes in brackets (-1: not compiled in).",
           "cdef enum:"]
    for axis in _ENUMS:
        for i, (_, cname) in enumerate(AXES[axis][1]):
            out.append(f"    {cname} = {i}")
    for axis in _SIZES:
        size, values = AXES[axis]
        out.append(f"    {size} = {len(values)}")
    out.append("")
    for axis in _ENUMS:
        out.append(f"_{axis.upper()}_NAMES = {tuple(name for name, _ in AXES[axis][1])!r}")
    out.append("")
    for table, (axes, what) in TABLES.items():
        dims = "".join(f"[{AXES[a][0]}]" for a in axes)
        out.append(f"cdef int _v_{table}{dims}    # {what}" + (f": [{'][' .join(axes)}]" if axes else ""))
        out.append(f"memset({'&' if not axes else ''}_v_{table}, 0xff, sizeof(_v_{table}))")
    out.append("")
    for (table, cidx), variant in filled.items():
        out.append(f"_v_{table}{''.join(f'[{c}]' for c in cidx)} = gdn_variant_id(b\"{variant}\")")
    return "\n".join(out) + "\n"
