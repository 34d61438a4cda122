"""The fused kernel (cute_kernels/fused.py), its objects (CPU).

The GPU rows are the suite's plan "fused" (test_gpu_prefill, test_numerics_hard, the sanitizer
case); here, what every fused build is made of: each warpgroup's setmaxnreg at the class's split
(I/O, role, chains), the MMAs of a chunk (the role's 16 k-steps of K K^T and Q K^T, its 18 TF32
merge mma.syncs; the chains' 44 - 16 = 28 k-steps of 64 x 64 and 4 of 64 x 128), the
shared-memory staging (bf16(S^T) and the role's P by stmatrix, the output transposed), the
chains' wgmma waits (each waited: at 176 registers ptxas serialises them), and no local memory.
"""
from __future__ import annotations

import collections
import re

import pytest

import gdn_prefill
from gdn_prefill import _manifest, sass

needs_nvdisasm = pytest.mark.skipif(sass.nvdisasm() is None,
                                    reason="nvdisasm not installed (pip install nvidia-cuda-nvdisasm)")


def _ops(cubin):
    return collections.Counter(re.sub(r"^@!?U?P\w+\s+", "", x["text"]).split()[0] for x in sass.instructions(cubin))


@needs_nvdisasm
@pytest.mark.parametrize("build", ["fused_prefill_betabf16_kv", "fused_prefill_betaf32_vk_sbf16"])
def test_fused_objects(build):
    if build not in gdn_prefill.compiled_variants():
        pytest.skip(f"{build} not in this build")
    # cute_kernels.fused.FusedPrefill's split (the installed package has no DSL to import it from)
    chain, role, io = 176, 128, 32
    (cubin,) = _manifest.cubins(build)
    ins = sass.instructions(cubin)
    # setmaxnreg: the I/O warpgroup's and the role's decrease, then the chains' increase
    regs = [int(x["text"].split()[-1], 16) for x in ins if "USETMAXREG" in x["text"]]
    assert regs == [io, role, chain], regs
    ops = _ops(cubin)
    assert ops["HGMMA.64x64x16.F32.BF16"] == 16 + 28 and ops["HGMMA.64x128x16.F32.BF16"] == 4, ops
    assert ops["HMMA.1688.F32.TF32"] == 18, ops
    # bf16(S^T) (8) and P (4) by stmatrix; the output (4 in the loop, 4 after it) transposed; V by ldmatrix
    assert ops["STSM.16.M88.4"] == 8 + 4 and ops["STSM.16.MT88.4"] == 4 + 4 and ops["LDSM.16.MT88.4"] == 4, ops
    waits = re.findall(r"WARPGROUP\.DEPBAR\.LE gsb0, (0x[0-9a-f]+)", sass.disassemble(cubin))
    # the role's products (one wait), then the chains' chunk, every wgmma waited
    assert set(waits) == {"0x0"} and len(waits) > 7, waits
    assert sass.resources(cubin)[0]["stack_frame"] == 0
