"""Proof that costs no GPU time: what the shipped sm_90a cubins contain.

The wgmma spine must be built from warpgroup MMA (HGMMA) fed by TMA (UTMALDG); the
scalar spine must not use tensor cores at all; no kernel may spill to local memory.
"""
from __future__ import annotations

import re

import pytest

from gdn_prefill import _manifest, grids, sass
from gdn_prefill._abi import CONSTANTS as ABI

VARIANTS = [v["variant"] for v in _manifest.load()["variants"]]

needs_nvdisasm = pytest.mark.skipif(sass.nvdisasm() is None,
                                    reason="nvdisasm not installed (pip install nvidia-cuda-nvdisasm)")


def counts(variant: str) -> dict[str, int]:
    (cubin,) = _manifest.cubins(variant)
    return sass.opcode_counts(sass.disassemble(cubin))


def test_every_stage_and_spine_is_built():
    for name in ("recompute_wu_bf16_betaf32", "recompute_wu_bf16_betabf16",
                 "recompute_wu_bf16_betaf32_a16", "recompute_wu_bf16_betabf16_a16", "spine_scalar_kv",
                 "spine_scalar_vk", "spine_wgmma_kv", "spine_wgmma_vk", "spine_wgmma_wg2_kv", "spine_wgmma_wg2_vk",
                 "fwd_o_bf16", "fwd_o_bf16_a16", "recompute_wu_bf16_betaf32_a16_pqk",
                 "recompute_wu_bf16_betabf16_a16_pqk", "spine_rs_o_kv", "spine_rs_o_vk", "spine_rs_o_pair_kv",
                 "spine_rs_o_pair_vk", "spine_rs_o_dual_kv", "spine_rs_o_dual_vk"):
        assert name in VARIANTS


@pytest.mark.parametrize("variant", VARIANTS)
def test_cubin_is_sm90_and_does_not_spill(variant):
    (cubin,) = _manifest.cubins(variant)
    assert sass.elf_arch(cubin) == 90
    (res,) = sass.resources(cubin)
    assert res["registers"] and res["registers"] <= 255
    assert res["stack_frame"] == 0, f"{variant}: {res['stack_frame']}-byte stack frame"


# Hopper's shared memory a CTA may have (cudaDevAttrMaxSharedMemoryPerBlockOptin on H100 / H200):
# the launch's dynamic bytes plus the kernel's static ones
SMEM_PER_CTA = 227 * 1024


@pytest.mark.parametrize("variant", VARIANTS)
def test_shared_memory_fits_a_cta(variant):
    """The dynamic shared memory a variant launches with, plus the static bytes its cubin declares
    (ptxas gives every kernel here a 1 KB .nv.shared section), within what a CTA may have: else
    the launch fails at run time, which no CPU test would see."""
    (cubin,) = _manifest.cubins(variant)
    (res,) = sass.resources(cubin)
    dynamic = _manifest.variant(variant)["smem_bytes"]
    assert dynamic + res["static_smem"] <= SMEM_PER_CTA, (variant, dynamic, res["static_smem"])


@needs_nvdisasm
@pytest.mark.parametrize("variant", VARIANTS)
def test_no_local_memory_traffic(variant):
    c = counts(variant)
    assert c["LDL"] == 0 and c["STL"] == 0, c


WGMMA_SPINES = [v for v in VARIANTS if v.startswith("spine_wgmma_")]
RS_SPINES = [v for v in VARIANTS if v.startswith("spine_rs_o_")]      # with the output (maps: without)
MAPS_SPINES = [v for v in VARIANTS if v.startswith("spine_rs_maps_")]


@needs_nvdisasm
@pytest.mark.parametrize("variant", WGMMA_SPINES + RS_SPINES)
def test_wgmma_spine_uses_tensor_cores_and_tma(variant):
    """HGMMA fed by TMA loads; h and vnew (spine_rs_o: the output) leave by TMA stores; U
    comes in by ldmatrix."""
    c = counts(variant)
    assert c["HGMMA"] > 0 and c["UTMALDG"] > 0 and c["UTMASTG"] > 0 and c["LDSM"] > 0, c


