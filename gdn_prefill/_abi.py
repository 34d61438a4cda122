"""The integer constants of include/gdn/gdn_abi.h, read from the header itself.

The header is the single source of truth: the DSL kernels (at build time), the
launch plan and the Cython guards all read their tiles and codes from here.
"""
from __future__ import annotations

import os
import re

_HERE = os.path.dirname(os.path.abspath(__file__))
# In a source tree the header at the root is the truth (the copy setup.py places in the
# package may be stale while it is being edited); an installed package reads its own copy.
_CANDIDATES = (
    os.path.join(os.path.dirname(_HERE), "include", "gdn", "gdn_abi.h"),
    os.path.join(_HERE, "include", "gdn", "gdn_abi.h"),
)


def header_path() -> str:
    for path in _CANDIDATES:
        if os.path.isfile(path):
            return path
    raise FileNotFoundError("gdn_abi.h not found in " + " or ".join(_CANDIDATES))


def _parse(path: str) -> dict[str, int]:
    pattern = re.compile(r"^\s*#define\s+(GDN_[A-Z0-9_]+)\s+(-?\d+)\b", re.M)
    with open(path) as f:
        return {name: int(value) for name, value in pattern.findall(f.read())}


CONSTANTS: dict[str, int] = _parse(header_path())
globals().update(CONSTANTS)

CHUNK: int = CONSTANTS["GDN_CHUNK"]
HEAD_DIM_K: int = CONSTANTS["GDN_HEAD_DIM_K"]
HEAD_DIM_V: int = CONSTANTS["GDN_HEAD_DIM_V"]
