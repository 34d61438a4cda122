"""Scratch: the single plan's kernel alone, for compute-sanitizer (the fused part of
tests/test_gpu_sanitizer.py's case, plus a bf16 beta pool and a 16/32 sequence that reuses every
gate stage and ring slot).  python lab/next/san_fused.py"""
import torch, gdn_prefill
from gdn_prefill import _ext
from gdn_prefill import reference as ref
for lens, hk, hv, mk, l2 in (([2100, 70], 2, 4, dict(state="dense", l2norm_inputs=True), False),
                             ([1, 63, 64, 65, 0, 130], 2, 4, dict(state="pool", pad_every=3, l2norm_inputs=True), True),
                             ([300, 3], 16, 32, dict(state="pool", beta_dtype=torch.bfloat16), True)):
    inp = ref.make_inputs(lens, hk, hv, seed=5, device="cuda", **mk)
    T, N = sum(lens), len(lens)
    ws = torch.empty(gdn_prefill.workspace_bytes(T, N, hv), dtype=torch.uint8, device="cuda")
    _ext._launch_stages(("fused",), inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"],
                        torch.empty(inp["v"].shape, dtype=torch.bfloat16, device="cuda"), inp["state"].clone(),
                        cu_seqlens=inp["cu_seqlens"], state_indices=inp["state_indices"], spine="wgmma",
                        workspace=ws, fused=2, use_qk_l2norm=l2)
torch.cuda.synchronize()
print("case done")