@needs_nvdisasm
@pytest.mark.parametrize("variant", WGMMA_SPINES)
def test_wgmma_spine_waits_only_where_written(variant):
    """Two MMA waits per chunk and none injected by ptxas (it adds a WARPGROUP.DEPBAR, or
    serialises every wgmma, when accumulator registers are touched while a wgmma is in flight)."""
    (cubin,) = _manifest.cubins(variant)
    waits = re.findall(r"WARPGROUP\.DEPBAR\.LE gsb0, (0x[0-9a-f]+)", sass.disassemble(cubin))
    assert waits == ["0x0", "0x0"], waits


@needs_nvdisasm
@pytest.mark.parametrize("variant", MAPS_SPINES)
def test_maps_pass_runs_the_chain_alone(variant):
    """The segmented plan's MAPS pass (spine_rs_maps_*, dual): per chunk only the chain's three
    products, G1 = bf16(S^T) K^T (8 k-steps), G1b = bf16(Y^T) Tu^T (4) and G3 = P^T K (4 of
    64x128), every A operand in registers, each waited for at once (nothing else to overlap: no G2,
    no G4); no output (no TMA store, no stmatrix), V by ldmatrix, tiles by TMA; registers moved to
    the two chains by setmaxnreg; the chunk loop neither loads into registers nor stores."""
    text = sass.disassemble(_manifest.cubins(variant)[0])
    c = counts(variant)
    assert c["HGMMA"] == 8 + 4 + 4, c["HGMMA"]
    assert len(re.findall(r"HGMMA\.64x64x16\.F32\.BF16 R\d+, R\d+, gdesc", text)) == 12
    assert len(re.findall(r"HGMMA\.64x128x16\.F32\.BF16 R\d+, R\d+, gdesc", text)) == 4
    assert re.findall(r"WARPGROUP\.DEPBAR\.LE gsb0, (0x[0-9a-f]+)", text) == ["0x0"] * 3
    assert c["UTMASTG"] == 0 and c["STSM"] == 0 and c["LDSM"] > 0 and c["UTMALDG"] > 0 and c["LDGSTS"] == 0, c
    assert sorted(re.findall(r"USETMAXREG\.(DEALLOC|TRY_ALLOC)\.CTAPOOL", text)) == ["DEALLOC", "TRY_ALLOC"]
    assert _manifest.variant(variant)["threads"] == 384
    body = [x["text"] for x in _chunk_loop(variant)]
    assert not [t for t in body if re.match(r"(@!?U?P\w+\s+)?(STG|LDG)\b", t)], variant


@needs_nvdisasm
@pytest.mark.parametrize("variant", MAPS_SPINES)
def test_maps_pass_cuts_at_the_headers_threshold(variant):
    """The MAPS pass's cut (spine_rs._map_cut) compares the chunks' summed log-decay with
    GDN_MAP_CUT_LOG_DECAY itself, the number explain() reports: in each of the walk's two places
    (the load warp's and the chains'), one FSETP against that immediate, after a five-step shuffle
    scan and a ballot.  A build whose objects predate a change of the header fails here."""
    text = sass.disassemble(_manifest.cubins(variant)[0])
    cut = ABI["GDN_MAP_CUT_LOG_DECAY"]
    assert re.findall(r"FSETP\.[A-Z.]+ P\d+, PT, R\d+, (-?[\d.]+), PT", text) == [f"{cut:g}"] * 2, variant
    assert len(re.findall(r"\bSHFL\.UP\b", text)) == 2 * 5 and len(re.findall(r"\bVOTE\.ANY\b", text)) >= 2, variant


