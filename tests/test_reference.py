"""CPU tests of the fp64 oracle (gdn_prefill/reference.py).

The oracle is checked against itself (recurrence vs chunked algorithm, per-stage
identities of the workspace) and against things other than itself: literal values
computed by hand, closed forms (beta = 0), and head/normalisation equivalences.
Small head dims (16..64) keep the whole file fast; CHUNK stays 64.
"""
from __future__ import annotations

import math
import subprocess
import sys
import zlib

import pytest
import torch

from gdn_prefill import reference as ref
from gdn_prefill.reference import (CHUNK, chunked, chunked_intermediates, first_slot, make_inputs,
                                   recurrent, rel_err)

TOL = 1e-12
F64 = torch.float64  # hand cases: exact inputs (an fp32 log(1/2) would be off by 3e-9)


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    # the oracle runs many tiny ops: intra-op threads only add spin/sync overhead, which
    # becomes 10-50x when the 2 cores are shared with other jobs
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


MANY = [130, 1, 0, 64, 65, 3, 0, 17, 128, 2, 90, 5]      # 12 sequences, incl. 0 and 1


def _slots_of(inp):
    """Per sequence: the state slot it uses, or -1 (padding)."""
    N = inp["cu_seqlens"].numel() - 1
    idx = inp["state_indices"]
    return list(range(N)) if idx is None else idx.tolist()


# --------------------------------------------------------------------------------------
# hand-computed cases: the oracle against numbers worked out on paper
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("fn", [recurrent, chunked])
def test_hand_k1_v1(fn):
    # S0 = 1; t1: g=0, k=2, v=3, beta=1/2, q=1; t2: g=ln(1/2), k=1, v=-1, beta=1/4, q=2
    #   S1 = 1 + 2 * 1/2 * (3 - 1*2)            = 2      o1 = 2 * 1 = 2
    #   S2 = 1/2*2 + 1 * 1/4 * (-1 - 1/2*2*1)   = 1/2    o2 = 1/2 * 2 = 1
    q = torch.tensor([[[1.0]], [[2.0]]], dtype=F64)
    k = torch.tensor([[[2.0]], [[1.0]]], dtype=F64)
    v = torch.tensor([[[3.0]], [[-1.0]]], dtype=F64)
    g = torch.tensor([[0.0], [math.log(0.5)]], dtype=F64)
    beta = torch.tensor([[0.5], [0.25]], dtype=F64)
    s0 = torch.ones(1, 1, 1, 1)
    o, s = fn(q, k, v, g, beta, state=s0, scale=1.0)
    torch.testing.assert_close(o, torch.tensor([[[2.0]], [[1.0]]], dtype=torch.float64), rtol=0, atol=1e-14)
    torch.testing.assert_close(s, torch.full((1, 1, 1, 1), 0.5, dtype=torch.float64), rtol=0, atol=1e-14)
    # default scale = K^-1/2 = 1 here; the input state is not modified
    o2, _ = fn(q, k, v, g, beta, state=s0)
    torch.testing.assert_close(o2, o, rtol=0, atol=0)
    assert torch.equal(s0, torch.ones(1, 1, 1, 1))


# K = V = 2, S indexed S[k, v].  S0 = [[1, 0], [3, 2]]
#   t1: g=0, k=[1,0], v=[2,1], beta=1/2, q=[1,1]
#       S0^T k = S0[0,:] = [1,0]; delta = 1/2*([2,1]-[1,0]) = [1/2,1/2]
#       S1 = [[3/2,1/2],[3,2]];  S1^T q = [9/2, 5/2]
#   t2: g=ln(1/2), k=[0,1], v=[0,4], beta=1, q=[2,0]
#       decayed S = [[3/4,1/4],[3/2,1]]; (.)^T k = [3/2,1]; delta = [-3/2, 3]
#       S2 = [[3/4,1/4],[0,4]];  S2^T q = [3/2, 1/2]
_HAND2 = dict(
    q=[[1.0, 1.0], [2.0, 0.0]], k=[[1.0, 0.0], [0.0, 1.0]], v=[[2.0, 1.0], [0.0, 4.0]],
    g=[0.0, math.log(0.5)], beta=[0.5, 1.0], s0=[[1.0, 0.0], [3.0, 2.0]],
    o=[[4.5, 2.5], [1.5, 0.5]], s2=[[0.75, 0.25], [0.0, 4.0]],
)


