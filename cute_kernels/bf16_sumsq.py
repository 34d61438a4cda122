"""Sum of squares of eight bf16 values packed in four 32-bit words, in fp32.

A bf16 value is the high half of the fp32 with the same value, so a packed pair (lo, hi) widens
with two integer instructions: hi = w & 0xffff0000, lo = w << 16.  The DSL's element-wise
`.to(Float32)` emits three per pair (PRMT, then a shift for each half); for stage 1's row norms
(8 vectors of 8 values per thread) that is 32 instructions per thread saved.  The products and
the sum are fp32 FMAs in a fixed order (each square exact: a bf16 significand has 8 bits).
"""
from __future__ import annotations

from cutlass import Float32, Int32
from cutlass._mlir.dialects import llvm
from cutlass.cutlass_dsl import T, dsl_user_op


@dsl_user_op
def sumsq_bf16x8(w0: Int32, w1: Int32, w2: Int32, w3: Int32, *, loc=None, ip=None) -> Float32:
    """sum over the 8 bf16 halves of w0..w3 of x^2 (fp32)."""
    body = ["{", ".reg .f32 h, l, s;", "mov.f32 s, 0f00000000;"]
    for i in range(4):
        body += [f"and.b32 h, ${i + 1}, 0xffff0000;", f"shl.b32 l, ${i + 1}, 16;",
                 "fma.rn.f32 s, h, h, s;", "fma.rn.f32 s, l, l, s;"]
    body += ["mov.f32 $0, s;", "}"]
    res = llvm.inline_asm(
        T.f32(), [Int32(w).ir_value(loc=loc, ip=ip) for w in (w0, w1, w2, w3)], "\n\t".join(body),
        "=f,r,r,r,r", has_side_effects=False, is_align_stack=False, asm_dialect=llvm.AsmDialect.AD_ATT)
    return Float32(res)
