"""batch_invariant=True on the planner, through explain() on meta tensors (no GPU): the segmented plan
never runs (the serial family instead, and why), the single plan keeps its rule (its kernel then takes
its fp32 inverse: explain()["plan"]["batch_invariant"], what the kernels read), and a malformed flag is
refused by name.  tests/test_gpu_batch_invariant.py shows the bits on a GPU."""
from __future__ import annotations

import pytest
import torch

import gdn_prefill
from gdn_prefill.errors import GdnTypeError


def problem(lens, hk, hv, max_seqlen=True, **kw):
    T, n = sum(lens), len(lens)
    q = torch.empty(T, hk, 128, dtype=torch.bfloat16, device="meta")
    v = torch.empty(T, hv, 128, dtype=torch.bfloat16, device="meta")
    g = torch.empty(T, hv, device="meta")
    st = torch.empty(2 * n + 1, hv, 128, 128, device="meta")
    return dict(args=(q, torch.empty_like(q), v, g, torch.empty_like(g), torch.empty_like(v), st),
                kw=dict(cu_seqlens=torch.empty(n + 1, dtype=torch.int32, device="meta"),
                        state_indices=torch.empty(n, dtype=torch.int32, device="meta"),
                        max_seqlen=max(lens) if max_seqlen else None, check_device=False, **kw))


# (lengths, Hk, Hv, the plan the rules choose): one of each plan the rules pick by the batch's shape
CASES = [
    ([512] * 16, 16, 32, "single"),
    ([4096] * 8, 16, 64, "single"),
    ([32768], 2, 8, "segmented"),
    ([3000, 20000], 4, 8, "segmented"),
    ([2048] + [512] * 31, 16, 32, "single"),
    ([3000] * 4, 2, 4, "overlap"),
]


@pytest.mark.parametrize("lens, hk, hv, default", CASES)
def test_invariant_plan_is_single_or_the_serial_family(lens, hk, hv, default):
    c = problem(lens, hk, hv)
    d = gdn_prefill.explain(*c["args"], **c["kw"])["plan"]
    assert d["name"] == default and d["batch_invariant"] is False
    e = gdn_prefill.explain(*c["args"], batch_invariant=True, **c["kw"])
    assert e["plan"]["batch_invariant"] is True
    assert "segments" not in e["plan"]
    if default == "single":
        assert e["plan"]["name"] == "single", e["plan"]
        assert [k["name"].split("_")[0] for k in e["kernels"]] == ["single"]
        assert "batch_invariant=True: its inverse in fp32" in e["plan"]["why"], e["plan"]
    else:
        assert e["plan"]["name"] in ("serial", "overlap"), e["plan"]     # overlap: the serial plan's arithmetic
        assert e["plan"]["why"].startswith("batch_invariant=True"), e["plan"]
        assert "segmented plan" in e["plan"]["why"], e["plan"]
        assert [k["name"].split("_")[0] for k in e["kernels"]] == ["recompute", "spine"]
    # the workspace a caller sizes by workspace_bytes() still fits
    T, n = sum(lens), len(lens)
    assert e["workspace_bytes"] <= gdn_prefill.workspace_bytes(T, n, hv)


def test_invariant_keeps_the_unfused_plan_where_fused_plans_do_not_run():
    """The scalar spine runs the unfused plan with or without the flag: its arithmetic is a
    sequence's own whatever the batch."""
    c = problem([3000, 200], 4, 8, spine="scalar")
    e = gdn_prefill.explain(*c["args"], batch_invariant=True, **c["kw"])
    assert e["plan"]["name"] == "unfused" and e["chosen"] == "scalar"


@pytest.mark.parametrize("bad", ["yes", 2, None, 0.5])
def test_malformed_flag_is_refused_by_name(bad):
    c = problem([300], 2, 4)
    with pytest.raises(GdnTypeError, match="batch_invariant"):
        gdn_prefill.explain(*c["args"], batch_invariant=bad, **c["kw"])


def test_environment_makes_every_call_invariant():
    """GDN_PREFILL_BATCH_INVARIANT=1 (read at import): the call sites that cannot pass the flag
    (FlashInfer's signature, transformers) plan as with it, and the kernels read it (the single
    plan's fp32 inverse); the hooks' forced plans stay forced."""
    import os
    import subprocess
    import sys
    code = (
        "import torch, gdn_prefill\n"
        "from gdn_prefill import _ext\n"
        "import test_batch_invariant as t\n"
        "c = t.problem([32768], 2, 8)\n"
        "e = gdn_prefill.explain(*c['args'], **c['kw'])['plan']\n"
        "print(e['name'], '(GDN_PREFILL_BATCH_INVARIANT=1)' in e['why'])\n"
        "c = t.problem([512] * 16, 16, 32)\n"
        "e = gdn_prefill.explain(*c['args'], **c['kw'])['plan']\n"
        "print(e['name'], e['batch_invariant'])\n"
        "kw = {k: v for k, v in c['kw'].items() if k != 'check_device'}\n"
        "print(_ext._builds(*c['args'], fused=2, **kw)[0].startswith('single_prefill'))\n")
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, GDN_PREFILL_BATCH_INVARIANT="1",
               PYTHONPATH=os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=here)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["overlap", "True", "single", "True", "True"], out.stdout
