"""Proof that costs no GPU time: what the shipped sm_90a cubins contain.

The wgmma spine must be built from warpgroup MMA (HGMMA) fed by TMA (UTMALDG); the
scalar spine must not use tensor cores at all; no kernel may spill to local memory.
"""
from __future__ import annotations

import re

import pytest

from gdn_prefill import _manifest, sass
from gdn_prefill._abi import CONSTANTS as ABI

VARIANTS = [v["variant"] for v in _manifest.load()["variants"]]

needs_nvdisasm = pytest.mark.skipif(sass.nvdisasm() is None,
                                    reason="nvdisasm not installed (pip install nvidia-cuda-nvdisasm)")


def counts(variant: str) -> dict[str, int]:
    (cubin,) = _manifest.cubins(variant)
    return sass.opcode_counts(sass.disassemble(cubin))


def test_every_stage_and_spine_is_built():
    for name in ("chunk_index", "recompute_wu_bf16_betaf32", "recompute_wu_bf16_betabf16",
                 "recompute_wu_bf16_betaf32_a16", "recompute_wu_bf16_betabf16_a16", "spine_scalar_kv",
                 "spine_scalar_vk", "spine_wgmma_kv", "spine_wgmma_vk", "spine_wgmma_wg2_kv", "spine_wgmma_wg2_vk",
                 "fwd_o_bf16", "fwd_o_bf16_a16", "recompute_wu_bf16_betaf32_a16_pqk",
                 "recompute_wu_bf16_betabf16_a16_pqk", "spine_la_o_kv", "spine_la_o_vk",
                 "spine_wgmma_o_wg2_kv", "spine_wgmma_o_wg2_vk"):
        assert name in VARIANTS


@pytest.mark.parametrize("variant", VARIANTS)
def test_cubin_is_sm90_and_does_not_spill(variant):
    (cubin,) = _manifest.cubins(variant)
    assert sass.elf_arch(cubin) == 90
    (res,) = sass.resources(cubin)
    assert res["registers"] and res["registers"] <= 255
    assert res["stack_frame"] == 0, f"{variant}: {res['stack_frame']}-byte stack frame"


@needs_nvdisasm
@pytest.mark.parametrize("variant", VARIANTS)
def test_no_local_memory_traffic(variant):
    c = counts(variant)
    assert c["LDL"] == 0 and c["STL"] == 0, c


WGMMA_SPINES = [v for v in VARIANTS if v.startswith("spine_wgmma_")]
LOOKAHEAD_SPINES = [v for v in VARIANTS if v.startswith("spine_la_")]


@needs_nvdisasm
@pytest.mark.parametrize("variant", WGMMA_SPINES + LOOKAHEAD_SPINES)
def test_wgmma_spine_uses_tensor_cores_and_tma(variant):
    """HGMMA fed by TMA loads; h and vnew (fused builds: the output) leave by TMA stores; U
    comes in by ldmatrix."""
    c = counts(variant)
    assert c["HGMMA"] > 0 and c["UTMALDG"] > 0 and c["UTMASTG"] > 0 and c["LDSM"] > 0, c


@needs_nvdisasm
@pytest.mark.parametrize("variant", WGMMA_SPINES)
def test_wgmma_spine_waits_only_where_written(variant):
    """Two MMA waits per chunk and none injected by ptxas (it adds a WARPGROUP.DEPBAR, or
    serialises every wgmma, when accumulator registers are touched while a wgmma is in flight).
    The fused builds' first wait leaves Q S in flight (LE 1) while Vnew is computed."""
    (cubin,) = _manifest.cubins(variant)
    waits = re.findall(r"WARPGROUP\.DEPBAR\.LE gsb0, (0x[0-9a-f]+)", sass.disassemble(cubin))
    assert waits == (["0x1", "0x0"] if "_o_" in variant else ["0x0", "0x0"]), waits