@pytest.mark.parametrize("fn", [recurrent, chunked])
@pytest.mark.parametrize("layout", ["kv", "vk"])
def test_hand_k2_v2(fn, layout):
    h = _HAND2
    q = torch.tensor(h["q"], dtype=F64)[:, None, :]
    k = torch.tensor(h["k"], dtype=F64)[:, None, :]
    v = torch.tensor(h["v"], dtype=F64)[:, None, :]
    g = torch.tensor(h["g"], dtype=F64)[:, None]
    beta = torch.tensor(h["beta"], dtype=F64)[:, None]
    s0 = torch.tensor(h["s0"], dtype=F64)
    s0 = (s0 if layout == "kv" else s0.T)[None, None].contiguous()
    for scale in (1.0, 0.5, None):
        o, s = fn(q, k, v, g, beta, state=s0, state_layout=layout, scale=scale)
        sc = 2 ** -0.5 if scale is None else scale
        want_o = torch.tensor(h["o"], dtype=torch.float64)[:, None, :] * sc
        want_s = torch.tensor(h["s2"], dtype=torch.float64)
        want_s = (want_s if layout == "kv" else want_s.T)[None, None]
        torch.testing.assert_close(o, want_o, rtol=0, atol=1e-14)
        torch.testing.assert_close(s, want_s, rtol=0, atol=1e-14)


@pytest.mark.parametrize("fn", [recurrent, chunked])
def test_hand_l2norm_k1(fn):
    # K = V = 1, one token: k^ = k / sqrt(k^2 + 1e-6), q^ likewise; S0 = 0
    #   S1 = k^ * beta * v;  o = scale * S1 * q^
    kk, qq, vv, bb = 3.0, -2.0, 5.0, 0.25
    kh = kk / math.sqrt(kk * kk + 1e-6)
    qh = qq / math.sqrt(qq * qq + 1e-6)
    o, s = fn(torch.tensor([[[qq]]]), torch.tensor([[[kk]]]), torch.tensor([[[vv]]]),
              torch.tensor([[-0.3]]), torch.tensor([[bb]]), use_qk_l2norm=True, scale=1.0)
    s1 = kh * bb * vv
    assert abs(s.item() - s1) < 1e-15
    assert abs(o.item() - s1 * qh) < 1e-15


@pytest.mark.parametrize("fn", [recurrent, chunked])
def test_beta_zero_closed_form(fn):
    # beta = 0: S_t = e^{sum g} S0, o_t = scale * e^{cumsum g}_t * S0^T q_t (across chunks)
    inp = make_inputs([150], 1, 2, 16, 24, seed=3, state="dense")
    inp["beta"] = torch.zeros_like(inp["beta"])
    o, s = fn(**inp, scale=0.9)
    G = inp["g"].double().cumsum(0)                               # [T, Hv]
    S0 = inp["state"][0].double()                                 # [Hv, K, V]
    qd = inp["q"].double()[:, [0, 0]]                             # Hk = 1 -> both value heads
    want = 0.9 * G.exp()[..., None] * torch.einsum("hkv,thk->thv", S0, qd)
    assert rel_err(o, want) <= TOL
    assert rel_err(s[0], G[-1].exp()[:, None, None] * S0) <= TOL


@pytest.mark.parametrize("fn", [recurrent, chunked])
def test_gqa_equals_repeated_heads(fn):
    # Hk=2, Hv=8: value head h reads key head h // 4, i.e. repeat_interleave of q, k
    inp = make_inputs([70, 5], 2, 8, 16, 16, seed=4, state="dense")
    o, s = fn(**inp, use_qk_l2norm=True)
    rep = dict(inp, q=inp["q"].repeat_interleave(4, dim=1), k=inp["k"].repeat_interleave(4, dim=1))
    o2, s2 = fn(**rep, use_qk_l2norm=True)
    assert rel_err(o, o2) == 0.0 and rel_err(s, s2) == 0.0


