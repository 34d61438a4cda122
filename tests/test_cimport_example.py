"""Other extensions call gdn-prefill's C entry point: build tests/cimport_example at test time
against the *installed* package (its .pxd files and include/gdn headers) and run it.

CPU: validation errors reach the C caller as a status code and a message naming the argument,
the message respects the caller's buffer size, and a valid problem gets as far as the device
check.  GPU: a real call through the cimported gdn_prefill_raw matches gdn_prefill.prefill
bitwise, and a rejected call writes nothing.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import sys

import pytest

import gdn_prefill

from conftest import hopper_available

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "cimport_example")
PKG_DIR = os.path.dirname(os.path.abspath(gdn_prefill.__file__))


def _cuda_include() -> str | None:
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home and os.path.isfile(os.path.join(home, "include", "cuda_runtime.h")):
            return os.path.join(home, "include")
    return None


def _build(ext_name: str, source: str, tmp, cython: bool):
    """Compile one extension into `tmp` with setuptools and import it from there."""
    from setuptools import Distribution, Extension

    cuda_inc = _cuda_include()
    if cuda_inc is None:
        pytest.skip("no CUDA toolkit headers (set CUDA_HOME): cuda_runtime.h is needed to compile a caller")
    for need in (os.path.join(PKG_DIR, "_ext.pxd"), os.path.join(PKG_DIR, "gdn_abi.pxd"),
                 os.path.join(PKG_DIR, "include", "gdn", "gdn_abi.h")):
        assert os.path.isfile(need), f"the installed package lacks {need}"
    src = os.path.join(str(tmp), os.path.basename(source))
    shutil.copy(source, src)
    ext = Extension(ext_name, [src], include_dirs=[os.path.join(PKG_DIR, "include"), cuda_inc],
                    language="c++" if src.endswith(".cpp") else None)
    exts = [ext]
    if cython:
        from Cython.Build import cythonize

        # the package's parent directory: where `gdn_prefill/_ext.pxd` resolves
        exts = cythonize(exts, include_path=[os.path.dirname(PKG_DIR)], language_level=3, quiet=True,
                         build_dir=os.path.join(str(tmp), "cython"), force=True)
    dist = Distribution({"name": ext_name, "ext_modules": exts, "script_name": "setup.py"})
    cmd = dist.get_command_obj("build_ext")
    cmd.build_lib = os.path.join(str(tmp), "lib")
    cmd.build_temp = os.path.join(str(tmp), "tmp")
    cmd.ensure_finalized()
    cmd.run()
    (path,) = cmd.get_outputs()
    spec = importlib.util.spec_from_file_location(ext_name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    sys.modules[ext_name] = mod
    return mod


def test_builds_against_the_expected_install():
    """tools/check_wheel.sh sets GDN_TEST_EXPECT_PKG_DIR to the unpacked wheel: these tests must
    then compile against that copy of the .pxd files and headers, not a source tree's."""
    expect = os.environ.get("GDN_TEST_EXPECT_PKG_DIR")
    if expect:
        assert PKG_DIR.startswith(os.path.abspath(expect)), (PKG_DIR, expect)


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    return _build("gdn_cimport_example", os.path.join(EXAMPLE, "gdn_cimport_example.pyx"),
                  tmp_path_factory.mktemp("cimport_example"), cython=True)


@pytest.fixture(scope="module")
def cpp_example(tmp_path_factory):
    return _build("gdn_capi_example", os.path.join(EXAMPLE, "gdn_capi_example.cpp"),
                  tmp_path_factory.mktemp("capi_example"), cython=False)


# ----------------------------------------------------------------------------- CPU
T, HK, HV, D = 96, 2, 4, 128
_BASE, _GAP = 1 << 40, 1 << 30   # placeholder device addresses, 256-byte aligned, far apart


def _compact(shape):
    strides, s = [], 1
    for n in reversed(shape):
        strides.insert(0, s)
        s *= n
    return tuple(strides)


