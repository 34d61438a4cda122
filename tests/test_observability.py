"""Every spine selection is observable on the "gdn_prefill" logger (docs/DESIGN.md §2, §5).

- a requested spine that a guard rejects: WARNING naming the guard, then GdnSpineError
  (prefill, and explain / the torch op's trace-time check, which run the same guards);
- explain(): each rejected spine and its guard at DEBUG;
- prefill(spine="auto") falling back to scalar: DEBUG with the wgmma guard that rejected;
- GDN_PREFILL_LOG_CALLS=1: one INFO line per call with the spine that ran.
The explain / trace-time paths run on CPU; the prefill paths need a Hopper.
"""
from __future__ import annotations

import logging
import os
import subprocess
import sys

import pytest
import torch

import gdn_prefill
from gdn_prefill import _ext, errors

from test_guards import _split, _strided_k, valid

REASON = "k: token stride 260 is not a multiple of 8 elements; TMA needs 16-byte aligned rows"


def _records(caplog, level):
    return [r for r in caplog.records if r.name == "gdn_prefill" and r.levelno == level]


def _strided(device):
    return _split(_strided_k(valid(device), 130 * 2))


def test_explain_logs_each_rejected_spine_at_debug(caplog):
    args, state, kw = _strided("cpu")
    with caplog.at_level(logging.DEBUG, logger="gdn_prefill"):
        plan = gdn_prefill.explain(*args, state, **kw)
    assert plan["chosen"] == "scalar" and plan["spines"]["wgmma"] == REASON
    msgs = [r.getMessage() for r in _records(caplog, logging.DEBUG)]
    assert f"gdn_prefill: explain: spine wgmma rejected: {REASON}" in msgs, msgs
    assert not any("spine scalar rejected" in m for m in msgs)
    assert not _records(caplog, logging.WARNING)


def test_explain_requested_spine_rejected_warns_with_the_guard(caplog):
    args, state, kw = _strided("cpu")
    with caplog.at_level(logging.WARNING, logger="gdn_prefill"):
        with pytest.raises(errors.GdnSpineError, match="token stride 260"):
            gdn_prefill.explain(*args, state, spine="wgmma", **kw)
    msgs = [r.getMessage() for r in _records(caplog, logging.WARNING)]
    assert msgs == [f"gdn_prefill: spine 'wgmma' cannot run: {REASON}"], msgs


def test_valid_problem_logs_no_rejection(caplog):
    args, state, kw = _split(valid("cpu"))
    with caplog.at_level(logging.DEBUG, logger="gdn_prefill"):
        plan = gdn_prefill.explain(*args, state, **kw)
    if all(v == "runs" for v in plan["spines"].values()):
        assert not [r for r in caplog.records if r.name == "gdn_prefill" and "rejected" in r.getMessage()]
    assert not _records(caplog, logging.WARNING)


def test_trace_time_rejection_is_logged(caplog):
    """The torch op's fake implementation (what torch.compile traces with) warns like prefill."""
    import gdn_prefill.ops as ops
    from torch._subclasses.fake_tensor import FakeTensorMode

    args, state, kw = _strided("cpu")
    mode = FakeTensorMode()
    fargs = [mode.from_tensor(x) for x in args]
    fstate = mode.from_tensor(state)
    fkw = {k: (mode.from_tensor(x) if isinstance(x, torch.Tensor) else x) for k, x in kw.items()}
    with caplog.at_level(logging.WARNING, logger="gdn_prefill"):
        with pytest.raises(errors.GdnSpineError):
            with mode:
                ops.prefill_op(*fargs, fstate, spine="wgmma", **fkw)
    assert [r.getMessage() for r in _records(caplog, logging.WARNING)] == [
        f"gdn_prefill: spine 'wgmma' cannot run: {REASON}"]


def test_log_calls_env_switch(tmp_path):
    """GDN_PREFILL_LOG_CALLS is read once at import; "0" and "" leave it off."""
    code = "import gdn_prefill._ext as e; print(e._SUMMARY)"
    for value, expect in (("1", "True"), ("0", "False"), ("", "False")):
        env = dict(os.environ, GDN_PREFILL_LOG_CALLS=value)
        # an empty cwd: `python -c` puts the cwd first on sys.path, and a source checkout there
        # (without the built extension) would shadow the installed package
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True,
                             cwd=tmp_path)
        assert out.stdout.strip() == expect, (value, out.stdout, out.stderr)


# ----------------------------------------------------------------------------- GPU
@pytest.mark.gpu
def test_gpu_requested_spine_rejected_warns_and_writes_nothing(caplog):
    args, state, kw = _strided("cuda")
    out_before = args[5].clone()
    with caplog.at_level(logging.WARNING, logger="gdn_prefill"):
        with pytest.raises(errors.GdnSpineError, match="token stride 260"):
            gdn_prefill.prefill(*args, state, spine="wgmma", **kw)
    torch.cuda.synchronize()
    assert [r.getMessage() for r in _records(caplog, logging.WARNING)] == [
        f"gdn_prefill: spine 'wgmma' cannot run: {REASON}"]
    assert torch.equal(args[5].view(torch.int16), out_before.view(torch.int16))


@pytest.mark.gpu
def test_gpu_auto_fallback_says_why(caplog):
    args, state, kw = _strided("cuda")
    with caplog.at_level(logging.DEBUG, logger="gdn_prefill"):
        ran = gdn_prefill.prefill(*args, state, **kw)
    assert ran == "scalar"
    msgs = [r.getMessage() for r in _records(caplog, logging.DEBUG)]
    assert f"gdn_prefill: spine=auto ran scalar; wgmma rejected: {REASON}" in msgs, msgs


@pytest.mark.gpu
def test_gpu_log_calls_summary(caplog, monkeypatch):
    monkeypatch.setattr(_ext, "_SUMMARY", True)
    args, state, kw = _split(valid("cuda"))
    with caplog.at_level(logging.INFO, logger="gdn_prefill"):
        ran = gdn_prefill.prefill(*args, state, **kw)
    msgs = [r.getMessage() for r in _records(caplog, logging.INFO)]
    assert any(m.startswith(f"gdn_prefill: spine={ran} T=96 N=2 Hk=2 Hv=4 state=kv") for m in msgs), msgs
