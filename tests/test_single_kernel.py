"""The single plan's kernel (cute_kernels/single.py), its objects (CPU).

The GPU rows are the suite's plan "single" (test_gpu_prefill, test_numerics_hard, the sanitizer
case); here, what every single build is made of: each warpgroup's setmaxnreg at the class's split
(I/O, role, chains), the MMAs of a chunk (the role's 16 k-steps of K K^T and Q K^T; its inverse
twice: in fp16, 2 m16n8k8 and 15 m16n8k16 mma.syncs with operands by ldmatrix, and the fp32
fallback's 18 TF32 merge mma.syncs; the chains' 24 k-steps of 64 x 64 and 4 of 64 x 128, every A
operand in registers), the shared-memory staging (the role's P and fp16 A by stmatrix, the output
transposed, V by ldmatrix; no S^T staged), the waits (the role's one, the chains' four: ptxas keeps each MMA's
k-steps in flight, it waits only where the kernel does), the chains' turns, no local memory, and
the norm warps' gate loads issued ahead of their wait for the tiles.
"""
from __future__ import annotations

import collections
import re

import pytest

import gdn_prefill
from gdn_prefill import _manifest, sass

needs_nvdisasm = pytest.mark.skipif(sass.nvdisasm() is None,
                                    reason="nvdisasm not installed (pip install nvidia-cuda-nvdisasm)")


# cute_kernels.single.SinglePrefill's register split (the installed package has no DSL to import it
# from): the same names
CHAIN_REGS, INTRA_REGS, IO_REGS = 192, 104, 24


def _ops(cubin):
    return collections.Counter(re.sub(r"^@!?U?P\w+\s+", "", x["text"]).split()[0] for x in sass.instructions(cubin))


@needs_nvdisasm
@pytest.mark.parametrize("build", ["single_prefill_betabf16_kv", "single_prefill_betaf32_vk_sbf16",
                                   "single_prefill_betabf16_kv_sf16", "single_prefill_betaf32_vk_sf8e4m3"])
def test_single_objects(build):
    if build not in gdn_prefill.compiled_variants():
        pytest.skip(f"{build} not in this build")
    (cubin,) = _manifest.cubins(build)
    ins = sass.instructions(cubin)
    # setmaxnreg: the I/O warpgroup's and the role's decrease, then the chains' increase
    regs = [int(x["text"].split()[-1], 16) for x in ins if "USETMAXREG" in x["text"]]
    assert regs == [IO_REGS, INTRA_REGS, CHAIN_REGS], regs
    ops = _ops(cubin)
    assert ops["HGMMA.64x64x16.F32.BF16"] == 16 + 24 and ops["HGMMA.64x128x16.F32.BF16"] == 4, ops
    assert ops["HMMA.1688.F32"] == 2 and ops["HMMA.16816.F32"] == 15 and ops["HMMA.1688.F32.TF32"] == 18, ops
    # every chain MMA reads its A operand from registers: only the role's products read two tiles
    hg = [x["text"] for x in ins if x["text"].lstrip().startswith("HGMMA")]
    assert sum("gdesc" in t.split(",")[1] for t in hg) == 16, hg
    # P (4) and the fp16 A (4 in each of the two fp16 folds: with l2norm, and pre-normed without the
    # unit norms) by stmatrix; the output (4) transposed; V by ldmatrix (4); the fp16 inverse's
    # operands: T22 by rows (3 .x4, 1 .x2), A21 and T11 transposed (7 .x4, 1 .x2, 2 .x1)
    assert ops["STSM.16.M88.4"] == 4 + 2 * 4 and ops["STSM.16.MT88.4"] == 4 and ops["LDSM.16.MT88.4"] == 4 + 7, ops
    assert (ops["LDSM.16.M88.4"], ops["LDSM.16.M88.2"], ops["LDSM.16.MT88.2"], ops["LDSM.16.MT88"]) == (3, 1, 1, 2), ops
    waits = collections.Counter(re.findall(r"WARPGROUP\.DEPBAR\.LE gsb0, (0x[0-9a-f]+)", sass.disassemble(cubin)))
    # the role's products (one wait), then the chains' G1 + G2, G1b, G4 (depth 1: G3 stays in flight), G3
    assert waits == {"0x0": 4, "0x1": 1}, waits
    # the chains' turns: chain 1's first pass and three per chunk; chain 0's three and its last wait
    assert ops["BAR.ARV"] == 4, ops
    assert sass.resources(cubin)[0]["stack_frame"] == 0
    assert not any(op.startswith(("LDL", "STL")) for op in ops), ops
    # the output's bulk stores: each chunk's waited for their reads only (DEPBAR alone), and all
    # waited for completely once, as the store warp ends (DEPBAR, CCTL.IVALL, EXIT); a complete
    # wait elsewhere (a patch once put it in a per-chunk step) stalls every chunk's stores and
    # leaves the last ones unwaited
    texts = [x["text"].strip() for x in ins]
    full = [i for i, t in enumerate(texts[:-2]) if t.startswith("DEPBAR.LE SB0, 0x0") and texts[i + 1] == "CCTL.IVALL"]
    assert len(full) == 1 and texts[full[0] + 2] == "EXIT", [texts[i - 1:i + 3] for i in full]


def _region(cubin, regs: int) -> list[dict]:
    """The instructions of the warpgroup whose setmaxnreg sets `regs`, up to the next setmaxnreg."""
    ins = sass.instructions(cubin)
    marks = [i for i, x in enumerate(ins) if "USETMAXREG" in x["text"]] + [len(ins)]
    k = next(k for k, i in enumerate(marks[:-1]) if int(ins[i]["text"].split()[-1], 16) == regs)
    return ins[marks[k]:marks[k + 1]]


