"""The package is typed: _ext.pyi matches the extension, py.typed ships, and mypy both accepts
the typed usage in tests/typing_usage.py (--strict) and rejects misuse line by line.

The signature check runs everywhere; the mypy checks need mypy (CI installs it) and skip
without it.
"""
from __future__ import annotations

import ast
import inspect
import os
import re
import subprocess
import sys
import textwrap

import pytest

import gdn_prefill
from gdn_prefill import _ext

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PKG = os.path.dirname(os.path.abspath(gdn_prefill.__file__))
STUB = os.path.join(PKG, "_ext.pyi")

# the typed surface checked with --strict (bench/, reference.py and the build-time modules
# are research / tooling code and not part of it)
STRICT_FILES = ["tests/typing_usage.py", "gdn_prefill/__init__.py", "gdn_prefill/_ext.pyi", "gdn_prefill/ops.py",
                "gdn_prefill/fla.py", "gdn_prefill/errors.py", "gdn_prefill/_abi.py", "gdn_prefill/_manifest.py"]


def _stub_functions():
    tree = ast.parse(open(STUB).read())
    return {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}


def test_py_typed_and_stub_ship_in_the_package():
    assert os.path.isfile(os.path.join(PKG, "py.typed"))
    assert os.path.isfile(STUB)


def test_stub_signatures_match_the_extension():
    """Every public function of _ext has a stub with the same parameters, kinds and defaults."""
    stubs = _stub_functions()
    public = {n for n in dir(_ext) if not n.startswith("_") and inspect.isroutine(getattr(_ext, n))}
    assert public == set(stubs), f"runtime-only: {public - set(stubs)}, stub-only: {set(stubs) - public}"
    for name, node in stubs.items():
        runtime = inspect.signature(getattr(_ext, name))
        a = node.args
        stub_params = [(p.arg, inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in a.posonlyargs + a.args]
        stub_params += [(p.arg, inspect.Parameter.KEYWORD_ONLY) for p in a.kwonlyargs]
        assert [(p.name, p.kind) for p in runtime.parameters.values()] == stub_params, name
        positional_defaults = [None] * (len(a.args) - len(a.defaults)) + list(a.defaults)
        stub_defaults = [ast.literal_eval(d) if d is not None else inspect.Parameter.empty
                         for d in positional_defaults + list(a.kw_defaults)]
        assert [p.default for p in runtime.parameters.values()] == stub_defaults, name


def _mypy(*args, cwd=ROOT):
    pytest.importorskip("mypy")
    return subprocess.run([sys.executable, "-m", "mypy", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600)


def test_stubtest_agrees_with_the_extension(tmp_path):
    """mypy's stubtest: names, signatures, defaults against annotations, module constants (~35 s:
    stubtest always analyses torch from scratch)."""
    pytest.importorskip("mypy")
    # stubtest runs non-incrementally with its own options; writing its results to the shared
    # .mypy_cache would invalidate the cache of the --strict runs (torch re-analysed, ~30 s)
    # run from the folder that holds the imported gdn_prefill (site-packages, or the source tree of
    # an editable install, which mypy cannot see through setuptools' import hook; elsewhere stubtest
    # would find no stub and pass vacuously): that stub is checked against that extension
    # A folder holding only a link to that package: site-packages itself also holds modules
    # mypy refuses to analyse as user code (typing_extensions.py "shadows library module").
    config = tmp_path / "mypy.ini"
    config.write_text(f"[mypy]\ncache_dir = {os.devnull}\n")
    root = tmp_path / "root"
    root.mkdir()
    (root / "gdn_prefill").symlink_to(PKG, target_is_directory=True)
    r = subprocess.run([sys.executable, "-m", "mypy.stubtest", "--mypy-config-file", str(config),
                        "gdn_prefill._ext"], cwd=root, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr


def test_mypy_strict_accepts_typed_usage():
    r = _mypy("--strict", *STRICT_FILES)
    assert r.returncode == 0, r.stdout + r.stderr


MISUSE = textwrap.dedent('''\
    from torch import Tensor
    import gdn_prefill
    import gdn_prefill.ops


    def misuse(q: Tensor, out: Tensor) -> None:
        ran: int = gdn_prefill.prefill(q, q, q, q, q, out)  # E: returns the spine name (str)
        gdn_prefill.prefill(q, q, q, q, q)  # E: `out` is required
        gdn_prefill.prefill(q, q, q, q, q, out, spine_name="auto")  # E: no such keyword
        gdn_prefill.prefill(q, q, q, q, q, out, None, None)  # E: cu_seqlens is keyword-only
        plan = gdn_prefill.explain(q, q, q, q, q, out)
        plan["chosn"]  # E: not a key of the plan
        gdn_prefill.workspace_bytes("96", 2, 4)  # E: T is an int
        gdn_prefill.ops.prefill_op(q, q, q, q, q, out, use_qk_l2norm="yes")  # E: a bool
        gdn_prefill.chunk_gated_delta_rule(q, q, q, q, q, scale="x")  # E: a float
        gdn_prefill.compiled_variants(1)  # E: takes no arguments
        n: str = gdn_prefill.explain(q, q, q, q, q, out)["workspace_bytes"]  # E: an int
''')


def test_mypy_rejects_misuse_line_by_line(tmp_path):
    """Each marked line is an error for mypy: the stubs are seen (an Any-typed module would pass)."""
    path = tmp_path / "misuse.py"
    path.write_text(MISUSE)
    r = _mypy("--strict", "--no-error-summary", "--show-error-codes", str(path))
    flagged = {int(m.group(1)) for m in re.finditer(r"misuse\.py:(\d+): error", r.stdout)}
    expected = {i for i, line in enumerate(MISUSE.splitlines(), 1) if "# E:" in line}
    assert expected - flagged == set(), f"not flagged: {sorted(expected - flagged)}\n{r.stdout}{r.stderr}"
    assert flagged - expected == set(), f"unexpected errors:\n{r.stdout}"
