"""compile_fi.py OUT: FlashInfer's SM90 GDN prefill kernel (flashinfer.gdn_kernels.delta_rule_dsl
.delta_rule_sm90) compiled on this machine for sm_90a, nothing launched: its cubin into OUT, for
SASS beside ours (fi_aux.sh sets up the package it imports).  The build an engine launches: bf16,
alpha and beta fp32, an fp32 state pool read and written through state indices."""
import os, sys
os.environ.setdefault("CUTE_DSL_ARCH", "sm_90a")
out = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "fi_cubin")
os.makedirs(out, exist_ok=True)
os.environ["CUTE_DSL_DUMP_DIR"] = out
import torch, cutlass, cutlass.cute as cute
from flashinfer.gdn_kernels.delta_rule_dsl import delta_rule_sm90 as m
N, Hq, Hk, Hv, D, T = 8, 16, 16, 32, 128, 8 * 4096
Hs = max(Hq, Hv)
q = torch.empty(T, Hq, D, dtype=torch.bfloat16); k = torch.empty(T, Hk, D, dtype=torch.bfloat16)
v = torch.empty(T, Hv, D, dtype=torch.bfloat16); o = torch.empty(T, Hv, D, dtype=torch.bfloat16)
alpha = torch.empty(T, Hs, dtype=torch.float32); beta = torch.empty(T, Hs, dtype=torch.float32)
pool = torch.empty(64, Hs, D, D, dtype=torch.float32)
idx = torch.zeros(N, dtype=torch.int32); cu = torch.zeros(N + 1, dtype=torch.int32)
kern = m._get_prefill_kernel(True, True, True, False, cutlass.BFloat16, initial_state_dtype=torch.float32,
                             state_dtype=torch.float32, checkpoint_state_dtype=torch.float32,
                             use_state_indices=True, cu_seqlens_dtype=cu.dtype, state_indices_dtype=idx.dtype,
                             checkpoint_cu_starts_dtype=None, state_inner_strides=tuple(pool.stride()[1:]),
                             init_state_inner_strides=tuple(pool.stride()[1:]))
q_tma = q.as_strided((T, D, Hq), (Hq * D, 1, D)); k_tma = k.as_strided((D, T, Hk), (1, Hk * D, D))
v_tma = v.as_strided((D, T, Hv), (1, Hv * D, D)); o_tma = o.as_strided((D, T, Hv), (1, Hv * D, D))
fd = cute.runtime.from_dlpack
def aligned(n, align=128):
    """n bytes at an address that is a multiple of align (the CPU allocator guarantees 64)."""
    raw = torch.empty(n + align, dtype=torch.uint8)
    off = (-raw.data_ptr()) % align
    return raw[off:off + n]
tm = aligned(132 * 128)
args = (fd(q_tma, assumed_align=16).mark_layout_dynamic(leading_dim=1),
        fd(k_tma, assumed_align=16).mark_layout_dynamic(leading_dim=0),
        fd(v_tma, assumed_align=16).mark_layout_dynamic(leading_dim=0),
        fd(o_tma, assumed_align=16).mark_layout_dynamic(leading_dim=0),
        fd(alpha.reshape(-1), assumed_align=16).mark_layout_dynamic(),
        fd(beta.reshape(-1), assumed_align=16).mark_layout_dynamic(),
        fd(pool, assumed_align=16).mark_layout_dynamic(),
        fd(pool, assumed_align=16).mark_layout_dynamic(),
        fd(idx, assumed_align=4).mark_layout_dynamic(),
        None, None,
        fd(tm, assumed_align=128).mark_layout_dynamic(),
        fd(cu, assumed_align=8).mark_layout_dynamic(),
        cutlass.Float32(D ** -0.5), cutlass.Int32(Hq), cutlass.Int32(Hk), cutlass.Int32(Hv), cutlass.Int32(Hs),
        cutlass.Int32(N), cutlass.Int32(1), cutlass.Int32(0), N * Hs, cute.runtime.make_fake_stream())
c = cute.compile(kern, *args, options="--keep-cubin")
print("compiled", sorted(os.listdir(out)))