@needs_nvdisasm
@pytest.mark.parametrize("layout", ["kv", "vk"])
@pytest.mark.parametrize("wg", ["wg2_"])
def test_fused_output_build_adds_the_output_mmas_and_tiles(layout, wg):
    """spine_wgmma_o*: per chunk and warpgroup two more MMAs (Q S: 8 k-steps, P Vnew: 4) than the
    spine alone, two more TMA tiles per stage (q, pqk) and one more bf16 tile per warpgroup
    (Vnew as the B operand of P Vnew)."""
    base, fused = f"spine_wgmma_{wg}{layout}", f"spine_wgmma_o_{wg}{layout}"
    cb, cf = counts(base), counts(fused)
    assert cf["HGMMA"] - cb["HGMMA"] == 8 + 4, (cb["HGMMA"], cf["HGMMA"])
    b, f = _manifest.variant(base), _manifest.variant(fused)
    chunk, dk, vb = ABI["GDN_CHUNK"], ABI["GDN_HEAD_DIM_K"], ABI["GDN_WGMMA_SPINE_VBLOCK"]
    nwg = b["threads"] // 128
    assert f["smem_bytes"] - b["smem_bytes"] == 2 * (2 * (chunk * dk + chunk * chunk) + nwg * chunk * vb)
    assert (f["threads"], f["cluster"]) == (b["threads"], b["cluster"])


@pytest.mark.parametrize("layout", ["kv", "vk"])
def test_wgmma_spine_builds_by_warpgroups(layout):
    """One kernel compiled per warpgroup count: 128 * WG threads; a second warpgroup adds
    exactly its own bf16 tiles (U per TMA stage, bf16(S), P, bf16(Vnew)), W/K are shared."""
    one, two = _manifest.variant(f"spine_wgmma_{layout}"), _manifest.variant(f"spine_wgmma_wg2_{layout}")
    assert (one["threads"], two["threads"]) == (128, 256)
    chunk, dk, vb = ABI["GDN_CHUNK"], ABI["GDN_HEAD_DIM_K"], ABI["GDN_WGMMA_SPINE_VBLOCK"]
    per_wg = 2 * (2 * chunk * vb + dk * vb + chunk * vb + chunk * vb)   # 2-stage U ring, S, P, Vnew
    assert two["smem_bytes"] - one["smem_bytes"] == per_wg
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
@pytest.mark.parametrize("layout", ["kv", "vk"])
def test_only_the_throughput_build_multicasts(layout):
    """The 2-warpgroup build loads W/K with cluster multicast (each CTA half, both receive it);
    the 1-warpgroup latency build has no cluster and no multicast copy."""
    def multicast_loads(variant):
        (cubin,) = _manifest.cubins(variant)
        return len(re.findall(r"\bUTMALDG\.[0-9]D\.MULTICAST\b", sass.disassemble(cubin)))
    for wg2, latency in ((f"spine_wgmma_wg2_{layout}", f"spine_wgmma_{layout}"),
                         (f"spine_wgmma_o_wg2_{layout}", f"spine_la_o_{layout}")):
        assert multicast_loads(wg2) > 0 and _manifest.variant(wg2)["cluster"] == 2
        assert multicast_loads(latency) == 0 and _manifest.variant(latency)["cluster"] == 1


@needs_nvdisasm
@pytest.mark.parametrize("layout", ["kv", "vk"])
def test_lookahead_spine_splits_the_chain(layout):
    """spine_la_o: per chunk the chain's W S (8 k-steps) and E P (4, its A operand E from
    registers), the next chunk's E = W K^T (8 k-steps of N = 64) and the state's K^T P, Q S and
    P Vnew (8 + 8 + 4); step -1 adds W_0 S_0 and E_0.  The handoffs between the two warpgroups
    are named barriers (BAR.ARV by the producer), and all loads come from TMA (no LDGSTS)."""
    v = f"spine_la_o_{layout}"
    text = sass.disassemble(_manifest.cubins(v)[0])
    c = counts(v)
    assert c["HGMMA"] == (8 + 8) + (8 + 4 + 8) + (8 + 8 + 4), c["HGMMA"]
    assert len(re.findall(r"HGMMA\.64x32x16\.F32\.BF16 R\d+, R\d+, gdesc", text)) == 4       # E P
    assert len(re.findall(r"HGMMA\.64x64x16\.F32\.BF16", text)) == 16                        # E
    assert len(re.findall(r"\bBAR\.ARV\b", text)) >= 3 and c["LDGSTS"] == 0
    assert _manifest.variant(v)["threads"] == 288
