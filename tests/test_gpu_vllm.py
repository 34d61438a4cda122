"""The vLLM plugin's two calls on a Hopper GPU, driven exactly as vLLM 0.33's GDN layer drives them,
against the fp64 oracle (gdn_prefill.reference) and, where fla-core is installed, against FLA.

vLLM is not needed: the tensors vLLM hands over are built here by hand, each helper citing the
vLLM 0.33.0 lines it mirrors (vllm/model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py =
"qwen", vllm/v1/attention/backends/gdn_attn.py = "gdn_attn", vllm/model_executor/layers/mamba/
abstract.py = "abstract"):

- the state pool: the layer's ssm_state, a [num_blocks, Hv, V, K] view into the hybrid KV cache's
  int8 pages, after the conv state (abstract 28-42): its slot stride is the page's; bytes outside
  the live slots' states (conv states, padding, other slots) must come back unchanged;
- the metadata: prefill_query_start_loc int32 [N + 1], prefill_state_indices int32 [N] (column 0
  of the block table; strided with speculative decoding on), prefill_has_initial_state bool [N]
  (context length > 0: a fresh sequence's slot holds stale values that must not be read)
  (gdn_attn 517-576);
- q, k, v [T, H, 128] bf16 contiguous, g log-decay and beta fp32 [T, Hv] from fused_post_conv_prep,
  q and k l2-normed there in fp32 for the op (qwen 1731-1742, apply_l2norm=True), raw for the layer
  replacement (apply_l2norm=False: the kernel normalises);
- the op route (qwen 1812-1872): gather the slots, zero the fresh ones, call the op with
  [1, T, H, D] keywords and use_qk_l2norm_in_kernel=False, scatter the final states back;
- the layer route (gdn_prefill.integrations.vllm's layer): prefill_pool() on the pool in place,
  writing the prefill rows of core_attn_out after the decode rows (qwen 1716-1723, 1874-1879).

Bound (bf16 operands, fp32 state inside): relative Frobenius error <= 1e-2 for the output and the
final states; a bf16 pool adds its rounding (reference.pool_rounding_bound).
"""
from __future__ import annotations

import pytest
import torch

from gdn_prefill import reference as ref
from gdn_prefill.integrations import vllm as gv

pytestmark = pytest.mark.gpu

BOUND = 1e-2
HK, HV, D = 2, 4, 128
BF = torch.bfloat16
CONV_BYTES = (2 * HK * D + HV * D) * 3 * 2     # the conv state: [conv_dim, kernel - 1] bf16, first in each page
PAD_BYTES = 4096                               # vLLM pads Mamba pages to the attention page size


def prep_l2norm(x: torch.Tensor) -> torch.Tensor:
    """fused_post_conv_prep's l2norm (fused_gdn_prefill_post_conv.py 84-99): fp32, x / sqrt(sum x^2
    + 1e-6), stored in bf16."""
    xf = x.float()
    return (xf * torch.rsqrt((xf * xf).sum(-1, keepdim=True) + 1e-6)).to(BF)


def vllm_batch(lens, *, seed, pool_dtype=torch.float32, fresh=lambda n: n % 3 == 1, spec_blocks=0,
               index_dtype=torch.int32, pad_tokens=0):
    """A prefill batch as vLLM's GDN layer holds it when it reaches the prefill kernel.

    lens: the prefill sequences' query lengths; sequence n is fresh (has_initial_state False: a
    first chunk) where fresh(n), its slot then full of stale values.  pad_tokens: rows
    of q, k, v, g, beta past cu_seqlens[-1] (vLLM's num_actual_tokens beyond the batch's tokens).
    spec_blocks: the block table's extra columns (speculative decoding), which make the slot
    column strided.  Returns a dict: q, k (raw conv output), qn, kn (prep-normed), v, g, beta,
    cu_seqlens, slots (the block table's column 0), mask, pages (the KV-cache pages) and ssm (the
    pool view into them)."""
    inp = ref.make_inputs(list(lens) + ([pad_tokens] if pad_tokens else []), HK, HV, seed=seed, device="cuda",
                          state="pool", state_layout="vk", extra_slots=3)
    N = len(lens)
    P = inp["state"].shape[0]
    esize = torch.tensor([], dtype=pool_dtype).element_size()
    nbytes = HV * D * D * esize
    gen = torch.Generator().manual_seed(seed + 1)
    pages = torch.randint(-128, 128, (P, CONV_BYTES + nbytes + PAD_BYTES), generator=gen, dtype=torch.int8).cuda()
    ssm = pages[:, CONV_BYTES:CONV_BYTES + nbytes].view(pool_dtype).view(P, HV, D, D)
    ssm.copy_(inp["state"].to(pool_dtype))
    slots = inp["state_indices"][:N].to(index_dtype)
    table = torch.stack([slots] + [torch.full_like(slots, P - 1)] * spec_blocks, dim=1)    # [N, 1 + spec]
    mask = torch.tensor([not fresh(n) for n in range(N)], device="cuda")
    return dict(q=inp["q"], k=inp["k"], qn=prep_l2norm(inp["q"]), kn=prep_l2norm(inp["k"]), v=inp["v"], g=inp["g"],
                beta=inp["beta"], cu_seqlens=inp["cu_seqlens"][:N + 1].to(index_dtype), slots=table[:, 0], mask=mask,
                pages=pages, ssm=ssm)


