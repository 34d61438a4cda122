"""exp on the multi-function unit: one ex2.approx of x log2(e).

cute.math.exp is the accurate libdevice expf: a range reduction in FFMA (~10 instructions per
call).  Where the result is multiplied into a value that is rounded to bf16 or goes through fp32
products anyway, the approximation's relative error (~2^-22, plus x's rounding in x log2(e)) is
far below what follows, and one MUFU.EX2 and one FMUL are what FLA's Triton kernels use too.
Arguments that may overflow (above a triangle's diagonal) must be discarded by a select, never
multiplied by a 0/1 mask: inf * 0 is NaN.
"""
from __future__ import annotations

import cutlass.cute as cute
from cutlass import Float32

LOG2E = 1.4426950408889634


@cute.jit
def exp(x: Float32) -> Float32:
    """exp(x) as one MUFU.EX2 (ex2.approx, relative error ~2^-22)."""
    return cute.math.exp2(x * LOG2E, fastmath=True)
