"""Test configuration: `gpu` tests run only where a Hopper (sm_90) GPU is visible."""
from __future__ import annotations

import pytest


def hopper_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available() and torch.cuda.get_device_capability(0)[0] == 9


def offset_view(x):
    """x's values in a view one element into a larger buffer: its data pointer is aligned to the
    element only (2 bytes past a 16-byte boundary for bf16)."""
    import torch
    buf = torch.zeros(x.numel() + 1, dtype=x.dtype, device=x.device)
    view = buf[1:].view(x.shape)
    view.copy_(x)
    return view


def explain_recorder(calls: list):
    """A stand-in for prefill() that records each call's (args, kw) in `calls` and runs it through
    explain() instead (CPU tensors, nothing launched): the doors' CPU tests check what they pass."""
    import gdn_prefill

    def prefill(*args, **kw):
        calls.append((args, kw))
        return gdn_prefill.explain(*args, **kw)
    return prefill


@pytest.fixture
def repo_script():
    """load(relpath) -> a script of the repository (benchmarks/, tools/) imported as a module, so a
    test can call its functions without running its main."""
    import importlib.util
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[1]

    def load(relpath: str):
        path = root / relpath
        spec = importlib.util.spec_from_file_location(path.stem, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    return load


def pytest_collection_modifyitems(config, items):
    if hopper_available():
        return
    skip = pytest.mark.skip(reason="needs a Hopper (sm_90) GPU; none is visible")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def pytest_sessionfinish(session, exitstatus):
    """With GDN_TEST_REPORT=path, write the error table the GPU tests recorded (JSON)."""
    import json
    import os
    import sys

    path = os.environ.get("GDN_TEST_REPORT")
    mod = sys.modules.get("test_gpu_prefill") or sys.modules.get("tests.test_gpu_prefill")
    if path and mod is not None and mod.REPORT:
        with open(path, "w") as f:
            json.dump(mod.REPORT, f, indent=1)