def oracle(b, *, normed):
    """The fp64 oracle on the batch: the pool with the fresh sequences' slots zeroed (their start,
    as vLLM's route makes it: qwen 1817), q and k prep-normed (normed) or normalised by the oracle."""
    pool = b["ssm"].double()
    pool[b["slots"].long()[~b["mask"]]] = 0.0
    q, k = (b["qn"], b["kn"]) if normed else (b["q"], b["k"])
    with torch.device("cuda"):
        return ref.chunked(q, k, b["v"], b["g"], b["beta"], cu_seqlens=b["cu_seqlens"], state=pool,
                           state_indices=b["slots"], state_layout="vk", use_qk_l2norm=not normed)


def check(name, b, out, o_ref, pool_ref, pages_before):
    """out's live rows against the oracle (and every other row untouched: NaN); the live slots'
    states against it; every other byte of the KV-cache pages as it was."""
    live_rows = ~o_ref.isnan()
    o = out.double()
    assert torch.isfinite(o[live_rows]).all(), f"{name}: unwritten or non-finite output rows"
    assert o[~live_rows].isnan().all(), f"{name}: rows outside the sequences were written"
    e_o = ref.rel_err(o, o_ref)
    assert e_o <= BOUND, f"{name}: output rel err {e_o:.3e}"
    live = b["slots"].long().unique()
    s = b["ssm"][live].double()
    want = pool_ref[live].to(s.device)
    bound = BOUND + (0.0 if b["ssm"].dtype == torch.float32 else ref.pool_rounding_bound(want, b["ssm"].dtype))
    e_s = ref.rel_err(s, want)
    assert e_s <= bound, f"{name}: state rel err {e_s:.3e} > {bound:.3e}"
    expect = pages_before.clone()
    expect[live, CONV_BYTES:CONV_BYTES + b["ssm"][0].numel() * b["ssm"].element_size()] = \
        b["pages"][live, CONV_BYTES:CONV_BYTES + b["ssm"][0].numel() * b["ssm"].element_size()]
    assert torch.equal(b["pages"], expect), f"{name}: bytes outside the live slots' states changed"
    return e_o, e_s


def op_route(b, *, normed=True):
    """vLLM's own route through the op (qwen 1812-1872): gather the slots (1816), zero the fresh
    ones (1817), call the op as at 1823-1836, scatter the final states in the pool's dtype (1872),
    copy the output into core_attn_out (1912).  Returns (core_attn_out, final_state, initial)."""
    idx = b["slots"]
    initial = b["ssm"][idx]
    initial[~b["mask"], ...] = 0
    before = initial.clone()
    q, k = (b["qn"], b["kn"]) if normed else (b["q"], b["k"])
    o, last = gv.chunk_gated_delta_rule(q=q[None], k=k[None], v=b["v"][None], g=b["g"][None], beta=b["beta"][None],
                                        initial_state=initial, output_final_state=True, cu_seqlens=b["cu_seqlens"],
                                        chunk_indices=None, chunk_offsets=None, use_qk_l2norm_in_kernel=not normed,
                                        aiter_prefill_metadata=None)
    b["ssm"][idx] = last.to(b["ssm"].dtype)
    core = torch.full((q.shape[0], HV, D), float("nan"), dtype=BF, device="cuda")
    live = torch.zeros(q.shape[0], dtype=torch.bool, device="cuda")
    live[:int(b["cu_seqlens"][-1])] = True
    core[live] = o[0][live]               # rows past cu_seqlens[-1] are the op's scratch: not compared
    torch.cuda.synchronize()
    assert torch.equal(initial, before), "the op changed its initial_state argument"
    assert o.shape == (1, q.shape[0], HV, D) and last.shape == (idx.shape[0], HV, D, D)
    return core, last, initial


LENS = [700, 64, 1, 3000, 129]     # long-tailed, a 1-token prefill (a resumed chunk), a fresh one


