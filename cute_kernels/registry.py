"""The kernel variants every build compiles: (module, variant name, variant kwargs)."""
from __future__ import annotations

import importlib

# One stage or spine per module; each module lists its own VARIANTS.
MODULES = (
    "recompute_wu",
    "spine_scalar",
    "spine_wgmma",
    "spine_rs",
    "compose",
    "fwd_o",
    "fused",
)


def load(module_name: str):
    return importlib.import_module(f"cute_kernels.{module_name}")


def variants():
    """Yield (module_name, variant_name, kwargs) for every variant to compile."""
    for module_name in MODULES:
        module = load(module_name)
        for name, kwargs in module.VARIANTS.items():
            yield module_name, name, kwargs
