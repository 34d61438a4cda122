"""tools/wgmma_probe.py times what it names: its generated CUDA compiles for sm_90a without ptxas
serialising any wgmma, every timed group is a real HGMMA of the named shape (ptxas replaces a
wgmma whose result is dead by a 64x8x16 placeholder), and the chain kernels have spine_rs's
groups and waits.  CPU only (nvcc + nvdisasm); on a machine without a Hopper GPU the tool itself
says so and exits 0."""
from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys

import pytest

from gdn_prefill import sass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
spec = importlib.util.spec_from_file_location("wgmma_probe", os.path.join(ROOT, "tools", "wgmma_probe.py"))
probe = importlib.util.module_from_spec(spec)
spec.loader.exec_module(probe)

needs_tools = pytest.mark.skipif(shutil.which("nvcc") is None or sass.nvdisasm() is None,
                                 reason="needs nvcc and nvdisasm")


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    """{mangled kernel name: its SASS lines} of the probe's cubin."""
    out = str(tmp_path_factory.mktemp("probe") / "wgmma_probe.cubin")
    probe.compile_probe(out, cubin=True)          # raises on a serialised wgmma
    text = sass.disassemble(out)
    found = {}
    for name in re.findall(r"\.text\.(\S+):", text):
        body = text[text.index(f".text.{name}:"):]
        end = body.find(".text.", 10)
        found[name] = [line for line in (body[:end] if end > 0 else body).splitlines() if re.search(r"/\*[0-9a-f]{4}\*/", line)]
    return found


def _hgmma(lines):
    return [line for line in lines if "HGMMA" in line]


@needs_tools
def test_rate_kernels_run_the_named_shape(kernels):
    for n in probe.SHAPES:
        for a in ("rs", "ss"):
            for mode, k in probe.MODES:
                name = next(x for x in kernels if x.startswith(f"_Z{len(f'probe_{n}_{a}')}probe_{n}_{a}I")
                            and f"ILi{k}ELi{mode}E" in x)
                hg = _hgmma(kernels[name])
                assert hg and all(f"HGMMA.64x{n}x16.F32.BF16" in line for line in hg), (name, hg[:3])
                assert len(hg) % k == 0, (name, len(hg))


@needs_tools
def test_chain_kernels_have_the_spines_groups_and_waits(kernels):
    chains = {x: lines for x, lines in kernels.items() if x.startswith("_Z5chain")}
    assert len(chains) == len(probe.CHAINS)
    for name, lines in chains.items():
        old = "ILi1E" in name
        hg = _hgmma(lines)
        # G1 8, G4 4, G1b 4, G2 8 (N = 64), G3 4 (N = 128, B transposed): 28 per chunk, one loop body
        assert sum("64x64x16" in x for x in hg) == 24 and sum("64x128x16" in x and "tnspB" in x for x in hg) == 4, name
        assert not any("64x8x16" in x for x in hg), name          # no dropped group
        waits = [x.split("DEPBAR.LE")[1].split(",")[1].strip(" ;") for x in lines if "DEPBAR" in x]
        assert waits == (["0x0", "0x1", "0x1", "0x0"] if old else ["0x1", "0x1", "0x1", "0x1", "0x0"]), (name, waits)
        assert not any(" LDL" in x or " STL" in x for x in lines), name


def test_without_a_hopper_gpu_it_says_so():
    if shutil.which("nvidia-smi"):
        pytest.skip("a GPU driver is present")
    res = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "wgmma_probe.py")], capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 0 and "no Hopper GPU visible" in res.stdout, res.stdout + res.stderr


def test_every_row_the_probe_prints_parses():
    """The first device run of the probe lost its table: a chain label held a comma."""
    src = probe.source()
    fmts = re.findall(r'printf\("((?:rate|chain),[^"]*)\\n"', src)
    assert len(fmts) == 2, fmts
    names = [name for name, _, _ in probe.CHAINS]
    rows = ["rate,64,RS,1,rate,4,33.10,132.4", "rate,32,SS,2,group,1,60.00,120.0"]
    rows += [f"chain,{name},{work},{wgs},chunk,0,0,2000.0" for name in names for work in probe.WORK_LABELS
             for wgs in (1, 2)]
    table = probe._table(rows, "H200").splitlines()
    assert len(table) == 4 + len(rows) and all(line.startswith("| ") and line.count("|") == 10 for line in table[4:]), table
    assert all(label in src for label in probe.WORK_LABELS)
