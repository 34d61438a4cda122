"""The rules the tree keeps (no GPU): the README and PERFORMANCE.md stay short, the lab notebook
stays in git history, code says why instead of citing device runs, and every result file the
docs cite is in the tree."""
from __future__ import annotations

import os
import re
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = ["README.md"] + [os.path.join("docs", f) for f in ("API.md", "DESIGN.md", "PERFORMANCE.md", "BENCHMARKS.md")]

CODE_SUFFIXES = (".py", ".pxi", ".pyx", ".pxd", ".h", ".sh", ".cu")
# a device run, a range of them, a session or a numbered build, cited by number (examples below);
# not "--runs 20", a command-line flag
RUN_NUMBER = re.compile(r"(?<![-\w])(?:runs? ?\d{1,3}(?:-\d+)?\b|sessions? ?\d{1,2}\b)", re.IGNORECASE)
BUILD_NUMBER = re.compile(r"(?<![-\w])r\d{3}\b")
# paths of the machine the library was built on (spelled in two pieces, so this file does not match)
FOREIGN_PATHS = ("../" + "shared", "/" + "work/")
# a result path cited as it stands in the tree; `git show REV:benchmarks/results/...` cites history
CITED_RESULT = re.compile(r"(?<![:\w/])benchmarks/results/[\w./-]*")


def _size(rel: str) -> int:
    return os.path.getsize(os.path.join(ROOT, rel))


def _tracked() -> list[str]:
    try:
        out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return out.splitlines()


def test_readme_at_most_12_kb():
    assert _size("README.md") <= 12 * 1024


def test_performance_md_at_most_40_kb():
    assert _size(os.path.join("docs", "PERFORMANCE.md")) <= 40 * 1024


def test_lab_notebook_is_not_in_the_tree():
    assert not os.path.exists(os.path.join(ROOT, "benchmarks", "NOTES.md"))


def test_code_cites_no_run_numbers():
    bad = []
    for rel in _tracked():
        if not rel.endswith(CODE_SUFFIXES):
            continue
        path = os.path.join(ROOT, rel)
        if not os.path.isfile(path):
            continue
        for n, line in enumerate(open(path, encoding="utf-8", errors="replace"), 1):
            for m in (*RUN_NUMBER.finditer(line), *BUILD_NUMBER.finditer(line)):
                bad.append(f"{rel}:{n}: {m.group(0)!r}")
    assert not bad, "say the reason or point to docs/ instead:\n" + "\n".join(bad)


def test_rules_catch_what_they_are_for():
    # the examples carry a "#" that is taken out here, so that this file holds none of them as such
    for text in ("(run# 142)", "runs# 165-168", "Run# 98", "run#142.sh", "session# 32", "the r#176 build"):
        text = text.replace("#", "")
        assert RUN_NUMBER.search(text) or BUILD_NUMBER.search(text), text
    for text in ("soak_streams.py --runs 20", "R189 the highest register", "spine_rs_o_dual", "runtime 2"):
        assert not RUN_NUMBER.search(text) and not BUILD_NUMBER.search(text), text
    cited = "see benchmarks/results/run#174/p4/ and `git show b05c696:benchmarks/results/run#138/soak.md`"
    assert CITED_RESULT.findall(cited.replace("#", "")) == ["benchmarks/results/run" + "174/p4/"]


def test_cited_result_files_exist():
    missing = []
    for rel in DOCS:
        for m in CITED_RESULT.finditer(open(os.path.join(ROOT, rel), encoding="utf-8").read()):
            path = m.group(0).rstrip(".")
            if not os.path.exists(os.path.join(ROOT, path)):
                missing.append(f"{rel}: {path}")
    assert not missing, "cite removed results by commit (git show b05c696:...):\n" + "\n".join(missing)


def test_no_paths_of_a_build_machine():
    """The tree is the product: nothing may point outside it (a sibling checkout, a workspace)."""
    bad = []
    for rel in _tracked():
        path = os.path.join(ROOT, rel)
        if rel.endswith(".png") or not os.path.isfile(path):
            continue
        text = open(path, encoding="utf-8", errors="replace").read()
        bad += [f"{rel}: {s}" for s in FOREIGN_PATHS if s in text]
    assert not bad, "\n".join(bad)
