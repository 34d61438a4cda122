"""The README's API block runs as written: on the CPU it must compile; on a Hopper GPU (`gpu`) it
runs in a fresh namespace, every call of it, and its outputs are finite."""
from __future__ import annotations

import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def api_block() -> str:
    text = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    m = re.search(r"^## API\n\n```python\n(.*?)^```", text, re.S | re.M)
    assert m, "README.md: no python block under '## API'"
    return m.group(1)


def test_block_compiles():
    compile(api_block(), "README.md:API", "exec")


@pytest.mark.gpu
def test_block_runs_on_a_hopper_gpu(capsys):
    import torch
    ns: dict = {}
    exec(compile(api_block(), "README.md:API", "exec"), ns)
    torch.cuda.synchronize()
    assert ns["spine"] == "wgmma"
    assert "why" in capsys.readouterr().out
    for name in ("out", "o", "final", "pool"):
        assert torch.isfinite(ns[name].float()).all(), name
