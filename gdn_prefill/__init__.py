"""gdn-prefill: Gated DeltaNet chunked prefill for Hopper.

CuTe DSL kernels compiled ahead of time and linked into a Cython extension whose
typed entry point validates strides, alignment and tile shapes before any launch.

    from gdn_prefill import prefill, explain, chunk_gated_delta_rule

`prefill` is the packed [T, H, D] entry point (strided views, state pools updated
in place, both state layouts, no host syncs); `chunk_gated_delta_rule` is the
FLA-shaped [B, T, H, D] layer over it; `explain` shows the plan without launching.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import (GdnAliasError, GdnArgumentError, GdnDeviceError, GdnDtypeError, GdnError,
                     GdnLaunchError, GdnLayoutError, GdnShapeError, GdnSpineError, GdnTypeError)

__version__ = "0.1.0"

_EXT_NAMES = ("prefill", "explain", "workspace_bytes", "workspace_layout", "compiled_variants")

__all__ = [  # a literal list, so that type checkers see the lazy names as exported
    "prefill", "explain", "workspace_bytes", "workspace_layout", "compiled_variants",
    "chunk_gated_delta_rule", "GdnError", "GdnDtypeError", "GdnShapeError", "GdnLayoutError",
    "GdnAliasError", "GdnDeviceError", "GdnSpineError", "GdnArgumentError", "GdnLaunchError",
    "GdnTypeError",
]


if TYPE_CHECKING:  # what the lazy __getattr__ below returns, for type checkers (see _ext.pyi)
    from ._ext import compiled_variants, explain, prefill, workspace_bytes, workspace_layout
    from .fla import chunk_gated_delta_rule


def __getattr__(name: str) -> Any:
    # The extension is imported on first use, so that build tools (cute_kernels) can import
    # gdn_prefill.grids from a source tree where the extension is not built yet.
    # The first access binds the name in this module, so later calls skip this hook (a Python
    # call per gdn_prefill.prefill(...) otherwise).
    if name in _EXT_NAMES:
        from . import _ext
        value = getattr(_ext, name)
    elif name == "chunk_gated_delta_rule":
        from .fla import chunk_gated_delta_rule as value
    else:
        raise AttributeError(f"module 'gdn_prefill' has no attribute {name!r}")
    globals()[name] = value
    return value
