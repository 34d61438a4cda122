"""The launcher's variant tables are generated from the kernels' VARIANTS (cute_kernels/registry.py
launch_table_pxi, run by setup.py on the build's manifest): every compiled variant fills its own
entry, and a manifest the registry cannot place fails the build rather than shipping a table that
misses a build.  CPU only; the registry imports no DSL."""
from __future__ import annotations

import importlib.util
import os

import pytest

from gdn_prefill import _ext, _manifest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _registry():
    spec = importlib.util.spec_from_file_location("_registry", os.path.join(ROOT, "cute_kernels", "registry.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_compiled_variant_fills_one_entry():
    reg = _registry()
    variants = _manifest.load()["variants"]
    text = reg.launch_table_pxi(variants, ROOT)
    for v in variants:
        assert f'gdn_variant_id(b"{v["variant"]}")' in text, v["variant"]
    assert sorted(v["variant"] for v in variants) == sorted(_ext.compiled_variants())


def test_a_variant_the_registry_cannot_place_fails_the_build():
    reg = _registry()
    variants = _manifest.load()["variants"]
    with pytest.raises(ValueError, match="fill one entry"):
        reg.launch_table_pxi(variants + [dict(variants[0], variant="copy")], ROOT)
    with pytest.raises(ValueError, match="no launcher table"):
        reg.launch_table_pxi(variants + [{"module": "new_stage", "variant": "x", "kwargs": {}}], ROOT)
    with pytest.raises(ValueError, match="is not one of"):
        reg.launch_table_pxi([{"module": "spine_rs", "variant": "x", "kwargs": {"layout": "xy"}}], ROOT)


def test_the_register_state_spine_build_codes_are_the_plan_names():
    from gdn_prefill import grids
    assert tuple(name for name, _ in _registry().AXES["rs_build"][1]) == grids.RS_BUILDS
    assert [_ext._spine_rs_build(64, 1, 4, 132, False)] == ["solo"]
