"""gdn-prefill: Gated DeltaNet chunked prefill for Hopper, CuTe DSL kernels AOT-linked into Cython."""
from __future__ import annotations

__version__ = "0.1.0"
