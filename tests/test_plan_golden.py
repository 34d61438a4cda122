"""The planner cannot drift silently: explain() and the planning hooks over a sweep of problems
(tests/plan_golden.py: batch sizes, lengths, head counts, max_seqlen, state_indices, checkpoints,
initial_state, both layouts, fp32 / bf16 / fp16 / fp8 pools, forced spines and plans, the overlap plan)
must match the committed record, tests/golden/plan_golden.json.  A deliberate change of a rule
rewrites the record (python tests/plan_golden.py --write) in the same commit, so the diff shows
every call whose plan it changes.  CPU / meta tensors only."""
from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import plan_golden  # noqa: E402


def _diff(want, got, path="", out=None, limit=20):
    out = [] if out is None else out
    if len(out) >= limit:
        return out
    if isinstance(want, dict) and isinstance(got, dict):
        for key in sorted(set(want) | set(got)):
            if key not in got or key not in want:
                out.append(f"{path}/{key}: {'missing' if key not in got else 'new'}")
            else:
                _diff(want[key], got[key], f"{path}/{key}", out, limit)
    elif want != got:
        out.append(f"{path}: {want!r} -> {got!r}")
    return out


def test_plan_matches_the_golden_record():
    with open(plan_golden.GOLDEN) as f:
        want = json.load(f)
    got = json.loads(json.dumps(plan_golden.record(), sort_keys=True))
    diff = _diff(want, got)
    assert not diff, "the planner's record changed (python tests/plan_golden.py --write if deliberate):\n" + \
        "\n".join(diff)