@pytest.mark.parametrize("fn", [recurrent, chunked])
def test_l2norm_equals_prenormalised(fn):
    inp = make_inputs([90], 2, 2, 32, 32, seed=5, state="dense")
    o, s = fn(**inp, use_qk_l2norm=True)
    nq = lambda x: x.double() * torch.rsqrt((x.double() ** 2).sum(-1, keepdim=True) + 1e-6)
    o2, s2 = fn(**dict(inp, q=nq(inp["q"]), k=nq(inp["k"])), use_qk_l2norm=False)
    assert rel_err(o, o2) <= 1e-15 and rel_err(s, s2) <= 1e-15


# --------------------------------------------------------------------------------------
# recurrence == chunked algorithm
# --------------------------------------------------------------------------------------

CASES = [
    # T_list, Hk, Hv, K, V, state, layout, pad_every, l2norm, scale, extra make_inputs kwargs
    ([1], 1, 1, 32, 32, "none", "kv", 0, True, None, {}),
    ([1], 1, 2, 32, 32, "dense", "vk", 0, False, None, {}),
    ([37], 2, 2, 32, 64, "dense", "kv", 0, False, 0.3, {}),
    ([64], 1, 4, 64, 32, "pool", "vk", 0, True, None, {}),
    ([65], 2, 4, 32, 32, "dense", "vk", 0, True, None, {}),
    ([200], 1, 2, 32, 32, "pool", "kv", 0, False, None, {}),
    (MANY, 2, 4, 32, 32, "pool", "kv", 3, True, 0.7, {}),
    (MANY, 4, 4, 16, 32, "none", "vk", 0, False, None, {}),
    (MANY, 1, 2, 32, 16, "pool", "vk", 2, False, None, {"extra_slots": 0}),
    ([129, 0, 63], 2, 8, 16, 16, "dense", "kv", 0, True, None, {}),
    ([0], 1, 1, 32, 32, "dense", "kv", 0, True, None, {}),
    ([0, 0], 1, 1, 16, 16, "none", "vk", 0, True, None, {}),
    ([320], 1, 1, 32, 32, "dense", "kv", 0, True, None, {"gate_bias": 6.0}),   # slow decay
    ([192, 3], 1, 1, 32, 32, "pool", "kv", 0, True, 1.3, {"gate_bias": 0.0, "gate_std": 3.0}),
]


def _case_id(c):
    T_list, Hk, Hv, K, V, st, lay, pad, l2, scale, kw = c
    tl = "many" if T_list is MANY else "-".join(map(str, T_list))
    return f"T{tl}_h{Hk}x{Hv}_k{K}v{V}_{st}_{lay}_pad{pad}_l2{int(l2)}_s{scale}" + ("_kw" if kw else "")


@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
def test_recurrent_equals_chunked(case):
    T_list, Hk, Hv, K, V, st, lay, pad, l2, scale, kw = case
    inp = make_inputs(T_list, Hk, Hv, K, V, seed=zlib.crc32(_case_id(case).encode()) % 1000, state=st,
                      state_layout=lay, pad_every=pad, l2norm_inputs=not l2, **kw)
    state_before = None if inp["state"] is None else inp["state"].clone()
    o_r, s_r = recurrent(**inp, scale=scale, use_qk_l2norm=l2)
    o_c, s_c = chunked(**inp, scale=scale, use_qk_l2norm=l2)
    T = sum(T_list)
    assert o_r.dtype == torch.float64 and o_r.shape == (T, Hv, V)
    assert torch.equal(o_r.isnan(), o_c.isnan())
    assert rel_err(o_c, o_r) <= TOL
    assert torch.isfinite(s_r).all() or st == "none"
    assert s_r.shape == s_c.shape and torch.equal(s_r.isnan(), s_c.isnan())
    assert rel_err(s_c, s_r) <= TOL
    # the oracle never modifies its inputs
    if state_before is not None:
        assert torch.equal(inp["state"], state_before)
    # shape/layout of new_state
    if st == "none":
        N = len(T_list)
        assert s_r.shape == ((N, Hv, K, V) if lay == "kv" else (N, Hv, V, K))
    else:
        assert s_r.shape == inp["state"].shape
    # sanity: the outputs are not trivially zero where written
    if T >= 16:
        assert o_r[~o_r.isnan()].abs().max() > 1e-3 or all(s == -1 for s in _slots_of(inp))