def _problem(ex, **changes):
    """Descriptors (ptr, shape, strides, dtype) of a valid 2-sequence problem; nothing is dereferenced
    unless validation passes and a Hopper is present (the tests below never get that far)."""
    bf, f32, i32 = ex.DTYPES["bfloat16"], ex.DTYPES["float32"], ex.DTYPES["int32"]
    shapes = dict(q=((T, HK, D), bf), k=((T, HK, D), bf), v=((T, HV, D), bf), g=((T, HV), f32),
                  beta=((T, HV), f32), out=((T, HV, D), bf), state=((2, HV, D, D), f32),
                  cu_seqlens=((3,), i32))
    desc = {name: (_BASE + i * _GAP, shape, _compact(shape), dt) for i, (name, (shape, dt)) in enumerate(shapes.items())}
    for name, change in changes.items():
        ptr, shape, strides, dt = desc[name]
        desc[name] = (change.get("ptr", ptr), change.get("shape", shape), change.get("strides", strides),
                      change.get("dtype", dt))
    return desc


def test_cimport_bad_dtype_reaches_the_caller(example):
    rc, msg, chosen = example.run(**_problem(example, q={"dtype": example.DTYPES["float32"]}))
    assert rc == example.STATUS["GDN_ERR_DTYPE"]
    assert msg == "q: dtype must be bfloat16, got float32"
    assert chosen == 0


def test_cimport_unknown_dtype_code(example):
    rc, msg, _ = example.run(**_problem(example, beta={"dtype": 77}))
    assert rc == example.STATUS["GDN_ERR_DTYPE"]
    assert msg == "beta: dtype must be float32 or bfloat16, got an unsupported dtype"


@pytest.mark.parametrize("change, status, fragment", [
    ({"k": {"shape": (T - 1, HK, D), "strides": _compact((T - 1, HK, D))}}, "GDN_ERR_SHAPE", "k: dim 0 (tokens"),
    ({"v": {"strides": (HV * 2 * D, 2 * D, 2)}}, "GDN_ERR_LAYOUT", "v: last dim has stride 2"),
    ({"state": {"ptr": _BASE + 256}}, "GDN_ERR_ALIAS", "state: overlaps the memory of q"),
    ({"state": {"ptr": _BASE + 6 * _GAP + 4}}, "GDN_ERR_LAYOUT", "state: data pointer is not 16-byte aligned"),
    ({"cu_seqlens": {"shape": (1,), "strides": (1,)}}, "GDN_ERR_SHAPE", "cu_seqlens: must hold N+1 >= 2"),
], ids=["shape", "layout", "alias", "alignment", "cu_seqlens"])
def test_cimport_guards_reach_the_caller(example, change, status, fragment):
    rc, msg, _ = example.run(**_problem(example, **change))
    assert rc == example.STATUS[status], msg
    assert fragment in msg


def test_cimport_bad_option_codes(example):
    rc, msg, _ = example.run(**_problem(example), state_layout=5)
    assert (rc, msg) == (example.STATUS["GDN_ERR_ARGUMENT"], "state_layout: must be 'kv' or 'vk'")
    rc, msg, _ = example.run(**_problem(example), scale=float("nan"))
    assert (rc, msg) == (example.STATUS["GDN_ERR_ARGUMENT"], "scale: must be finite")


def test_cimport_message_respects_msg_cap(example):
    """A short buffer gets a truncated, NUL-terminated message and nothing past msg_cap."""
    bad = _problem(example, q={"dtype": example.DTYPES["float32"]})
    rc, raw, _ = example.run(**bad, msg_cap=8, raw_message=True)
    assert rc == example.STATUS["GDN_ERR_DTYPE"]
    assert raw[:8] == b"q: dtyp\0"
    assert raw[8:] == b"\x7f" * (512 - 8)
    rc, raw, _ = example.run(**bad, msg_cap=0, raw_message=True)
    assert rc == example.STATUS["GDN_ERR_DTYPE"] and raw == b"\x7f" * 512


@pytest.mark.skipif(hopper_available(), reason="on a Hopper the placeholder addresses would be launched on")
def test_cimport_valid_problem_reaches_the_device_check(example):
    """Every guard passes; without a Hopper the call stops at the device check, launching nothing."""
    rc, msg, _ = example.run(**_problem(example))
    assert rc == example.STATUS["GDN_ERR_ARGUMENT"], msg
    assert msg.startswith("device: the current CUDA device is not compute capability 9.x")


def test_cimport_workspace_bytes_agrees(example):
    assert example.workspace_bytes(T, 2, HV) == gdn_prefill.workspace_bytes(T, 2, HV)
    assert example.workspace_bytes(70000, 7, 32) == gdn_prefill.workspace_bytes(70000, 7, 32)


