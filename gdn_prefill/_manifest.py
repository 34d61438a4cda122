"""What the AOT build compiled: variants, launch shapes, cubins (read from the shipped manifest)."""
from __future__ import annotations

import functools
import json
import os
from typing import Any, cast

_HERE = os.path.dirname(os.path.abspath(__file__))
MANIFEST = os.path.join(_HERE, "_aot_manifest.json")
CUBIN_DIR = os.path.join(_HERE, "_cubins")


@functools.lru_cache(maxsize=None)
def load() -> dict[str, Any]:
    with open(MANIFEST) as f:
        return cast("dict[str, Any]", json.load(f))


def variant(name: str) -> dict[str, Any]:
    for v in load()["variants"]:
        if v["variant"] == name:
            return cast("dict[str, Any]", v)
    raise KeyError(f"kernel variant {name!r} is not in this build")


def launch_info(name: str) -> dict[str, Any]:
    """Block size, CTAs per cluster and dynamic shared memory bytes of a compiled variant."""
    v = variant(name)
    return {"block": v.get("threads"), "cluster": v.get("cluster", 1), "smem_bytes": v.get("smem_bytes")}


def cubins(name: str) -> list[str]:
    """Paths of the sm_90a cubins shipped with the package for one variant."""
    # _cubins/<variant>/<file>: the DSL's file names are truncated and collide across variants
    return [os.path.join(CUBIN_DIR, name, os.path.basename(c)) for c in variant(name)["cubins"]]
