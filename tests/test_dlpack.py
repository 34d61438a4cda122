"""prefill() reads its tensors through torch's DLPack exchange table (C, no Python attribute
calls) when torch exports one, else through Python attributes.  Both readings must give the
launch glue the same data pointer, shape, strides, dtype and device for every tensor form the
entry point accepts (strided views, size-1 dims with odd strides, broadcast dims, transposes),
and the device / workspace rules must hold on either path."""
from __future__ import annotations

import pytest
import torch

import gdn_prefill
from gdn_prefill import _ext, errors

HAS_TABLE = hasattr(torch.Tensor, "__dlpack_c_exchange_api__")


@pytest.fixture
def dlpack_path():
    """Run the test on the DLPack path, then restore it (the attribute path is a test hook)."""
    yield _ext._use_dlpack(True)
    _ext._use_dlpack(True)


def _forms(device):
    packed = torch.randn(6, 2 * 4 * 128 + 8, device=device).to(torch.bfloat16)
    return {
        "contiguous_bf16": torch.randn(5, 4, 128, device=device).to(torch.bfloat16),
        "packed_view": packed[:, 8:8 + 4 * 128].view(6, 4, 128),
        "head_slice": torch.randn(5, 8, 128, device=device).to(torch.bfloat16)[:, 2:6],
        "size1_odd_stride": torch.empty(1, 5, 128, device=device).as_strided((1, 5, 128), (7777, 128, 1)),
        "broadcast": torch.randn(1, 128, device=device).expand(6, 128),
        "transposed_gate": torch.randn(4, 7, device=device).t(),
        "interleaved_g_beta": torch.randn(9, 2 * 4, device=device)[:, 4:],
        "fp16": torch.randn(3, 2, device=device).half(),
        "fp8_e4m3fn": torch.randn(3, 2, device=device).to(torch.float8_e4m3fn),
        "fp8_e5m2_unsupported": torch.randn(3, 2, device=device).to(torch.float8_e5m2),
        "int32": torch.arange(5, dtype=torch.int32, device=device),
        "uint8": torch.empty(64, dtype=torch.uint8, device=device),
        "float64_unsupported": torch.randn(3, device=device, dtype=torch.float64),
        "state_pool": torch.randn(3, 2, 128, 128, device=device),
        "requires_grad": torch.randn(3, 4, device=device, requires_grad=True),
        "parameter_subclass": torch.nn.Parameter(torch.randn(4, device=device)),
    }


def _both(x):
    _ext._use_dlpack(True)
    fast = _ext._tensor_view(x)
    _ext._use_dlpack(False)
    slow = _ext._tensor_view(x)
    _ext._use_dlpack(True)
    return fast, slow


@pytest.mark.skipif(not HAS_TABLE, reason=f"torch {torch.__version__} exports no DLPack exchange table")
def test_table_found(dlpack_path):
    assert dlpack_path is True


@pytest.mark.parametrize("name", list(_forms("cpu")))
def test_dlpack_and_attribute_reads_agree_cpu(name, dlpack_path):
    x = _forms("cpu")[name]
    fast, slow = _both(x)
    assert fast == slow
    data, shape, stride, _, device = fast
    assert (data, shape, stride, device) == (x.data_ptr(), tuple(x.shape), x.stride(), -2)


def test_dtype_codes(dlpack_path):
    f = _forms("cpu")
    codes = {name: _ext._tensor_view(f[name])[3] for name in
             ("contiguous_bf16", "fp16", "transposed_gate", "int32", "uint8", "float64_unsupported", "fp8_e4m3fn",
              "fp8_e5m2_unsupported")}
    # GDN_DTYPE_BF16 / F16 / F32 / I32 / F8E4M3 / U8 (the workspace, a mask), 0 for anything else
    assert codes == {"contiguous_bf16": 1, "fp16": 2, "transposed_gate": 3, "int32": 4, "uint8": 6,
                     "float64_unsupported": 0, "fp8_e4m3fn": 5, "fp8_e5m2_unsupported": 0}


