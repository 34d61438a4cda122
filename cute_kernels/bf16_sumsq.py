"""bf16 words' building blocks: the sum of squares of eight bf16 values packed in four 32-bit
words (fp32), a word's two values widened (the chains' V), and the reduce-scatter that completes
a row group's partial sums.

A bf16 value is the high half of the fp32 with the same value, so a packed pair (lo, hi) widens
with two integer instructions: hi = w & 0xffff0000, lo = w << 16.  The DSL's element-wise
`.to(Float32)` emits three per pair (PRMT, then a shift for each half); for stage 1's row norms
(8 vectors of 8 values per thread) that is 32 instructions per thread saved.  The products and
the sum are fp32 FMAs in a fixed order (each square exact: a bf16 significand has 8 bits).
"""
from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import BFloat16, Float32, Int32
from cutlass._mlir.dialects import llvm
from cutlass.cutlass_dsl import T, dsl_user_op


@cute.jit
def words(src: cute.Tensor):
    """8 bf16 values in shared memory (one 16-byte load) as the four 32-bit words the sums take."""
    x = cute.make_rmem_tensor_like(src, BFloat16)
    cute.autovec_copy(src, x)
    return cute.recast_tensor(x, Int32)


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


@dsl_user_op
def sumsq_halves_bf16x8(w0: Int32, w1: Int32, w2: Int32, w3: Int32, hi: Float32, lo: Float32, *, loc=None,
                        ip=None) -> tuple:
    """Running sums of squares over the 8 bf16 halves of w0..w3: (hi + the upper halves' squares,
    lo + the lower halves'), each four fp32 FMAs in order.  Two chains of four where
    sumsq_bf16x8 is one of eight, and no add to fold it in: a row summed vector by vector this way
    is two chains of 4 per vector deep, not 8 + 1."""
    outs = []
    for acc, half in ((hi, "and.b32 x, ${i}, 0xffff0000;"), (lo, "shl.b32 x, ${i}, 16;")):
        body = ["{", ".reg .f32 x, s;", "mov.f32 s, $5;"]
        for i in range(4):
            body += [half.format(i=i + 1), "fma.rn.f32 s, x, x, s;"]
        body += ["mov.f32 $0, s;", "}"]
        outs.append(Float32(llvm.inline_asm(
            T.f32(), [Int32(w).ir_value(loc=loc, ip=ip) for w in (w0, w1, w2, w3)] + [Float32(acc).ir_value(loc=loc, ip=ip)],
            "\n\t".join(body), "=f,r,r,r,r,f", has_side_effects=False, is_align_stack=False,
            asm_dialect=llvm.AsmDialect.AD_ATT)))
    return outs[0], outs[1]


@dsl_user_op
def widen_bf16x2(w: Int32, *, loc=None, ip=None) -> tuple:
    """One word of two bf16 (lo, hi) -> the same values in fp32, exactly: w << 16 and
    w & 0xffff0000, one integer instruction each (the conversion of a high half takes two)."""
    res = llvm.inline_asm(
        llvm.StructType.get_literal([T.f32(), T.f32()]), [Int32(w).ir_value(loc=loc, ip=ip)],
        "{\n\t.reg .b32 l, h;\n\tshl.b32 l, $2, 16;\n\tand.b32 h, $2, 0xffff0000;\n\t"
        "mov.b32 $0, l;\n\tmov.b32 $1, h;\n}", "=f,=f,r", has_side_effects=False, is_align_stack=False,
        asm_dialect=llvm.AsmDialect.AD_ATT)
    return (Float32(llvm.extractvalue(T.f32(), res, [0], loc=loc, ip=ip)),
            Float32(llvm.extractvalue(T.f32(), res, [1], loc=loc, ip=ip)))


def reduce_scatter(ss: list, lg, widths=(8, 4, 2)) -> list:
    """Completes the partial sums ss (a Python list, the same row order in every thread) across
    the threads whose index lg within their row group differs in the bits of `widths`.  Each round
    (xor width) sends half of the thread's sums and keeps the other half: the upper thread of the
    pair keeps the upper half.  Returns the len(ss) / 2^rounds sums the thread keeps; after rounds
    8, 4, 2, 1 over 16 sums, thread lg keeps sum lg.  One shuffle per kept sum per round, where a
    butterfly per sum takes log2(group) shuffles for each."""
    for width in widths:
        upper = (lg & width) != 0
        h = len(ss) // 2
        kept = []
        for i in range(h):
            send = cutlass.select_(upper, ss[i], ss[i + h])
            keep = cutlass.select_(upper, ss[i + h], ss[i])
            kept.append(keep + cute.arch.shuffle_sync_bfly(send, offset=width))
        ss = kept
    return ss
