"""What the installed package carries besides Python code: the manifest, one cubin per variant
(distinct files: the DSL's cubin names collide across variants), the C headers and .pxd files
for cimport callers, the type stubs and py.typed."""
from __future__ import annotations

import os

import gdn_prefill
from gdn_prefill import _ext, _manifest

PKG = os.path.dirname(os.path.abspath(gdn_prefill.__file__))


def test_every_variant_has_its_own_cubins():
    seen: dict[str, str] = {}
    for v in _ext.compiled_variants():
        paths = _manifest.cubins(v)
        assert paths, v
        for path in paths:
            assert os.path.isfile(path), f"{v}: {path} missing"
            assert path not in seen, f"{v} and {seen.get(path)} share the cubin file {path}"
            seen[path] = v


def test_variants_with_different_code_ship_different_cubins():
    """kv and vk spines (and the 1- and 2-warpgroup wgmma builds, the solo and pair register-state spines) are
    different kernels: their
    shipped cubins must not be one file."""
    names = _ext.compiled_variants()
    for a, b in (("spine_scalar_kv", "spine_scalar_vk"), ("spine_wgmma_kv", "spine_wgmma_vk"),
                 ("spine_wgmma_wg2_kv", "spine_wgmma_wg2_vk"), ("spine_wgmma_kv", "spine_wgmma_wg2_kv"),
                 ("spine_rs_o_kv", "spine_rs_o_vk"), ("spine_rs_o_pair_kv", "spine_rs_o_pair_vk"),
                 ("spine_rs_o_kv", "spine_rs_o_pair_kv")):
        if a in names and b in names:
            (ca,), (cb,) = _manifest.cubins(a), _manifest.cubins(b)
            assert open(ca, "rb").read() != open(cb, "rb").read(), (a, b)


def test_headers_pxd_and_stubs_ship():
    for rel in ("include/gdn/gdn_abi.h", "include/gdn/gdn_kernels.h", "_ext.pxd", "gdn_abi.pxd", "_ext.pyi",
                "py.typed", "_aot_manifest.json"):
        assert os.path.isfile(os.path.join(PKG, rel)), rel