def test_cpp_caller_gets_the_validation_error(cpp_example):
    """A C++ extension without Cython reaches gdn_prefill_raw through the C-API capsule."""
    rc, msg = cpp_example.describe_q_dtype(3)  # GDN_DTYPE_F32
    assert rc == 1 and msg == "q: dtype must be bfloat16, got float32"  # GDN_ERR_DTYPE
    if not hopper_available():
        rc, msg = cpp_example.describe_q_dtype(1)  # bf16: valid, stops at the device check
        assert rc == 6 and msg.startswith("device: "), msg


# ----------------------------------------------------------------------------- GPU
def _desc(ex, x):
    import torch

    codes = {torch.bfloat16: ex.DTYPES["bfloat16"], torch.float16: ex.DTYPES["float16"],
             torch.float32: ex.DTYPES["float32"], torch.int32: ex.DTYPES["int32"]}
    return None if x is None else (x.data_ptr(), tuple(x.shape), tuple(x.stride()), codes[x.dtype])


def _inputs(seed, pool):
    import torch
    from test_guards import valid

    torch.manual_seed(seed)
    a = valid("cuda", pool=pool)
    for n in ("q", "k", "v"):
        a[n] = torch.randn_like(a[n])
    a["g"] = -torch.rand_like(a["g"])
    a["state"] = torch.randn_like(a["state"]) * 0.1
    return a


@pytest.mark.gpu
@pytest.mark.parametrize("spine", ["auto", "scalar", "wgmma"])
@pytest.mark.parametrize("pool", [False, True], ids=["per_seq", "pool_vk"])
def test_gpu_cimport_matches_prefill_bitwise(example, spine, pool):
    import torch

    a = _inputs(11, pool)
    layout = "vk" if pool else "kv"
    if not any(v == f"spine_{spine}_{layout}" for v in gdn_prefill.compiled_variants()) and spine != "auto":
        pytest.skip(f"spine {spine} ({layout}) not compiled")
    out_ref = torch.full_like(a["out"], float("nan"))
    state_ref = a["state"].clone()
    ran = gdn_prefill.prefill(a["q"], a["k"], a["v"], a["g"], a["beta"], out_ref, state_ref,
                              cu_seqlens=a["cu_seqlens"], state_indices=a["state_indices"], state_layout=layout,
                              spine=spine)
    out = torch.full_like(a["out"], float("nan"))
    state = a["state"].clone()
    T_, N, Hv = a["q"].shape[0], a["cu_seqlens"].shape[0] - 1, a["v"].shape[1]
    ws = torch.empty(example.workspace_bytes(T_, N, Hv), dtype=torch.uint8, device="cuda")
    stream = torch.cuda.current_stream()
    rc, msg, chosen = example.run(
        _desc(example, a["q"]), _desc(example, a["k"]), _desc(example, a["v"]), _desc(example, a["g"]),
        _desc(example, a["beta"]), _desc(example, out), _desc(example, state), _desc(example, a["cu_seqlens"]),
        _desc(example, a["state_indices"]), spine=example.SPINES[spine], state_layout=example.STATE_LAYOUTS[layout],
        workspace=ws.data_ptr(), workspace_bytes=ws.numel(), stream=stream.cuda_stream)
    torch.cuda.synchronize()
    assert (rc, msg) == (0, "")
    assert chosen == example.SPINES[ran]
    assert torch.equal(out.view(torch.int16), out_ref.view(torch.int16))
    assert torch.equal(state.view(torch.int32), state_ref.view(torch.int32))


@pytest.mark.gpu
def test_gpu_cimport_rejection_writes_nothing(example):
    import torch

    a = _inputs(12, False)
    out = torch.full_like(a["out"], float("nan"))
    state = a["state"].clone()
    ws = torch.empty(1 << 20, dtype=torch.uint8, device="cuda")
    rc, msg, _ = example.run(
        _desc(example, a["q"]), _desc(example, a["k"]), _desc(example, a["v"]), _desc(example, a["g"]),
        _desc(example, a["beta"]), _desc(example, out), _desc(example, state), _desc(example, a["cu_seqlens"]),
        workspace=ws.data_ptr(), workspace_bytes=16, stream=torch.cuda.current_stream().cuda_stream)
    torch.cuda.synchronize()
    assert rc == example.STATUS["GDN_ERR_ARGUMENT"] and msg.startswith("workspace: 16 bytes given"), msg
    assert out.isnan().all()
    assert torch.equal(state, a["state"])