def test_none_state_equals_zero_state():
    inp = make_inputs(MANY, 1, 2, 16, 16, seed=7)
    o, s = chunked(**inp, use_qk_l2norm=True)
    N = len(MANY)
    z = torch.zeros(N, 2, 16, 16)
    o2, s2 = recurrent(**dict(inp, state=z), use_qk_l2norm=True)
    assert rel_err(o, o2) <= TOL and rel_err(s, s2) <= TOL
    # zero-length sequences: final state = initial (zero)
    for n, L in enumerate(MANY):
        if L == 0:
            assert torch.equal(s[n], torch.zeros(2, 16, 16, dtype=torch.float64))


def test_cu_seqlens_none_is_one_sequence():
    inp = make_inputs([100], 2, 2, 16, 16, seed=8, state="dense")
    o, s = chunked(**inp)
    o2, s2 = chunked(**dict(inp, cu_seqlens=None))
    o3, s3 = recurrent(**dict(inp, cu_seqlens=[0, 100]))
    assert torch.equal(o, o2) and torch.equal(s, s2)
    assert rel_err(o3, o) <= TOL and rel_err(s3, s) <= TOL


def test_sequences_are_independent():
    # packing sequences together must equal running them one by one
    T_list = [70, 0, 3, 64]
    inp = make_inputs(T_list, 1, 2, 16, 16, seed=9, state="dense")
    o, s = chunked(**inp)
    cu = inp["cu_seqlens"].tolist()
    for n in range(len(T_list)):
        a, b = cu[n], cu[n + 1]
        sl = lambda x: x[a:b]
        on, sn = recurrent(sl(inp["q"]), sl(inp["k"]), sl(inp["v"]), sl(inp["g"]), sl(inp["beta"]),
                           state=inp["state"][n:n + 1])
        assert rel_err(o[a:b], on) <= TOL
        assert rel_err(s[n:n + 1], sn) <= TOL


@pytest.mark.parametrize("fn", [recurrent, chunked])
def test_vk_layout_is_transpose_of_kv(fn):
    inp = make_inputs([80, 7, 0], 1, 2, 16, 32, seed=10, state="pool", pad_every=3)
    o, s = fn(**inp, use_qk_l2norm=True)
    vk = dict(inp, state=inp["state"].transpose(-1, -2).contiguous(), state_layout="vk")
    o2, s2 = fn(**vk, use_qk_l2norm=True)
    assert s2.shape == (inp["state"].shape[0], 2, 32, 16)
    assert torch.equal(o.isnan(), o2.isnan()) and rel_err(o2, o) == 0.0
    assert torch.equal(s2, s.transpose(-1, -2))
    # a non-contiguous (transposed view) state is accepted as well
    o3, s3 = fn(**dict(inp, state=inp["state"].transpose(-1, -2).contiguous().transpose(-1, -2)),
                use_qk_l2norm=True)
    assert torch.equal(s3, s)


@pytest.mark.parametrize("fn", [recurrent, chunked])
def test_pool_padding(fn):
    T_list = [66, 4, 0, 30, 1, 64]
    inp = make_inputs(T_list, 1, 2, 16, 16, seed=11, state="pool", pad_every=2)
    idx = inp["state_indices"].tolist()
    assert idx[1] == idx[3] == idx[5] == -1 and min(idx[0], idx[2], idx[4]) >= 0
    pool0 = inp["state"].clone()
    o, s = fn(**inp, use_qk_l2norm=True)
    cu = inp["cu_seqlens"].tolist()
    for n in range(len(T_list)):
        rows = o[cu[n]:cu[n + 1]]
        if idx[n] == -1:
            assert rows.isnan().all()             # padding: not written
        else:
            assert not rows.isnan().any()
    used = {i for n, i in enumerate(idx) if i >= 0 and T_list[n] > 0}
    for p in range(pool0.shape[0]):
        if p in used:
            assert not torch.allclose(s[p], pool0[p].double())
        else:                                      # padding, zero-length and unused slots: copied
            assert torch.equal(s[p], pool0[p].double())
    # padding sequences are not read: poisoning their inputs changes nothing
    poisoned = {key: inp[key].clone() for key in ("q", "k", "v", "g", "beta")}
    for n in range(len(T_list)):
        if idx[n] == -1:
            for key in poisoned:
                poisoned[key][cu[n]:cu[n + 1]] = float("nan")
    o_p, s_p = fn(**dict(inp, **poisoned), use_qk_l2norm=True)
    assert torch.equal(o_p.isnan(), o.isnan()) and rel_err(o_p, o) == 0.0 and torch.equal(s_p, s)