@pytest.mark.parametrize("pool_dtype", [torch.float32, torch.bfloat16], ids=["fp32_pool", "bf16_pool"])
def test_op_route_as_vllms_layer_calls_it(pool_dtype):
    """The op through vLLM's gather / zero / call / scatter: output and pool against the oracle;
    the final states come back in the pool's dtype (vLLM's .to() is then free); the op leaves its
    initial_state argument as it was."""
    b = vllm_batch(LENS, seed=1, pool_dtype=pool_dtype)
    o_ref, pool_ref = oracle(b, normed=True)
    before = b["pages"].clone()
    core, last, _ = op_route(b)
    assert last.dtype == pool_dtype
    check("op_route", b, core, o_ref, pool_ref, before)


def test_op_route_with_the_kernels_l2norm():
    """use_qk_l2norm_in_kernel=True (the flag vLLM's FlashInfer route honours with a separate
    l2norm kernel): raw q and k normalised in the kernel, against the oracle's normalisation."""
    b = vllm_batch([300, 1000], seed=2)
    o_ref, pool_ref = oracle(b, normed=False)
    before = b["pages"].clone()
    core, _, _ = op_route(b, normed=False)
    check("op_route_l2norm", b, core, o_ref, pool_ref, before)


def test_op_without_initial_state_writes_core_attn_out():
    """initial_state=None (every sequence from zero): with output_final_state=False the op returns
    (o, None) and o is the first T * Hv * V elements of core_attn_out, written in place (the rest
    untouched); with output_final_state=True the final states are fp32 [N, Hv, V, K] (FLA's)."""
    b = vllm_batch([200, 77], seed=3)
    T = b["v"].shape[0]
    with torch.device("cuda"):
        o_ref, s_ref = ref.chunked(b["qn"], b["kn"], b["v"], b["g"], b["beta"], cu_seqlens=b["cu_seqlens"],
                                   state_layout="vk")
    buf = torch.full((T + 5, HV, D), float("nan"), dtype=BF, device="cuda")
    args = dict(q=b["qn"][None], k=b["kn"][None], v=b["v"][None], g=b["g"][None], beta=b["beta"][None],
                initial_state=None, cu_seqlens=b["cu_seqlens"], use_qk_l2norm_in_kernel=False)
    o, final = gv.chunk_gated_delta_rule(**args, output_final_state=False, core_attn_out=buf)
    torch.cuda.synchronize()
    assert final is None and o.data_ptr() == buf.data_ptr() and buf[T:].isnan().all()
    assert ref.rel_err(o[0].double(), o_ref) <= BOUND
    o, final = gv.chunk_gated_delta_rule(**args, output_final_state=True)
    torch.cuda.synchronize()
    assert final.dtype == torch.float32 and final.shape == (2, HV, D, D)
    assert ref.rel_err(o[0].double(), o_ref) <= BOUND and ref.rel_err(final.double(), s_ref) <= BOUND


def test_op_warm_up_call():
    """The layer's warm-up (qwen 1350-1413, vLLM's profile run): 64 tokens, one sequence, a zero
    state of the pool's dtype [1, Hv, V, K] (bf16 by default: its ssm dtype is the model's), no
    in-kernel l2norm."""
    b = vllm_batch([64], seed=4, pool_dtype=BF)
    state = torch.zeros(1, HV, D, D, dtype=BF, device="cuda")
    o, final = gv.chunk_gated_delta_rule(q=b["qn"][None], k=b["kn"][None], v=b["v"][None], g=b["g"][None],
                                         beta=b["beta"][None], initial_state=state, output_final_state=True,
                                         cu_seqlens=torch.tensor([0, 64], dtype=torch.int32, device="cuda"),
                                         chunk_indices=None, chunk_offsets=None, use_qk_l2norm_in_kernel=False,
                                         aiter_prefill_metadata=None)
    torch.cuda.synchronize()
    with torch.device("cuda"):
        o_ref, s_ref = ref.chunked(b["qn"], b["kn"], b["v"], b["g"], b["beta"], state=state, state_layout="vk")
    assert final.dtype == BF and ref.rel_err(o[0].double(), o_ref) <= BOUND
    assert ref.rel_err(final.double(), s_ref) <= BOUND + ref.pool_rounding_bound(s_ref, BF)


