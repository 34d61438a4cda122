"""The CPU-testable pieces of two benchmark scripts (issue 55): bench_many_seqs.py's state floor
column, and bench_fla_layout.py's inputs (the layouts it times, with equal values, and the copies
the FLA layer makes of each)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from gdn_prefill import fla

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_state_floor_is_the_states_read_and_written_at_the_copy_rate(repo_script):
    mod = repo_script("benchmarks/bench_many_seqs.py")
    assert mod.state_bytes(1, 1) == 128 * 128 * 4
    assert mod.state_bytes(1024, 4) == 1024 * 4 * 65536
    # 1K sequences x 4 heads: 256 MiB of states, read and written (512 MiB of traffic) at 4.3 TB/s
    assert mod.state_floor_us(1024, 4, 4.3) == pytest.approx(2 * 268435456 / 4.3e12 * 1e6)
    assert mod.state_floor_us(1024, 4, 4.3) == pytest.approx(124.85, abs=0.01)
    assert mod.state_floor_us(2048, 4, 4.3) == pytest.approx(2 * mod.state_floor_us(1024, 4, 4.3))


def test_state_floor_column_in_the_table(repo_script):
    mod = repo_script("benchmarks/bench_many_seqs.py")
    rows = [dict(spine="wgmma", N=1024, T=4096, us=210.0, copy_tbps=4.3, state_floor_us=124.8),
            dict(spine="wgmma: spine alone", N=131072, T=524288, us=900.0, copy_tbps=4.2, state_floor_us=15978.4)]
    columns, lines = mod.table_lines(rows)
    assert columns[-1] == "state floor us" and len(columns) == len(lines[0])
    assert lines[0][-1] == "124.8" and lines[1][-1] == "15,978.4" and lines[1][1] == "131,072"


def test_layout_script_inputs(repo_script):
    """The three layouts hold the same values; the layer reads the contiguous and projection ones
    in place and copies the conv layout's q, k and v (each last dim has stride T)."""
    mod = repo_script("benchmarks/bench_fla_layout.py")
    made = {lay: mod.make_inputs(1, 100, 2, 4, lay, device="cpu") for lay in mod.LAYOUTS}
    for lay, a in made.items():
        copies = fla.explain_copies(**a)
        assert set(copies) == ({"q", "k", "v"} if lay == "conv" else set()), (lay, copies)
        for n in ("q", "k", "v", "g", "beta"):
            assert torch.equal(a[n], made["contiguous"][n]), (lay, n)
    assert made["conv"]["q"].stride(-1) == 100 and not made["projection"]["q"].is_contiguous()
    assert all(made["contiguous"][n].is_contiguous() for n in ("q", "k", "v"))
    with pytest.raises(ValueError, match="layout 'nhwc'"):
        mod.make_inputs(1, 8, 1, 2, "nhwc", device="cpu")


def test_layout_script_without_gpu():
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is visible: the script would time it")
    run = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "bench_fla_layout.py")],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "no Hopper GPU" in run.stdout, run.stdout + run.stderr
    run = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "bench_fla_layout.py"), "--heads", "3/4"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "Hv must be a positive multiple of Hk" in run.stderr, run.stderr