def test_padding_without_state():
    inp = make_inputs([20, 9], 1, 1, 16, 16, seed=12)
    o, s = recurrent(**dict(inp, state_indices=torch.tensor([-1, 0], dtype=torch.int32)))
    assert o[:20].isnan().all() and not o[20:].isnan().any()
    assert s[0].isnan().all() and torch.isfinite(s[1]).all()
    o2, s2 = chunked(**dict(inp, state_indices=[-1, 0]))
    assert rel_err(o2, o) <= TOL and torch.equal(s2.isnan(), s.isnan()) and rel_err(s2, s) <= TOL


def test_tokens_past_last_sequence_are_not_written():
    inp = make_inputs([50], 1, 1, 16, 16, seed=13)
    o, _ = chunked(**dict(inp, cu_seqlens=[0, 30]))
    assert not o[:30].isnan().any() and o[30:].isnan().all()


def test_input_dtype_and_views():
    # bf16 / fp32 inputs are read exactly (converted to fp64), packed strided views accepted
    a = make_inputs([70, 3], 2, 4, 16, 16, seed=14, state="pool", pad_every=2)
    b = make_inputs([70, 3], 2, 4, 16, 16, seed=14, state="pool", pad_every=2, packed=True)
    assert not b["q"].is_contiguous() and not b["g"].is_contiguous()
    for key in ("q", "k", "v", "g", "beta", "cu_seqlens", "state", "state_indices"):
        assert torch.equal(a[key].float(), b[key].float()), key
    oa, sa = chunked(**a)
    ob, sb = chunked(**b)
    assert torch.equal(oa.isnan(), ob.isnan()) and rel_err(ob, oa) == 0.0 and torch.equal(sa, sb)
    d = {k_: (v_.double() if isinstance(v_, torch.Tensor) and v_.is_floating_point() else v_)
         for k_, v_ in a.items()}
    od, sd = chunked(**d)
    assert rel_err(od, oa) == 0.0 and torch.equal(sd, sa)


