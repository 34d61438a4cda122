"""A release that installs anywhere (docs/RELEASE.md): the CUDA driver check at import, and the
installed distribution's metadata (license, the torch extra).  No GPU needed: an old driver is
simulated through gdn_prefill._driver's test hook."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

import gdn_prefill
from gdn_prefill import _driver

# The error a CUDA 12.8 driver (R570) gets from `import gdn_prefill._ext`, word for word
# (docs/RELEASE.md cites it).
OLD_DRIVER_MESSAGE = (
    "gdn_prefill: CUDA driver 12.8 (cuDriverGetVersion 12080) is too old: this build needs a driver for "
    "CUDA 13.0, R580 or newer (it links the CUDA 13 runtime and its kernels are CUDA 13 cubins). "
    "Update the NVIDIA driver, or install CUDA 13's forward-compatibility package (cuda-compat) on a "
    "data-centre GPU.")


def test_version_text():
    assert [_driver.version_text(v) for v in (12080, 12090, 13000, 13020)] == ["12.8", "12.9", "13.0", "13.2"]


@pytest.mark.parametrize("version", [None, 13000, 13020, 14000])
def test_a_new_driver_or_none_passes(version):
    assert _driver.require(version) is None


@pytest.mark.parametrize("version", [12080, 12090, 11080])
def test_an_old_driver_is_named(version):
    with pytest.raises(_driver.CudaDriverError) as info:
        _driver.require(version)
    text = str(info.value)
    assert f"CUDA driver {_driver.version_text(version)} (cuDriverGetVersion {version})" in text
    assert "13.0, R580 or newer" in text
    assert isinstance(info.value, ImportError)


def test_the_simulated_old_driver_message():
    with pytest.raises(_driver.CudaDriverError) as info:
        _driver.require(12080)
    assert str(info.value) == OLD_DRIVER_MESSAGE


def test_no_driver_means_no_check(monkeypatch):
    """Without libcuda.so.1 (a build host, CPU CI) the reader gives None and the check passes."""
    def no_library(*args, **kwargs):
        raise OSError("libcuda.so.1: cannot open shared object file")
    monkeypatch.delenv(_driver.TEST_HOOK, raising=False)
    monkeypatch.setattr(_driver.ctypes, "CDLL", no_library)
    assert _driver.driver_version() is None
    assert _driver.check() is None


def test_the_real_reader_answers_an_int_or_none(monkeypatch):
    monkeypatch.delenv(_driver.TEST_HOOK, raising=False)
    version = _driver.driver_version()
    assert version is None or (isinstance(version, int) and version >= 10000)


def _fresh_driver_module():
    """A new copy of gdn_prefill._driver, imported again (the import runs the check)."""
    spec = importlib.util.spec_from_file_location("gdn_driver_fresh", _driver.__file__)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_importing_the_module_checks_the_driver(monkeypatch):
    monkeypatch.setenv(_driver.TEST_HOOK, "12080")
    with pytest.raises(ImportError, match=r"CUDA driver 12\.8 \(cuDriverGetVersion 12080\)"):
        _fresh_driver_module()
    monkeypatch.setenv(_driver.TEST_HOOK, "13000")
    assert _fresh_driver_module().DRIVER_VERSION == 13000


def _import_ext(version: str | None, tmp_path):
    """`import gdn_prefill._ext` in a fresh interpreter (the same gdn_prefill as this test's),
    with the driver's version simulated."""
    env = dict(os.environ)
    env.pop(_driver.TEST_HOOK, None)
    if version is not None:
        env[_driver.TEST_HOOK] = version
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(os.path.abspath(gdn_prefill.__file__)))
    code = "import gdn_prefill._ext as e; print(len(e.compiled_variants()))"
    return subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)


def test_importing_the_extension_on_an_old_driver_fails_with_the_message(tmp_path):
    pytest.importorskip("gdn_prefill._ext", reason="the extension is not built")
    old = _import_ext("12080", tmp_path)
    assert old.returncode != 0
    assert f"gdn_prefill._driver.CudaDriverError: {OLD_DRIVER_MESSAGE}" in old.stderr, old.stderr
    new = _import_ext("13000", tmp_path)
    assert new.returncode == 0 and int(new.stdout) > 0, new.stderr


def test_installed_metadata():
    """The installed wheel (CI installs the repaired one) declares its license and the torch extra
    and ships the license text; torch itself is not a dependency."""
    from importlib import metadata
    try:
        dist = metadata.distribution("gdn-prefill")
    except metadata.PackageNotFoundError:
        pytest.skip("gdn-prefill is not installed")
    meta = dist.metadata
    assert meta["License-Expression"] == "Apache-2.0"
    assert "torch" in (meta.get_all("Provides-Extra") or [])
    requires = dist.requires or []
    assert [r for r in requires if r.startswith("torch")] == ['torch>=2.4; extra == "torch"'], requires
    licenses = [f for f in (dist.files or []) if f.name == "LICENSE"]
    assert licenses and "Apache License" in licenses[0].read_text(), dist.files