def test_meta_tensors_read_through_attributes(dlpack_path):
    """DLPack cannot describe meta tensors (explain(check_device=False) accepts them): the
    attribute path reads them, with the same shape and strides."""
    x = torch.empty(8, 4, 128, device="meta", dtype=torch.bfloat16)[:, 1:3]
    _, shape, stride, dtype, device = _ext._tensor_view(x)
    assert (shape, stride, dtype, device) == ((8, 2, 128), (512, 128, 1), 1, -2)


@pytest.mark.parametrize("bad", [torch.tensor(1.0), torch.zeros(1, 1, 1, 1, 1)], ids=["0d", "5d"])
def test_rank_rule_names_the_argument(bad, dlpack_path):
    for on in (True, False):
        _ext._use_dlpack(on)
        with pytest.raises(errors.GdnShapeError, match="x: must have 1 to 4 dims"):
            _ext._tensor_view(bad)


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(_forms("cpu")))
def test_dlpack_and_attribute_reads_agree_cuda(name, dlpack_path):
    x = _forms("cuda")[name]
    fast, slow = _both(x)
    assert fast == slow
    assert fast[0] == x.data_ptr() and fast[4] == x.device.index


@pytest.mark.gpu
def test_current_stream_both_paths(dlpack_path):
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        for on in (True, False):
            _ext._use_dlpack(on)
            assert _ext._current_raw_stream(torch.cuda.current_device()) == s.cuda_stream
    _ext._use_dlpack(True)
    assert _ext._current_raw_stream(torch.cuda.current_device()) == torch.cuda.current_stream().cuda_stream


def _small(device="cuda"):
    from gdn_prefill import reference as ref
    inp = ref.make_inputs([64, 40], 2, 4, seed=3, device=device, state="dense", l2norm_inputs=True)
    args = (inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], torch.zeros_like(inp["v"]), inp["state"].clone())
    return inp, args


@pytest.mark.gpu
def test_prefill_same_result_both_paths_on_a_side_stream(dlpack_path):
    """The DLPack path launches on the caller's current stream and computes what the attribute
    path computes (bitwise: same kernels, same inputs)."""
    inp, args = _small()
    results = []
    for on in (True, False):
        _ext._use_dlpack(on)
        out, state = torch.zeros_like(inp["v"]), inp["state"].clone()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            gdn_prefill.prefill(*args[:5], out, state, cu_seqlens=inp["cu_seqlens"])
        torch.cuda.current_stream().wait_stream(s)
        torch.cuda.synchronize()
        results.append((out, state))
    assert torch.equal(results[0][0], results[1][0]) and torch.equal(results[0][1], results[1][1])


@pytest.mark.gpu
@pytest.mark.parametrize("on", [True, False], ids=["dlpack", "attributes"])
def test_workspace_rules(on, dlpack_path):
    _ext._use_dlpack(on)
    inp, args = _small()
    need = gdn_prefill.workspace_bytes(104, 2, 4)
    out, state = args[5], args[6]
    for bad, rule in ((torch.empty(need // 4 + 1, dtype=torch.float32, device="cuda"), "contiguous uint8"),
                      (torch.empty(2 * need, dtype=torch.uint8, device="cuda")[::2], "contiguous uint8"),
                      (torch.empty(need, dtype=torch.uint8), "workspace: must be a CUDA tensor")):
        with pytest.raises((errors.GdnArgumentError, errors.GdnDeviceError), match=rule):
            gdn_prefill.prefill(*args, cu_seqlens=inp["cu_seqlens"], workspace=bad)
    assert torch.equal(out, torch.zeros_like(out)) and torch.equal(state, inp["state"])
    # a contiguous 2-D uint8 workspace is accepted (is_contiguous(), numel() bytes)
    ws = torch.empty(2, (need + 1) // 2, dtype=torch.uint8, device="cuda")
    gdn_prefill.prefill(*args, cu_seqlens=inp["cu_seqlens"], workspace=ws)