@needs_nvdisasm
def test_compose_walk_is_three_tf32_passes_on_the_tensor_cores():
    """compose_f32: each step one m16n8k8 tile a warp, 16 k-steps of three TF32 mma.sync each (48
    HMMA, all in the walk's loop; no FFMA: the products are on the tensor cores, the four
    accumulators summed by FADD); A_j's pieces 16 LDG.128 a lane in the loop (a step ahead) and 16
    before it; S_j's pieces 8 LDS.128 a lane; B_j and the composed state by 8-byte pieces (2 LDG.64
    and 2 STG.64 a step, and B_0 before the loop); one CTA barrier a step (two S buffers); no local
    memory."""
    v = "compose_f32"
    if v not in VARIANTS:
        pytest.skip(f"{v} not in this build")
    c = counts(v)
    text = sass.disassemble(_manifest.cubins(v)[0])
    assert c["HMMA"] == 3 * (grids.HEAD_DIM_K // 8) and c["FFMA"] == 0 and c["HGMMA"] == 0, c
    assert c["LDL"] == 0 and c["STL"] == 0, c
    assert len(re.findall(r"HMMA\.1688\.F32\.TF32", text)) == 48
    assert len(re.findall(r"LDG\.E\.128", text)) == 2 * 16
    assert len(re.findall(r"LDG\.E\.64", text)) == 2 + 2
    assert len(re.findall(r"STG\.E\.64", text)) == 2 + 2
    assert len(re.findall(r"LDS\.128", text)) == 8
    assert len(re.findall(r"BAR\.SYNC", text)) == 2
    ins = sass.instructions(_manifest.cubins(v)[0])
    loops = [ins[a:b + 1] for a, b in sass.loops(ins)]
    assert len(loops) == 1 and sum("HMMA" in x["text"] for x in loops[0]) == 48


@needs_nvdisasm
@pytest.mark.parametrize("build", ["solo", "pair", "dual", "seg", "seg_dual"])
@pytest.mark.parametrize("layout", ["kv", "vk"])
def test_register_state_spine_feeds_every_mma_from_registers(layout, build):
    """spine_rs_o: per chunk G1 = bf16(S^T) K^T and G2 = bf16(S^T) Q^T (8 k-steps of 64x64 each),
    G1b = bf16(Y^T) Tu^T (4 of 64x64), G3 = P^T K (4 of 64x128) and the previous chunk's G4 =
    Vnew^T Pqk^T (4 of 64x64; the last chunk's after the loop), every A operand in registers (HGMMA
    R, R, gdesc); five MMA waits per chunk (G1 with G4 in flight, G4 with G1b in flight, G1b with
    G2 in flight, G2 with G3 in flight, then nothing in flight across the loop's back edge) and one
    after it: none injected by ptxas, no wgmma serialised.  No shared-memory round
    trip of S: the only STSM are the
    output's (4 in the loop, 4 in the last chunk's epilogue after it), the only CTA barrier is
    the set-up's, and the warpgroup meets itself on named barrier 1 only to publish a partial
    chunk's zeroed K rows: the output goes to the store warp by mbarriers, so no barrier of the
    chain waits on a store; the TMA warp does every load (no LDGSTS).  The pair build is the same
    chunk in a cluster of the head's two CTAs (the barrier that ends its set-up and the one before
    it exits are cluster barriers).  The dual build is the same chunk run by two consumer
    warpgroups of one CTA (their named barrier counts the working ones, a register), with the registers moved
    from the I/O warpgroup to them by setmaxnreg (the I/O warpgroup's decrease, the chains'
    increase: both kept by ptxas, which drops them when a role's code does not fit).  The
    segmented plan's SEGMENT pass is the solo build's chunk (seg) or the dual build's (seg_dual)."""
    pair = build == "pair"
    dual = build in ("dual", "seg_dual")
    v = f"spine_rs_o_{layout}" if build == "solo" else f"spine_rs_o_{build}_{layout}"
    if v not in VARIANTS:
        pytest.skip(f"{v} not in this build")
    text = sass.disassemble(_manifest.cubins(v)[0])
    c = counts(v)
    assert c["HGMMA"] == 8 + 8 + 4 + 4 + 4 + 4, c["HGMMA"]
    assert len(re.findall(r"HGMMA\.64x64x16\.F32\.BF16 R\d+, R\d+, gdesc", text)) == 28
    assert len(re.findall(r"HGMMA\.64x128x16\.F32\.BF16 R\d+, R\d+, gdesc", text)) == 4
    waits = re.findall(r"WARPGROUP\.DEPBAR\.LE gsb0, (0x[0-9a-f]+)", text)
    assert waits == ["0x1", "0x1", "0x1", "0x1", "0x0", "0x0"], waits
    assert c["STSM"] == 4 + 4 and c["LDGSTS"] == 0
    if not pair:
        assert len(re.findall(r"BAR\.SYNC\.DEFER_BLOCKING 0x0\b", text)) == 1
    # the dual build's count is 128 per working warpgroup (a register: 1 or 2 of them work)
    count = r"R\d+" if build == "dual" else ("0x100" if dual else "0x80")
    assert len(re.findall(rf"BAR\.SYNC\.DEFER_BLOCKING 0x1, {count}\b", text)) == 1, \
        re.findall(r"BAR\.SYNC[^;]*", text)
    info = _manifest.variant(v)
    assert info["threads"] == (384 if dual else 192)
    assert info["cluster"] == (grids.RS_SPINE_PAIR if pair else 1)
    resize = re.findall(r"USETMAXREG\.(DEALLOC|TRY_ALLOC)\.CTAPOOL (?:UP\d, )?(0x[0-9a-f]+)", text)
    # (I/O, chains) registers (spine_rs: DUAL_IO_REGS / DUAL_CHAIN_REGS 56 / 224, the dual SEGMENT
    # build's SEG_DUAL_* 40 / 232): each sums to the CTA's pool, 2 x (chains - 168) = 168 - I/O
    want = {"dual": [("DEALLOC", "0x38"), ("TRY_ALLOC", "0xe0")],
            "seg_dual": [("DEALLOC", "0x28"), ("TRY_ALLOC", "0xe8")]}.get(build, [])
    assert sorted(resize) == want, resize


def _chunk_loop(variant: str) -> list[dict]:
    """The instructions of a spine's chunk loop: the longest loop that holds HGMMAs."""
    (cubin,) = _manifest.cubins(variant)
    ins = sass.instructions(cubin)
    spans = [(a, b) for a, b in sass.loops(ins) if any("HGMMA" in x["text"] for x in ins[a:b + 1])]
    assert spans, variant
    a, b = max(spans, key=lambda ab: ab[1] - ab[0])
    return ins[a:b + 1]


@needs_nvdisasm
@pytest.mark.parametrize("v", [f"spine_rs_o_{b}{lay}{sdt}" for b in ("", "pair_", "seg_") for lay in ("kv", "vk")
                               for sdt in ("", "_sbf16", "_sf16", "_sf8e4m3")])
def test_register_state_spine_chunk_loop_holds_no_state_store(v):
    """A checkpoint's store inside spine_rs's chunk loop, never executed without
    checkpoints, made the one-sequence rows 6-7 % slower (the loop 664 -> 806 instructions).  The
    chunks now run in segments with the store between them: the innermost loop that holds the
    chain's MMAs stores nothing to global memory and loads nothing into registers, and it is as
    long as the loop before checkpoints (664 instructions; 681 with the segment bounds; 726 with
    beta scaling Y before its rounding: 16 loads of beta's ring and 32 multiplies; the segment
    role 734; 754 with chain.vnew's full-chunk form beside its partial one: the loop holds both, a
    chunk runs one).  (The
    dual build's two roles interleave their branches: the loop finder does not isolate its chunk
    loop, and the source is the same.)"""
    if v not in VARIANTS:
        pytest.skip(f"{v} not in this build")
    ins = sass.instructions(_manifest.cubins(v)[0])
    spans = [(a, b) for a, b in sass.loops(ins) if any("HGMMA" in x["text"] for x in ins[a:b + 1])]
    a, b = min(spans, key=lambda ab: ab[1] - ab[0])
    body = [x["text"] for x in ins[a:b + 1]]
    assert not [t for t in body if re.match(r"(@!?U?P\w+\s+)?(STG|LDG)\b", t)], v
    assert len(spans) == 2, (v, spans)           # the chunk loop inside the segment loop
    assert len(body) <= 770, (v, len(body))


def _is_ldg(text: str) -> bool:
    """A global load into registers (predicated or not)."""
    return re.match(r"(@!?U?P\w+\s+)?LDG\b", text) is not None


def _waits_on_register_loads(body: list[dict]) -> list[str]:
    """Instructions of a loop that wait on a scoreboard which an LDG of the same loop sets."""
    ldg = {x["wb"] for x in body if _is_ldg(x["text"])}
    return [x["text"] for x in body if any((x["wait"] >> sb) & 1 for sb in ldg if sb is not None)]


@needs_nvdisasm
@pytest.mark.parametrize("layout", ["kv", "vk"])
def test_wgmma_latency_loop_never_waits_on_a_register_load(layout):
    """ncu at B=1: 14.6 % of the latency build's stall samples sat on its loop's first
    instruction, waiting (SASS control bits) on the scoreboard of the row-data LDGs issued a chunk
    earlier.  Its chunk loop now issues no LDG at all, so nothing in it can wait on one.  The
    throughput build keeps that register path (its shared memory is at the two-CTA limit) and
    the decoder sees the same wait there."""
    one = _chunk_loop(f"spine_wgmma_{layout}")
    assert not [x for x in one if _is_ldg(x["text"])]
    assert _waits_on_register_loads(one) == []
    two = _chunk_loop(f"spine_wgmma_wg2_{layout}")
    assert any(t.startswith("F2FP") for t in _waits_on_register_loads(two))


@needs_nvdisasm
@pytest.mark.parametrize("layout", ["kv", "vk"])
def test_wgmma_latency_build_reads_row_data_from_its_ring(layout):
    """The latency build copies each chunk's gcum / rk rows into its TMA ring with cp.async that
    complete on the stage's full mbarrier (LDGSTS + ARRIVES.LDGSTSBAR), so its loop never waits
    on a register load's scoreboard for them; the throughput build loads them into registers."""
    one = counts(f"spine_wgmma_{layout}")
    two = counts(f"spine_wgmma_wg2_{layout}")
    assert one["LDGSTS"] > 0 and one["ARRIVES"] > 0, one
    assert two["LDGSTS"] == 0 and two["ARRIVES"] == 0, two


@pytest.mark.parametrize("layout", ["kv", "vk"])
def test_wgmma_spine_builds_by_warpgroups(layout):
    """One kernel compiled per warpgroup count: 128 * WG threads; shared memory = the mbarriers
    (and for WG=1 each stage's fp32 gcum / rk rows) in 1 KB-aligned blocks, a ring of W and K
    (shared by the warpgroups) and U per warpgroup, 4 stages for WG=1 (it refills three chunks
    ahead) and 2 for WG=2, then each warpgroup's own bf16(S), P and bf16(Vnew) tiles (two Vnew
    tiles for WG=1, one for WG=2: two CTAs per SM)."""
    one, two = _manifest.variant(f"spine_wgmma_{layout}"), _manifest.variant(f"spine_wgmma_wg2_{layout}")
    assert (one["threads"], two["threads"]) == (128, 256)
    chunk, dk, vb = ABI["GDN_CHUNK"], ABI["GDN_HEAD_DIM_K"], ABI["GDN_WGMMA_SPINE_VBLOCK"]

    def smem(wg, stages, vn, rows):
        head = 16 * stages + (4 * stages * 2 * chunk if rows else 0)       # mbarriers (+ rows)
        ring = stages * 2 * (chunk * dk + dk * chunk + wg * chunk * vb)
        return -(-head // 1024) * 1024 + ring + wg * 2 * (dk * vb + chunk * vb + vn * chunk * vb)

    assert (one["smem_bytes"], two["smem_bytes"]) == (smem(1, 4, 2, True), smem(2, 2, 1, False))
    assert 2 * (two["smem_bytes"] + 1024) <= 228 * 1024     # two throughput CTAs per SM
    assert one["kwargs"]["warpgroups"] == "1" and two["kwargs"]["warpgroups"] == "2"


@needs_nvdisasm
@pytest.mark.parametrize("variant", ["spine_scalar_kv", "spine_scalar_vk"])
def test_scalar_spine_has_no_tensor_core_instructions(variant):
    c = counts(variant)
    assert c["HGMMA"] == 0 and c["HMMA"] == 0 and c["FFMA"] > 0, c


STAGE_13 = [v for v in VARIANTS if v.startswith(("recompute_wu", "fwd_o"))]


@needs_nvdisasm
@pytest.mark.parametrize("variant", STAGE_13)
def test_stages_1_and_3_run_on_tensor_cores(variant):
    """KK^T, W, U (stage 1) and QK^T, QS, P.Vnew (stage 3) are warpgroup MMA."""
    assert counts(variant)["HGMMA"] > 0


@needs_nvdisasm
@pytest.mark.parametrize("variant", [v for v in STAGE_13 if v.endswith("_a16")])
def test_aligned_builds_move_rows_in_16_byte_vectors(variant):
    """The _a16 builds load q/k/v with 16-byte cp.async instead of 2-byte loads."""
    (cubin,) = _manifest.cubins(variant)
    text = sass.disassemble(cubin)
    assert counts(variant)["LDGSTS"] > 0
    # only the bf16 beta (two values per thread) may still come in 2-byte loads
    assert len(re.findall(r"LDG\.E\.U16", text)) <= 2


@needs_nvdisasm
@pytest.mark.parametrize("variant", [v for v in STAGE_13 if v.startswith("recompute_wu")])
def test_stage1_inverse_merges_one_tf32_pass(variant):
    """The inverse's merges run as mma.sync TF32 in one pass (FLA's precision: the errors
    of three passes to three or four digits, the prefill 2-4 % faster at 16/32), each operand
    rounded to the nearest TF32 by an integer add and a mask (mma_tf32.round_tf32).
    cvt.rna.tf32.f32 has no sm_90 instruction: ptxas emulates each with an inf check (FSETP ...
    +INF), an add, a select and a mask (an earlier build had 60 such checks).  The k-steps
    are unrolled by hand (mma_tf32.tile_16x8's kk_max: -1.0 to -2.4 % per prefill): the
    four products' 2 + 2 + 4 + 4 steps, one HMMA each, where ptxas's own unrolling of a dynamic
    loop left 18 k-step bodies (or 11 inside a loop over items)."""
    text = sass.disassemble(_manifest.cubins(variant)[0])
    hmma = re.findall(r"HMMA\.1688\.F32\.TF32 ", text)
    assert len(hmma) == 2 + 2 + 4 + 4, len(hmma)
    assert len(re.findall(r"\+INF", text)) == 0
    # round_tf32's add of half a TF32 unit precedes each operand (ptxas drops the mask: the tensor
    # core ignores the low 13 bits): 6 operands per k-step
    assert len(re.findall(r"(?:IADD3|VIADD) R\d+, R\d+, 0x1000\b", text)) >= 6 * len(hmma)


@needs_nvdisasm
@pytest.mark.parametrize("suffix", ["a16", "a16_pqk"])
def test_stage1_row_norms_reduce_scatter(suffix):
    """The aligned builds' row norms (in-kernel l2norm) finish a thread's eight partial sums of
    squares (4 k rows, 4 q rows) by one reduce-scatter over the row's 16 threads: 8 butterfly
    shuffles and one rsqrt per thread, where a butterfly per sum took 32 and eight (-2.4 to
    -5.5 % per prefill with use_qk_l2norm)."""
    variant = f"recompute_wu_bf16_betaf32_{suffix}"
    if variant not in VARIANTS:
        pytest.skip(f"{variant} not in this build")
    text = sass.disassemble(_manifest.cubins(variant)[0])
    assert len(re.findall(r"SHFL\.BFLY ", text)) == 8
    assert len(re.findall(r"MUFU\.RSQ ", text)) == 1


@needs_nvdisasm
@pytest.mark.parametrize("beta", ["betaf32", "betabf16"])
def test_fused_stage1_ends_at_tu(beta):
    """The fused plan's stage 1 (_pqk) computes K K^T and Q K^T (8 k-steps of 64x32 per warpgroup
    each) and no W / U product, loads the k and q tiles by TMA (two 64-column boxes each, one
    mbarrier) and not v, and stores two tiles by TMA (P and Tu); the unfused plan's _a16 build has
    the W / U products (64x64), loads k and q the same way and v by cp.async (8 per thread of one
    warpgroup) and stores W and U (two halves each).  (Before the TMA loads, k and q came by
    cp.async: 8 per thread.)"""
    fused, plain = f"recompute_wu_bf16_{beta}_a16_pqk", f"recompute_wu_bf16_{beta}_a16"
    for v in (fused, plain):
        if v not in VARIANTS:
            pytest.skip(f"{v} not in this build")
    text = sass.disassemble(_manifest.cubins(fused)[0])
    c = counts(fused)
    assert c["HGMMA"] == len(re.findall(r"HGMMA\.64x32x16\.F32\.BF16 ", text)) == 16, c["HGMMA"]
    assert c["LDGSTS"] == 0 and c["UTMALDG"] == 4 and c["UTMASTG"] == 2, c
    p = counts(plain)
    assert p["LDGSTS"] == 8 and p["UTMALDG"] == 4 and p["UTMASTG"] == 4, p
    assert len(re.findall(r"HGMMA\.64x64x16\.F32\.BF16 ", sass.disassemble(_manifest.cubins(plain)[0]))) == 8


@needs_nvdisasm
@pytest.mark.parametrize("layout", ["kv", "vk"])
def test_only_the_throughput_build_multicasts(layout):
    """The 2-warpgroup build loads W/K with cluster multicast (each CTA half, both receive it);
    the 1-warpgroup latency build and spine_rs_o have no cluster and no multicast copy."""
    def multicast_loads(variant):
        (cubin,) = _manifest.cubins(variant)
        return len(re.findall(r"\bUTMALDG\.[0-9]D\.MULTICAST\b", sass.disassemble(cubin)))
    wg2 = f"spine_wgmma_wg2_{layout}"
    assert multicast_loads(wg2) > 0 and _manifest.variant(wg2)["cluster"] == 2
    for single in (f"spine_wgmma_{layout}", f"spine_rs_o_{layout}"):
        assert multicast_loads(single) == 0 and _manifest.variant(single)["cluster"] == 1


def _conversions(variant: str) -> dict[str, int]:
    """The float conversions of a build's SASS, by opcode with its modifiers."""
    (cubin,) = _manifest.cubins(variant)
    text = sass.disassemble(cubin)
    ops = re.findall(r"\b(F2FP\.[A-Z0-9_.]+|F2F\.[A-Z0-9_.]+|HADD2\.F32|I2F\.[A-Z0-9_.]+)", text)
    return {op: ops.count(op) for op in set(ops)}


@needs_nvdisasm
@pytest.mark.parametrize("variant", [v for v in VARIANTS if v.endswith(("_sf16", "_sf8e4m3"))])
def test_low_precision_pools_convert_once_in_registers(variant):
    """An fp16 or fp8 e4m3 pool costs one register conversion per element read and per element
    written, and nothing else changes: the build's conversions are the fp32 build's (its bf16
    roundings of operands, F2FP.BF16.F32, and integer reciprocals) plus, for fp16, HADD2.F32 (fp16 -> fp32, exact) and
    F2FP.F16.F32 (round to nearest even), and for fp8, F2FP.F16.E4M3.UNPACK_B then HADD2.F32 (fp8 ->
    fp16 -> fp32, exact) and F2FP.SATFINITE.E4M3.F32 (round to nearest even, saturating at +-448:
    the rounding docs/DESIGN.md states); no software conversion.  The MAPS pass only reads the pool.
    The single plan's fp16 inverse converts fp16 itself (HADD2.F32, F2FP.F16.F32): there the pool
    adds to the fp32 build's counts of those."""
    pool_ops = {"HADD2.F32", "F2FP.F16.F32.PACK_AB", "F2FP.F16.E4M3.UNPACK_B",
                "F2FP.SATFINITE.E4M3.F32.PACK_AB_MERGE_C"}
    base = variant.rsplit("_s", 1)[0]
    got, want = _conversions(variant), _conversions(base)
    own = {"HADD2.F32", "F2FP.F16.F32.PACK_AB"} if variant.startswith("single_prefill_") else set()
    assert set(want) & pool_ops == own, want
    assert {op: n for op, n in got.items() if op not in pool_ops} == {op: n for op, n in want.items()
                                                                     if op not in pool_ops}, (got, want)
    pool = {op: n - want.get(op, 0) for op, n in got.items() if op in pool_ops and n > want.get(op, 0)}
    assert all(got.get(op, 0) >= want[op] for op in own), (got, want)
    stores = "_maps_" not in variant
    if variant.endswith("_sf16"):
        assert set(pool) == {"HADD2.F32"} | ({"F2FP.F16.F32.PACK_AB"} if stores else set()), got
    else:
        assert set(pool) == {"F2FP.F16.E4M3.UNPACK_B", "HADD2.F32"} | (
            {"F2FP.SATFINITE.E4M3.F32.PACK_AB_MERGE_C"} if stores else set()), got
        assert pool["F2FP.F16.E4M3.UNPACK_B"] == pool["HADD2.F32"], got       # each element read: both steps
        fp16 = _conversions(base + "_sf16")
        assert pool["HADD2.F32"] == fp16["HADD2.F32"] - want.get("HADD2.F32", 0), (got, fp16)  # the fp16 build's reads



WORKERS = [v for v in VARIANTS if v.endswith("_workers")]


@needs_nvdisasm
@pytest.mark.parametrize("variant", WORKERS)
def test_overlap_workers_trigger_first_and_wait_on_nothing(variant):
    """The overlap plan's no-hang argument, as the workers build's SASS (overlap.pxi): every CTA issues
    launch_dependents (PREEXIT) before it waits for anything but its own predecessor (ACQBULK, the
    griddepcontrol.wait before it), and nowhere does it read memory with acquire semantics (an
    LDG.*.STRONG spin on another CTA's flag): so the spine, scheduled only once every workers CTA has
    triggered, waits on CTAs that run and never wait."""
    (cubin,) = _manifest.cubins(variant)
    ops = [re.sub(r"^@!?U?P[T0-9]+\s+", "", i["text"]).split()[0].split(".")[0] for i in sass.instructions(cubin)]
    assert "PREEXIT" in ops and "ACQBULK" in ops
    first = ops.index("PREEXIT")
    assert ops.index("ACQBULK") < first
    before = set(ops[:first])
    assert not before & {"BAR", "SYNCS", "LDG", "LDS", "ATOMG", "RED"}, sorted(before)
    text = sass.disassemble(cubin)
    assert not re.search(r"LDG\.E[.A-Z0-9]*\.STRONG", text), "the workers build reads a flag"
    assert ops.count("PREEXIT") == 1


@needs_nvdisasm
@pytest.mark.parametrize("variant", [v for v in VARIANTS if v.startswith("spine_rs_o")])
def test_overlapped_spine_acquires_before_it_reads(variant):
    """The register-state spine's entry (handoff.enter): one path waits for its predecessor grid
    (ACQBULK, the serial plan), the other triggers its dependents and spins on an acquire load of
    ready[0, 0] (the overlap plan); no global load before either."""
    (cubin,) = _manifest.cubins(variant)
    text = sass.disassemble(cubin)
    strong = re.search(r"LDG\.E[.A-Z0-9]*\.STRONG\.GPU", text)
    assert strong, "no acquire load of a ready flag"
    assert "ACQBULK" in text
    head = text[:min(strong.start(), text.index("ACQBULK"))]
    assert not re.search(r"\bLDG\b|\bUTMALDG\b", head)
