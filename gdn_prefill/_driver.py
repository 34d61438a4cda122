"""The CUDA driver this build needs, checked once when gdn_prefill._ext is imported.

The extension links CUDA 13's runtime statically and its kernels are CUDA 13 cubins (ELF ABI 8,
which no CUDA 12 driver loads), so the driver must support CUDA 13.0: cuDriverGetVersion >= 13000,
an R580 or newer driver (or CUDA 13's forward-compatibility libcuda, which reports 13000 or more).
An older driver is named in an ImportError when the extension is imported, never found by a
launch that fails.  A machine with no driver at all (libcuda.so.1 not loadable: a build host, CPU
CI) passes: the package imports there and explain() works on CPU tensors.

`require(version)` is the check itself (an int in, None or an exception out); `driver_version()`
reads the driver; importing this module runs both (_ext.pyx imports it first thing), so the
import raises on an old driver.  setup.py reads REQUIRED_VERSION from this file's text, without
importing it.  docs/RELEASE.md says why CUDA 13 and what a CUDA 12 build would take.
"""
from __future__ import annotations

import ctypes
import os

REQUIRED_VERSION = 13000            # cuDriverGetVersion of the oldest driver the build runs on
REQUIRED = "13.0, R580 or newer"    # the same, as a person asks for a driver
# Test hook only: a cuDriverGetVersion value to use instead of the driver's (tests/test_release.py
# simulates an old driver with it); never set in a deployment.
TEST_HOOK = "GDN_PREFILL_TEST_DRIVER_VERSION"


class CudaDriverError(ImportError):
    """The CUDA driver is older than the one this build of gdn-prefill was compiled for."""


def version_text(version: int) -> str:
    """cuDriverGetVersion's integer as CUDA writes it: 12080 -> "12.8", 13000 -> "13.0"."""
    return f"{version // 1000}.{version % 1000 // 10}"


def require(version: int | None) -> None:
    """Raise CudaDriverError if `version` (cuDriverGetVersion's value) is older than this build
    needs; None (no driver found) passes."""
    if version is None or version >= REQUIRED_VERSION:
        return
    raise CudaDriverError(
        f"gdn_prefill: CUDA driver {version_text(version)} (cuDriverGetVersion {version}) is too old: "
        f"this build needs a driver for CUDA {REQUIRED} (it links the CUDA 13 runtime and its kernels are "
        f"CUDA 13 cubins). Update the NVIDIA driver, or install CUDA 13's forward-compatibility "
        f"package (cuda-compat) on a data-centre GPU.")


def driver_version() -> int | None:
    """The driver's cuDriverGetVersion (e.g. 13000), or None where no driver can be loaded or it
    does not answer.  Loads libcuda.so.1 only; initialises nothing (no cuInit)."""
    hook = os.environ.get(TEST_HOOK)
    if hook:
        return int(hook)
    try:
        libcuda = ctypes.CDLL("libcuda.so.1")
        get_version = libcuda.cuDriverGetVersion
    except (OSError, AttributeError):
        return None
    value = ctypes.c_int(0)
    if get_version(ctypes.byref(value)) != 0:
        return None
    return int(value.value)


def check() -> int | None:
    """Read the driver and require it: its version, or None without a driver."""
    version = driver_version()
    require(version)
    return version


# The check itself, once, when this module is first imported (by _ext.pyx's import line): a failed
# import is not cached, so every later import of the extension raises the same error.
DRIVER_VERSION = check()
