"""bf16 words' building blocks: the sum of squares of eight bf16 values packed in four 32-bit
words (fp32), a word's two values widened (the chains' V), the reduce-scatter that completes a row
group's partial sums, and the same tree of sums within one thread (tree16).

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


def word_list(src: cute.Tensor) -> list:
    """words(src) as a list of its four 32-bit words (sumsq_bf16x8's arguments)."""
    w = words(src)
    return [w[i] for i in range(4)]


def tree16(leaf) -> tuple:
    """The sum of leaf(0) .. leaf(15) in stage 1's order, element-wise over the tuples leaf returns.

    Stage 1 (recompute_wu._row_norms) gives each of a row group's 16 threads one 8-column vector
    (sumsq_bf16x8, p_v) and completes the row by reduce_scatter over xor 8, 4, 2 and then xor 1:
    the sum ((p0 + p8) + (p4 + p12)) + ((p2 + p10) + (p6 + p14)), plus the same of the odd vectors.
    Added here in that tree (each fp32 add commutes, so only the tree decides the bits), depth
    first, so that at most one partial sum per level is live."""
    def pair(a, b):
        return tuple(x + y for x, y in zip(a, b))

    def level(x, step):
        if step == 8:
            return pair(leaf(x), leaf(x + 8))
        return pair(level(x, step * 2), level(x + step, step * 2))
    return pair(level(0, 2), level(1, 2))


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