@needs_nvdisasm
@pytest.mark.parametrize("build", ["single_prefill_betabf16_kv", "single_prefill_betaf32_vk_sf8e4m3"])
def test_the_role_indexes_in_32_bits(build):
    """The role's thread index is known non-negative (tidx & 127; opaque(x) & 127 where it is
    formed per chunk), so its divisions and remainders by powers of two are shifts and masks.  As
    tidx - 256 (or an opaque value) LLVM narrowed them to 16- and 8-bit signed arithmetic with a
    rounding correction each, and ptxas sign-extended the halves back (PRMT 0x9910, 0x8880):
    ~130 such instructions in the role, a sixth of its path through a chunk with the index math
    around them."""
    if build not in gdn_prefill.compiled_variants():
        pytest.skip(f"{build} not in this build")
    (cubin,) = _manifest.cubins(build)
    prmt = [x["text"] for x in _region(cubin, INTRA_REGS) if re.search(r"\bPRMT\b.*0x(9910|8880|7710)\b", x["text"])]
    assert not prmt, prmt


def _gate_loads_before_tile_wait(cubin, io: int) -> list[str]:
    """The LDGs of the block that ends in the norm warps' wait for a chunk's K / q tiles (the
    last mbarrier wait before their first RSQ), in the I/O warpgroup's code (between its
    setmaxnreg and the role's)."""
    region = _region(cubin, io)
    rsq = next(i for i, x in enumerate(region) if "MUFU.RSQ" in x["text"])
    wait = max(i for i, x in enumerate(region[:rsq]) if "TRYWAIT" in x["text"])
    start = wait
    while start > 0:
        prev = region[start - 1]["text"]
        if re.search(r"\b(BRA|BSSY|BSYNC|EXIT)\b", prev):
            break
        start -= 1
        if region[start]["label"]:
            break
    return [x["text"] for x in region[start:wait] if "LDG" in x["text"]]


@needs_nvdisasm
@pytest.mark.parametrize("build", ["single_prefill_betabf16_kv", "single_prefill_betaf32_vk",
                                   "single_prefill_betabf16_vk_sf8e4m3"])
def test_norm_warps_load_the_gates_before_the_tile_wait(build):
    """The norm warps issue a chunk's g and beta loads (gates.gate_rows) back to back in the
    block that ends in their wait for its tiles: no branch and no conversion between a load and
    the wait, which would wait for each load in turn (the first form, loads under `if row < L`
    with bf16 beta converted there, cost 23 %; loads after the norms cost 3-7 %)."""
    if build not in gdn_prefill.compiled_variants():
        pytest.skip(f"{build} not in this build")
    (cubin,) = _manifest.cubins(build)
    loads = _gate_loads_before_tile_wait(cubin, io=IO_REGS)
    widths = sorted(t.split()[0] for t in loads)
    beta = "LDG.E.U16" if "betabf16" in build else "LDG.E"
    assert widths == sorted(["LDG.E", "LDG.E", beta, beta]), loads     # g (fp32) twice, beta twice


def test_the_folds_masks_by_distance_match_the_fragment(repo_script):
    """IntraChunk.folds masks A (i > j where beta_i != 0) and P (i >= j) by the distances from the
    thread's first row and column against compile-time offsets (wgmma_acc.row_offset, col_offset).
    Against the m64nNk16 C fragment's layout (as above): every value's row and column are the
    thread's first ones plus those offsets, so each compare keeps exactly the values that i > j and
    i >= j keep."""
    acc = repo_script("cute_kernels/wgmma_acc.py")

    def at(w, lane, e):
        v0, v1, v2 = e % 2, (e // 2) % 2, e // 4
        return 16 * w + lane // 4 + 8 * v1, 8 * v2 + 2 * (lane % 4) + v0

    for tid in range(128):
        w, lane = divmod(tid, 32)
        i0, j0 = at(w, lane, 0)
        for e in range(32):
            i, j = at(w, lane, e)
            assert (i, j) == (i0 + acc.row_offset(acc.row(e)), j0 + acc.col_offset(acc.col(e))), (tid, e)
            k = acc.col_offset(acc.col(e))
            for beta_nonzero in (True, False):
                a_row = i if beta_nonzero else -1
                assert ((a_row - j0) > k) == (a_row > j)
            assert ((i0 - j0) >= k - acc.row_offset(acc.row(e))) == (i >= j)


def test_the_role_key_check_reads_every_diagonal_value_once(repo_script):
    """IntraChunk.keys_in_range reads each row's K K^T diagonal from the thread that holds it
    (wgmma_acc.holds_diagonal, wgmma_acc.diagonal).  Against the m64nNk16 C fragment's layout
    (warp w, lane l, value e = v0 + 2 v1 + 4 v2 at row 16 w + l // 4 + 8 v1, column 8 v2 +
    2 (l % 4) + v0): every one of the 64 rows is checked by exactly one of the 128 threads, on its
    own diagonal, so no row escapes the fp16 inverse's range check."""
    acc = repo_script("cute_kernels/wgmma_acc.py")
    seen = collections.Counter()
    for tid in range(128):
        w, lane = divmod(tid, 32)
        g = lane // 4
        if not acc.holds_diagonal(lane):
            continue
        for h in range(2):
            e = acc.diagonal(w, h, g % 2)
            v0, v1, v2 = e % 2, (e // 2) % 2, e // 4
            r, c = 16 * w + g + 8 * v1, 8 * v2 + 2 * (lane % 4) + v0
            assert (r, c) == (16 * w + 8 * h + g,) * 2, (tid, h, e)
            seen[r] += 1
    assert seen == collections.Counter(range(64))