# --------------------------------------------------------------------------------------
# workspace intermediates
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("l2", [True, False])
@pytest.mark.parametrize("layout", ["kv", "vk"])
def test_intermediates(l2, layout):
    T_list = [130, 1, 0, 64, 65, 3, 17]
    Hk, Hv, K, V = 1, 2, 16, 32
    inp = make_inputs(T_list, Hk, Hv, K, V, seed=15, state="pool", state_layout=layout, pad_every=3,
                      l2norm_inputs=not l2)
    ws = chunked_intermediates(**inp, use_qk_l2norm=l2, scale=0.6)
    T, N = sum(T_list), len(T_list)
    CB = -(-T // CHUNK) + N
    cu = inp["cu_seqlens"].tolist()
    idx = inp["state_indices"].tolist()
    pool = inp["state"].double()
    if layout == "vk":
        pool = pool.transpose(-1, -2)

    # shapes and dtypes
    for name, shp in (("gcum", (T, Hv)), ("rq", (T, Hv)), ("rk", (T, Hv)), ("w", (T, Hv, K)),
                      ("u", (T, Hv, V)), ("vnew", (T, Hv, V)), ("h", (CB, Hv, K, V)), ("pqk", (T, Hv, CHUNK)),
                      ("tu", (T, Hv, CHUNK))):
        assert ws[name].shape == shp and ws[name].dtype == torch.float64, name

    # chunk slots: chunk i of sequence n in slot first_slot(cu, n) + i, all distinct and < CB;
    # the slots no live chunk maps to stay NaN
    nchunks = [-(-L // CHUNK) for L in T_list]
    slots = [first_slot(cu, n) + i for n in range(N) for i in range(nchunks[n])]
    assert slots == sorted(set(slots)) and slots[-1] < CB
    live = [first_slot(cu, n) + i for n in range(N) if idx[n] != -1 for i in range(nchunks[n])]
    idle = [c for c in range(CB) if c not in live]
    assert ws["h"][idle].isnan().all() and not ws["h"][live].isnan().any()

    # against chunked()
    o, s = chunked(**inp, use_qk_l2norm=l2, scale=0.6)
    assert torch.equal(ws["o"].isnan(), o.isnan()) and rel_err(ws["o"], o) == 0.0
    assert torch.equal(ws["new_state"], s)

    kd = inp["k"].double()[:, torch.arange(Hv) // (Hv // Hk)]
    qd = inp["q"].double()[:, torch.arange(Hv) // (Hv // Hk)]
    if l2:
        rk_want = torch.rsqrt((kd ** 2).sum(-1) + 1e-6)
        rq_want = torch.rsqrt((qd ** 2).sum(-1) + 1e-6)
    else:
        rk_want = rq_want = torch.ones(T, Hv, dtype=torch.float64)
    kn = kd * rk_want[..., None]
    qn = qd * rq_want[..., None]
    vd, gd, bd = inp["v"].double(), inp["g"].double(), inp["beta"].double()

    for n in range(N):
        a, b = cu[n], cu[n + 1]
        c0 = first_slot(cu, n)
        if idx[n] == -1:
            for name in ("gcum", "rq", "rk", "w", "u", "vnew"):
                assert ws[name][a:b].isnan().all(), name
            assert ws["h"][c0:c0 + nchunks[n]].isnan().all()
            assert o[a:b].isnan().all()
            continue
        assert torch.equal(ws["rq"][a:b], rq_want[a:b]) and torch.equal(ws["rk"][a:b], rk_want[a:b])
        if b == a:
            continue
        assert torch.equal(ws["h"][c0], pool[idx[n]])                  # h[first chunk] = S0
        for i in range(nchunks[n]):
            c, t0 = c0 + i, a + CHUNK * i
            t1 = min(t0 + CHUNK, b)
            L = t1 - t0
            gc = ws["gcum"][t0:t1]                                     # [L, Hv]
            assert rel_err(gc, gd[t0:t1].cumsum(0)) <= TOL
            for h in range(Hv):
                kc, vc, bc, gh = kn[t0:t1, h], vd[t0:t1, h], bd[t0:t1, h], gc[:, h]
                w, u, vnew, H = ws["w"][t0:t1, h], ws["u"][t0:t1, h], ws["vnew"][t0:t1, h], ws["h"][c, h]
                # defining equations of stage 1: (I + A) w = diag(beta e^gcum) k, (I + A) u = diag(beta) v
                A = torch.zeros(L, L, dtype=torch.float64)
                for r in range(L):
                    for j in range(r):
                        A[r, j] = bc[r] * (kc[r] @ kc[j]) * math.exp(gh[r] - gh[j])
                IA = torch.eye(L, dtype=torch.float64) + A
                assert rel_err(IA @ w, (bc * gh.exp())[:, None] * kc) <= TOL
                assert rel_err(IA @ u, bc[:, None] * vc) <= TOL
                # the fused plan's stage 1: tu = (I + A)^-1 (columns >= L: 0)
                tu = ws["tu"][t0:t1, h]
                assert rel_err(IA @ tu[:, :L], torch.eye(L, dtype=torch.float64)) <= TOL and not tu[:, L:].any()
                # stage 2: vnew = u - w h; h[next] = e^{g_last} h + sum_j k_j e^{g_last - g_j} vnew_j^T
                assert rel_err(vnew, u - w @ H) <= TOL
                # ... which the register-state spine forms from tu: vnew = tu diag(beta) (v - diag(e^gcum) k h)
                assert rel_err(vnew, tu[:, :L] @ (bc[:, None] * (vc - gh.exp()[:, None] * (kc @ H)))) <= TOL
                nxt = gh[-1].exp() * H + (kc * (gh[-1] - gh).exp()[:, None]).T @ vnew
                want = ws["h"][c + 1, h] if i + 1 < nchunks[n] else pool_after(ws, layout)[idx[n], h]
                assert rel_err(want, nxt) <= TOL
                # stage 3 for the last row of the chunk, written out
                qi = qn[t1 - 1, h]
                oi = gh[-1].exp() * (qi @ H) + sum((qi @ kc[j]) * math.exp(gh[-1] - gh[j]) * vnew[j]
                                                  for j in range(L))
                assert rel_err(o[t1 - 1, h], 0.6 * oi) <= TOL


def pool_after(ws, layout):
    s = ws["new_state"]
    return s if layout == "kv" else s.transpose(-1, -2)


def test_intermediates_no_state_starts_from_zero():
    inp = make_inputs([65, 2], 1, 1, 16, 16, seed=16, l2norm_inputs=True)
    ws = chunked_intermediates(**inp)
    assert torch.equal(ws["h"][0], torch.zeros(1, 16, 16, dtype=torch.float64))
    assert torch.equal(ws["h"][2], torch.zeros(1, 16, 16, dtype=torch.float64))
    assert not torch.equal(ws["h"][1], ws["h"][0])
    assert ws["h"][3:].isnan().all()                                   # CB = 2 + 2 = 4, 3 used
    assert [first_slot(inp["cu_seqlens"].tolist(), n) for n in range(2)] == [0, 2]


# --------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------

def test_rel_err():
    r = torch.tensor([3.0, 4.0, float("nan")])
    assert rel_err(torch.tensor([3.0, 4.0, 123.0]), r) == 0.0          # NaN in ref: ignored
    assert rel_err(torch.tensor([3.0, 4.0, float("nan")]), r) == 0.0
    assert abs(rel_err(torch.tensor([3.0, 5.0, 0.0]), r) - 0.2) < 1e-15
    assert math.isnan(rel_err(torch.tensor([float("nan"), 4.0, 0.0]), r))   # must fail any <= check
    assert rel_err(torch.zeros(2), torch.zeros(2)) == 0.0
    assert rel_err(torch.ones(2), torch.zeros(2)) == math.inf
    with pytest.raises(ValueError):
        rel_err(torch.zeros(2), torch.zeros(3))


def test_make_inputs():
    a = make_inputs([5, 0, 70], 2, 4, 16, 32, seed=1, state="pool", pad_every=2)
    b = make_inputs([5, 0, 70], 2, 4, 16, 32, seed=1, state="pool", pad_every=2)
    c = make_inputs([5, 0, 70], 2, 4, 16, 32, seed=2, state="pool", pad_every=2)
    for key in ("q", "k", "v", "g", "beta", "state", "state_indices", "cu_seqlens"):
        assert torch.equal(a[key], b[key]), key
    assert not torch.equal(a["q"], c["q"])
    assert a["q"].shape == (75, 2, 16) and a["q"].dtype == torch.bfloat16
    assert a["v"].shape == (75, 4, 32) and a["v"].dtype == torch.bfloat16
    assert a["g"].shape == (75, 4) and a["g"].dtype == torch.float32 and (a["g"] < 0).all()
    assert a["beta"].dtype == torch.float32 and ((a["beta"] > 0) & (a["beta"] < 1)).all()
    assert a["cu_seqlens"].tolist() == [0, 5, 5, 75] and a["cu_seqlens"].dtype == torch.int32
    idx = a["state_indices"]
    assert idx.dtype == torch.int32 and idx[1] == -1
    P = a["state"].shape[0]
    assert P > 3 and a["state"].shape[1:] == (4, 16, 32) and a["state"].dtype == torch.float32
    live = [i for i in idx.tolist() if i != -1]
    assert len(set(live)) == len(live) and all(0 <= i < P for i in live)
    d = make_inputs([3], 1, 1, 16, 32, seed=0, state="dense", state_layout="vk")
    assert d["state"].shape == (1, 1, 32, 16) and d["state_indices"] is None
    n = make_inputs([3], 1, 1, 16, 32, seed=0, l2norm_inputs=True)
    assert torch.allclose(n["k"].float().norm(dim=-1), torch.ones(3, 1), atol=1e-2)
    with pytest.raises(ValueError):
        make_inputs([3], 1, 1, seed=0, pad_every=2)                    # padding needs a pool


def test_argument_errors():
    inp = make_inputs([10, 10], 2, 4, 16, 16, seed=0, state="pool")
    with pytest.raises(ValueError, match="state_indices"):
        recurrent(**dict(inp, state_indices=torch.tensor([1, 1], dtype=torch.int32)))
    with pytest.raises(ValueError, match="state_indices"):
        chunked(**dict(inp, state_indices=[0, inp["state"].shape[0]]))
    with pytest.raises(ValueError, match="state_indices"):
        chunked(**dict(inp, state_indices=[0]))
    with pytest.raises(ValueError, match="P must equal"):
        chunked(**dict(inp, state_indices=None))
    with pytest.raises(ValueError, match="Hv"):
        chunked(**dict(inp, q=inp["q"][:, :1].expand(20, 3, 16), k=inp["k"][:, :1].expand(20, 3, 16)))
    with pytest.raises(ValueError, match="cu_seqlens"):
        chunked(**dict(inp, cu_seqlens=[0, 15, 10]))
    with pytest.raises(ValueError, match="state_layout"):
        chunked(**dict(inp, state_layout="kk"))
    with pytest.raises(ValueError, match="state"):
        chunked(**dict(inp, state_layout="vk", state=inp["state"][..., :8]))


def test_import_is_light():
    code = ("import sys, time; t = time.time(); import gdn_prefill.reference; "
            "assert not any(m.startswith('cutlass') for m in sys.modules); "
            "assert 'gdn_prefill._ext' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=str(_repo_root()))


def _repo_root():
    import pathlib
    return pathlib.Path(ref.__file__).resolve().parents[1]


@pytest.mark.parametrize("layout", ["kv", "vk"])
def test_checkpoints_are_prefix_states(layout):
    """A checkpoint is the state after its token: the final state of a prefill of the prefix
    (sequence lengths just below, at and above the boundaries; shorter than the interval; empty).
    recurrent and chunked agree; -1 entries and slots no checkpoint names keep their values."""
    lens = [127, 128, 129, 63, 0, 200]
    every = 64
    inp = ref.make_inputs(lens, 1, 2, seed=11, state="pool", state_layout=layout, extra_slots=12)
    P = inp["state"].shape[0]
    table = ref.checkpoint_table(inp["cu_seqlens"], inp["state_indices"], P, every, skip_every=3)
    # 1 + 2 + 2 + 0 + 0 + 3 (128 = 2 x 64: its second is the final state), every 3rd skipped
    assert table.shape == (len(lens), 3) and (table >= 0).sum() == 6
    o_r, s_r = ref.recurrent(**inp, checkpoint_every=every, checkpoints=table)
    o_c, s_c = ref.chunked(**inp, checkpoint_every=every, checkpoints=table)
    assert ref.rel_err(o_c, o_r) < 1e-12 and ref.rel_err(s_c, s_r) < 1e-12
    o_plain, s_plain = ref.recurrent(**inp)
    assert torch.equal(o_r.nan_to_num(), o_plain.nan_to_num())
    written = {int(x) for x in table.flatten() if x >= 0}
    for slot in range(P):
        if slot not in written:
            assert torch.equal(s_r[slot], s_plain[slot]), slot
    cu = inp["cu_seqlens"].tolist()
    for n, (a, b) in enumerate(zip(cu, cu[1:])):
        for j in range(table.shape[1]):
            slot = int(table[n, j])
            if slot < 0:
                continue
            end = a + (j + 1) * every
            assert end <= b
            sub = {key: x[a:end] for key, x in inp.items() if key in ("q", "k", "v", "g", "beta")}
            init = inp["state"][int(inp["state_indices"][n])][None]
            _, s_prefix = ref.recurrent(**sub, state=init, state_layout=layout)
            assert ref.rel_err(s_r[slot], s_prefix[0]) < 1e-12, (n, j)


def test_checkpoint_arguments():
    inp = ref.make_inputs([130], 1, 2, seed=1, state="pool", extra_slots=2)
    table = torch.tensor([[-1]], dtype=torch.int32)
    with pytest.raises(ValueError, match="both or neither"):
        ref.recurrent(**inp, checkpoints=table)
    with pytest.raises(ValueError, match="multiple of 64"):
        ref.chunked(**inp, checkpoint_every=32, checkpoints=table)
    with pytest.raises(ValueError, match="entries must be -1"):
        ref.chunked(**inp, checkpoint_every=64, checkpoints=torch.tensor([[99]]))
