"""Exceptions raised by gdn-prefill before anything is launched.

Every rejection names the argument and the rule it broke; nothing is launched
and no output or state is written when one is raised.
"""
from __future__ import annotations


class GdnError(Exception):
    """Base of every gdn-prefill error."""


class GdnDtypeError(GdnError, TypeError):
    """A tensor has the wrong element type."""


class GdnTypeError(GdnError, TypeError):
    """An argument is not of the kind it must be: a dense torch tensor, a real number, a bool, a
    string, a stream (the message names the argument and what it got)."""


class GdnShapeError(GdnError, ValueError):
    """A tensor has the wrong rank or extent, or tensors disagree on a dimension."""


class GdnLayoutError(GdnError, ValueError):
    """A stride, a contiguity or an alignment rule is broken."""


class GdnAliasError(GdnError, ValueError):
    """An output overlaps an input."""


class GdnDeviceError(GdnError, ValueError):
    """Tensors are not all on one CUDA device, or the device cannot run the kernels."""


class GdnSpineError(GdnError, ValueError):
    """The requested spine was rejected by one of its guards (the message names it)."""


class GdnArgumentError(GdnError, ValueError):
    """Any other invalid argument (an unknown option, a non-finite scale, ...)."""


class GdnLaunchError(GdnError, RuntimeError):
    """CUDA reported an error while loading or launching a kernel."""


BY_STATUS = {
    1: GdnDtypeError,
    2: GdnShapeError,
    3: GdnLayoutError,
    4: GdnAliasError,
    5: GdnSpineError,
    6: GdnArgumentError,
    7: GdnLaunchError,
    8: GdnSpineError,
}
