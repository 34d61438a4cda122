"""fp32 products on the tensor cores: warp-level mma.sync m16n8k8 in TF32, in one pass or three.

Stage 1's inverse (recompute_wu, phases 3.2 and 3.3) multiplies small fp32 blocks that live in
shared memory.  On CUDA cores every FMA needs its operands from shared memory (LDS.128 of a row,
broadcast LDS of the other factor): those two phases then issue nearly half of stage 1's
shared-memory wavefronts.  One m16n8k8 tile reads its A fragment once (4 conflict-free LDS.32)
and its B fragment once (2 LDS.32) per 8-deep k-step and does 1,024 multiply-adds on the tensor
core.  Stage 1's merges run in ONE TF32 pass (tile_16x8: each operand rounded to the nearest
TF32, round_tf32), FLA's precision: the merged blocks of Tm are rounded to bf16 next (2^-9),
against which TF32's 2^-11 is small, so o and the final state keep three passes' errors
(docs/PERFORMANCE.md, numerics) at a third of the MMAs.

The composition of the segmented plan (compose.py) multiplies 128 x 128 maps that are never
rounded, chained over up to 31 steps: it keeps fp32 accuracy in three passes.  Each operand is
split x = hi + lo and a product is hi*hi + hi*lo + lo*hi (lo*lo, ~2^-20 of the product,
dropped).  hi = x with its low 13 bits cleared (one LOP3) and lo = x - hi (one FADD, exact: hi
and x share sign and exponent); lo goes to the tensor core as plain fp32 bits, which it
truncates to TF32 (CUTLASS's FastF32 relies on the same truncation), an error of <= 2^-10 |lo|
<= 2^-20 |x|.  cvt.rna.tf32.f32 has no SASS instruction on sm_90: ptxas emits ~4 instructions
per conversion; round_tf32 is an integer add and a mask (2).
Fragment layouts are PTX's for m16n8k8 .tf32
(g = lane / 4, t = lane % 4):
    A (16 x 8, row):  a0 = A[g, t], a1 = A[g + 8, t], a2 = A[g, t + 4], a3 = A[g + 8, t + 4]
    B (8 x 8, col):   b0 = B[t, g], b1 = B[t + 4, g]
    C (16 x 8):       c0 = C[g, 2t], c1 = C[g, 2t + 1], c2 = C[g + 8, 2t], c3 = C[g + 8, 2t + 1]
"""
from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Float32, Int32
from cutlass._mlir.dialects import llvm
from cutlass.cutlass_dsl import T, dsl_user_op


@dsl_user_op
def split_tf32(x: Float32, *, loc=None, ip=None):
    """x -> (hi, lo) as bit patterns (Int32): hi = x with the low 13 mantissa bits cleared (a TF32
    value), lo = x - hi (exact; the tensor core truncates it to TF32)."""
    res = llvm.inline_asm(
        llvm.StructType.get_literal([T.i32(), T.i32()]),
        [Float32(x).ir_value(loc=loc, ip=ip)],
        "{\n\t.reg .b32 h;\n\t.reg .f32 l;\n\tand.b32 h, $2, 0xffffe000;\n\tsub.f32 l, $2, h;\n\t"
        "mov.b32 $1, l;\n\tmov.b32 $0, h;\n}",
        "=r,=r,f", has_side_effects=False, is_align_stack=False, asm_dialect=llvm.AsmDialect.AD_ATT)
    return (Int32(llvm.extractvalue(T.i32(), res, [0], loc=loc, ip=ip)),
            Int32(llvm.extractvalue(T.i32(), res, [1], loc=loc, ip=ip)))


@dsl_user_op
def mma_3xtf32(a_hi, a_lo, b_hi, b_lo, c, *, loc=None, ip=None):
    """d = A_hi B_lo + A_lo B_hi + A_hi B_hi + c for one m16n8k8 tile (the small terms first);
    a_* are 4 Int32 TF32 patterns, b_* 2, c 4 Float32.  Returns the 4 Float32 of d."""
    ops = ([Int32(v).ir_value(loc=loc, ip=ip) for v in (*a_hi, *a_lo, *b_hi, *b_lo)]
           + [Float32(v).ir_value(loc=loc, ip=ip) for v in c])
    mma = "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"
    # operands: $0-3 d, $4-7 a_hi, $8-11 a_lo, $12-13 b_hi, $14-15 b_lo, $16-19 c
    res = llvm.inline_asm(
        llvm.StructType.get_literal([T.f32()] * 4), ops,
        f"{{\n\t{mma} {{$0,$1,$2,$3}}, {{$4,$5,$6,$7}}, {{$14,$15}}, {{$16,$17,$18,$19}};\n\t"
        f"{mma} {{$0,$1,$2,$3}}, {{$8,$9,$10,$11}}, {{$12,$13}}, {{$0,$1,$2,$3}};\n\t"
        f"{mma} {{$0,$1,$2,$3}}, {{$4,$5,$6,$7}}, {{$12,$13}}, {{$0,$1,$2,$3}};\n}}",
        "=&f,=&f,=&f,=&f," + ",".join(["r"] * 12) + ",f,f,f,f",
        has_side_effects=False, is_align_stack=False, asm_dialect=llvm.AsmDialect.AD_ATT)
    return [Float32(llvm.extractvalue(T.f32(), res, [i], loc=loc, ip=ip)) for i in range(4)]


