"""The CPU-testable pieces of the issue 55 benchmark scripts: bench_fla_layout.py's inputs (the
layouts it times, with equal values, and the copies the FLA layer makes of each)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from gdn_prefill import fla

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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