@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64], ids=["int32_metadata", "int64_metadata"])
@pytest.mark.parametrize("spec_blocks", [0, 1], ids=["block_table_1col", "spec_decoding_2col"])
@pytest.mark.parametrize("pool_dtype", [torch.float32, torch.bfloat16], ids=["fp32_pool", "bf16_pool"])
def test_layer_route_updates_vllms_pool_in_place(pool_dtype, spec_blocks, index_dtype):
    """prefill_pool as the layer replacement calls it on a mixed batch: the paged pool itself, the
    block table's slot column (strided with speculative decoding), the bool mask, raw q and k
    (l2norm in the kernel), the output rows after 3 decode rows of core_attn_out, 5 padding token
    rows past the sequences, max_seqlen from the host.  Output and pool against the oracle; the
    decode rows, the padding rows and every page byte outside the live states untouched; the fresh
    sequences' stale slots not read (the oracle starts them from zero)."""
    b = vllm_batch(LENS, seed=5, pool_dtype=pool_dtype, spec_blocks=spec_blocks, index_dtype=index_dtype,
                   pad_tokens=5)
    o_ref, pool_ref = oracle(b, normed=False)
    before = b["pages"].clone()
    d, T = 3, b["v"].shape[0]
    core = torch.full((d + T, HV, D), float("nan"), dtype=BF, device="cuda")
    gv.prefill_pool(b["q"], b["k"], b["v"], b["g"], b["beta"], core[d:], b["ssm"], cu_seqlens=b["cu_seqlens"],
                    state_indices=b["slots"], has_initial_state=b["mask"], use_qk_l2norm=True, max_seqlen=max(LENS))
    torch.cuda.synchronize()
    assert core[:d].isnan().all(), "the decode rows were written"
    check("layer_route", b, core[d:], o_ref, pool_ref, before)


def test_layer_route_without_max_seqlen_and_all_fresh():
    """Every sequence fresh (a batch of first chunks: stale slots everywhere) and no max_seqlen
    (prefill()'s planner then keeps every sequence whole)."""
    b = vllm_batch([513, 1024, 40], seed=6, fresh=lambda n: True)
    assert not b["mask"].any()
    o_ref, pool_ref = oracle(b, normed=False)
    before = b["pages"].clone()
    out = torch.full((b["v"].shape[0], HV, D), float("nan"), dtype=BF, device="cuda")
    gv.prefill_pool(b["q"], b["k"], b["v"], b["g"], b["beta"], out, b["ssm"], cu_seqlens=b["cu_seqlens"],
                    state_indices=b["slots"], has_initial_state=b["mask"])
    torch.cuda.synchronize()
    check("layer_route_fresh", b, out, o_ref, pool_ref, before)


def test_zero_length_rows_as_vllm_pads_them():
    """Trailing zero-length sequences (requests padded into the batch: gdn_attn 379-385 drops them
    from the counts, not from the offsets), fresh (their context length is 0), each with a slot of
    its own: vLLM's route writes their final state, the initial one, zero, into the slot (gather,
    zero, scatter); the oracle says the same (a zero-length sequence's final state is its initial
    state), and so must the layer route."""
    b = vllm_batch([300, 200, 0, 0], seed=7, fresh=lambda n: n >= 1)
    o_ref, pool_ref = oracle(b, normed=False)
    before = b["pages"].clone()
    out = torch.full((b["v"].shape[0], HV, D), float("nan"), dtype=BF, device="cuda")
    gv.prefill_pool(b["q"], b["k"], b["v"], b["g"], b["beta"], out, b["ssm"], cu_seqlens=b["cu_seqlens"],
                    state_indices=b["slots"], has_initial_state=b["mask"], max_seqlen=300)
    torch.cuda.synchronize()
    check("zero_length_rows", b, out, o_ref, pool_ref, before)
    assert not b["ssm"][b["slots"][2:].long()].any()


def test_fla_comparison_when_available():
    """If fla-core is importable: the op route's errors against the oracle are no worse than FLA's
    on the same gathered initial states (FLA's [N, Hv, K, V] orientation, fp32), as
    tests/test_gpu_prefill.py compares them."""
    fla = pytest.importorskip("fla.ops.gated_delta_rule")
    b = vllm_batch([2048, 700, 1], seed=8)
    o_ref, pool_ref = oracle(b, normed=True)
    initial = b["ssm"][b["slots"]]
    initial[~b["mask"]] = 0
    o_fla, s_fla = fla.chunk_gated_delta_rule(b["qn"][None], b["kn"][None], b["v"][None], b["g"][None],
                                              b["beta"][None], initial_state=initial.transpose(-1, -2).contiguous(),
                                              output_final_state=True, cu_seqlens=b["cu_seqlens"].long())
    before = b["pages"].clone()
    core, _, _ = op_route(b)
    ours = check("vs_fla", b, core, o_ref, pool_ref, before)
    want = pool_ref[b["slots"].long()].to(s_fla.device)
    theirs = (ref.rel_err(o_fla[0].double(), o_ref), ref.rel_err(s_fla.transpose(-1, -2).double(), want))
    assert ours[0] <= max(theirs[0] * 1.1, 1e-3) and ours[1] <= max(theirs[1] * 1.1, 1e-3), (ours, theirs)