@dsl_user_op
def round_tf32(x: Float32, *, loc=None, ip=None):
    """x -> its nearest TF32 value (ties away from zero) as a bit pattern (Int32), as cvt.rna
    rounds (FLA's one-pass "tf32"): add half of the dropped field's unit, clear the low 13 bits
    (ptxas keeps only the add: the tensor core ignores those bits)."""
    res = llvm.inline_asm(
        T.i32(), [Float32(x).ir_value(loc=loc, ip=ip)],
        "{\n\t.reg .b32 t;\n\tmov.b32 t, $1;\n\tadd.u32 t, t, 0x1000;\n\tand.b32 $0, t, 0xffffe000;\n}",
        "=r,f", has_side_effects=False, is_align_stack=False, asm_dialect=llvm.AsmDialect.AD_ATT)
    return Int32(res)


@dsl_user_op
def mma_sync(kind: str, a, b, c, *, loc=None, ip=None):
    """d = A B + c, one warp-level mma.sync of `kind` (shape, layouts and types, e.g.
    "m16n8k8.row.col.f32.tf32.tf32.f32"); a, b: the lane's Int32 fragments, c: 4 Float32.  Returns
    the 4 Float32 of d.  Every mma.sync the kernels issue one at a time goes through here
    (mma_1xtf32; inverse_f16's fp16 doubling)."""
    na, nb = len(a), len(b)
    ops = [Int32(v).ir_value(loc=loc, ip=ip) for v in (*a, *b)] + [Float32(v).ir_value(loc=loc, ip=ip) for v in c]
    ar = ",".join(f"${4 + i}" for i in range(na))
    br = ",".join(f"${4 + na + i}" for i in range(nb))
    cr = ",".join(f"${4 + na + nb + i}" for i in range(4))
    res = llvm.inline_asm(
        llvm.StructType.get_literal([T.f32()] * 4), ops,
        f"mma.sync.aligned.{kind} {{$0,$1,$2,$3}}, {{{ar}}}, {{{br}}}, {{{cr}}};",
        "=f,=f,=f,=f," + ",".join(["r"] * (na + nb)) + ",f,f,f,f",
        has_side_effects=False, is_align_stack=False, asm_dialect=llvm.AsmDialect.AD_ATT)
    return [Float32(llvm.extractvalue(T.f32(), res, [i], loc=loc, ip=ip)) for i in range(4)]


def mma_1xtf32(a, b, c):
    """d = A B + c for one m16n8k8 tile in one TF32 pass; a: 4 Int32 TF32 patterns, b: 2, c: 4
    Float32.  Returns the 4 Float32 of d."""
    return mma_sync("m16n8k8.row.col.f32.tf32.tf32.f32", a, b, c)


@cute.jit
def tile_16x8(acc: cute.Tensor, sa: cute.Tensor, a_r: Int32, a_c: Int32, sb: cute.Tensor, b_r: Int32,
              b_c: Int32, kk_begin: Int32, kk_end: Int32, lane: Int32, kk_max: cutlass.Constexpr):
    """acc (this lane's 4 C values) += A B over the 8-deep k-steps kk in [kk_begin, kk_end), kk_end <=
    kk_max: A[i, k] = sa[a_r + i, a_c + k], B[k, j] = sb[b_r + k, b_c + j], i < 16, j < 8.  The caller
    skips k-steps whose A or B part is an exact zero (a triangular factor): every skipped term is
    0 * x, so the sum is the same.  The k-steps are unrolled to kk_max by hand, each under a
    warp-uniform bound check (stage 1's four calls: 12 k-step bodies): a dynamic loop leaves the
    unrolling to ptxas, which makes more bodies with remainder paths (docs/PERFORMANCE.md,
    stage 1)."""
    g = lane // 4
    t = lane % 4
    for kk in cutlass.range_constexpr(kk_max):
        if kk >= kk_begin and kk < kk_end:
            _kstep(acc, sa, a_r, a_c, sb, b_r, b_c, kk, g, t)


@cute.jit
def _kstep(acc: cute.Tensor, sa: cute.Tensor, a_r: Int32, a_c: Int32, sb: cute.Tensor, b_r: Int32,
           b_c: Int32, kk: cutlass.Constexpr, g: Int32, t: Int32):
    """One 8-deep k-step of tile_16x8: the operands rounded to TF32, one mma.sync."""
    k0 = 8 * kk
    a = (round_tf32(sa[a_r + g, a_c + k0 + t]), round_tf32(sa[a_r + g + 8, a_c + k0 + t]),
         round_tf32(sa[a_r + g, a_c + k0 + t + 4]), round_tf32(sa[a_r + g + 8, a_c + k0 + t + 4]))
    b = (round_tf32(sb[b_r + k0 + t, b_c + g]), round_tf32(sb[b_r + k0 + t + 4, b_c + g]))
    d = mma_1xtf32(a, b, (acc[0], acc[1], acc[2], acc[3]))
    for i in cutlass.range_constexpr(4):
        acc[i] = d[i]


@cute.jit
def store_tile_16x8(acc: cute.Tensor, sd: cute.Tensor, r: Int32, c: Int32, lane: Int32, negate: cutlass.Constexpr):
    """sd[r + i, c + j] = (-)C[i, j] from the lanes' C fragments (two 8-byte stores per lane)."""
    g = lane // 4
    t = lane % 4
    for h in cutlass.range_constexpr(2):
        for e in cutlass.range_constexpr(2):
            v = acc[2 * h + e]
            if cutlass.const_expr(negate):
                v = -v
            sd[r + g + 8 * h, c + 2 * t + e] = v
