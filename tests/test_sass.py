"""Proof that costs no GPU time: what the shipped sm_90a cubins contain.

The wgmma spine must be built from warpgroup MMA (HGMMA) fed by TMA (UTMALDG); the
scalar spine must not use tensor cores at all; no kernel may spill to local memory.
"""
from __future__ import annotations

import pytest

from gdn_prefill import _manifest, sass

VARIANTS = [v["variant"] for v in _manifest.load()["variants"]]

needs_nvdisasm = pytest.mark.skipif(sass.nvdisasm() is None,
                                    reason="nvdisasm not installed (pip install nvidia-cuda-nvdisasm)")


def counts(variant: str) -> dict[str, int]:
    (cubin,) = _manifest.cubins(variant)
    return sass.opcode_counts(sass.disassemble(cubin))


def test_every_stage_and_spine_is_built():
    for name in ("chunk_index", "recompute_wu_bf16_betaf32", "recompute_wu_bf16_betabf16", "spine_scalar_kv",
                 "spine_scalar_vk", "spine_wgmma_kv", "spine_wgmma_vk", "fwd_o_bf16"):
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


@needs_nvdisasm
@pytest.mark.parametrize("variant", ["spine_wgmma_kv", "spine_wgmma_vk"])
def test_wgmma_spine_uses_tensor_cores_and_tma(variant):
    c = counts(variant)
    assert c["HGMMA"] > 0 and c["UTMALDG"] > 0, c


@needs_nvdisasm
@pytest.mark.parametrize("variant", ["spine_scalar_kv", "spine_scalar_vk"])
def test_scalar_spine_has_no_tensor_core_instructions(variant):
    c = counts(variant)
    assert c["HGMMA"] == 0 and c["HMMA"] == 0 and c["FFMA"] > 0, c
