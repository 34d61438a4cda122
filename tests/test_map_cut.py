"""The segmented plan's cut of its maps (spine_rs._map_cut, docs/DESIGN.md §3) as a rule on the fp64
chunked algorithm, no GPU: walking back from a segment's end, the first w chunks whose log-decays
sum below GDN_MAP_CUT_LOG_DECAY; the next segment then starts from those chunks' end state alone
(B from S = 0, A dropped).  The outputs so composed against the uncut sequence, on the bench's gate
kinds and on gates that never decay enough (no cut: the exact maps).  The kernel itself is held to
the oracle by tests/test_gpu_prefill.py's segmented plans."""
from __future__ import annotations

import math

import pytest
import torch

from gdn_prefill import grids
from gdn_prefill import reference as ref
from gdn_prefill.bench.inputs import draw_gates

C = grids.CHUNK


def cut_chunks(g: torch.Tensor, c0: int, c1: int) -> torch.Tensor:
    """Per head: how many of chunks c0 .. c1 - 1 the maps need (c1 - c0 where none is cut)."""
    dec = g[c0 * C:c1 * C].reshape(c1 - c0, C, -1).sum(1).double()           # [chunks, Hv]
    back = dec.flip(0).cumsum(0)                                              # the last w chunks' sum
    below = back < grids.MAP_CUT_LOG_DECAY
    first = torch.where(below.any(0), below.int().argmax(0) + 1, torch.full_like(below[0], c1 - c0, dtype=torch.long))
    return first


def segmented_with_cut(q, k, v, g, beta, seg: int):
    """o of one sequence by segments of `seg` chunks: each segment from the composed state, where a
    segment's map is B over its cut chunks from zero (A dropped) or, uncut, the exact end state."""
    T, Hv = g.shape
    n = T // C
    o = torch.empty(T, Hv, v.shape[-1], dtype=torch.float64)
    S = torch.zeros(1, Hv, q.shape[-1], v.shape[-1], dtype=torch.float64)      # [1, Hv, K, V]
    cuts = 0
    for c0 in range(0, n, seg):
        c1 = min(c0 + seg, n)
        t0, t1 = c0 * C, c1 * C
        cu = torch.tensor([0, t1 - t0])
        o_seg, S_end = ref.chunked(q[t0:t1], k[t0:t1], v[t0:t1], g[t0:t1], beta[t0:t1], cu_seqlens=cu, state=S)
        o[t0:t1] = o_seg
        w = cut_chunks(g, c0, c1)
        S_next = S_end.clone()
        for h in range(Hv):
            if w[h] < c1 - c0:                                                # cut: B from the last w chunks
                cuts += 1
                s0 = t1 - int(w[h]) * C
                hk = h // (Hv // q.shape[1])                                  # the key head of value head h
                _, B = ref.chunked(q[s0:t1, hk:hk + 1], k[s0:t1, hk:hk + 1], v[s0:t1, h:h + 1], g[s0:t1, h:h + 1],
                                   beta[s0:t1, h:h + 1], cu_seqlens=torch.tensor([0, t1 - s0]),
                                   state=torch.zeros(1, 1, q.shape[-1], v.shape[-1], dtype=torch.float64))
                S_next[:, h] = B[:, 0]
        S = S_next
    return o, cuts


@pytest.mark.parametrize("kind", ["fast", "mixed", "none"])
def test_cut_maps_keep_the_outputs(kind):
    """Where it cuts, the cut costs less than e^GDN_MAP_CUT_LOG_DECAY of o's scale (what it drops is
    below that share of the state at the cut); where the gates never sum below the cut (g = 0), the
    exact maps: the same outputs to fp64 rounding."""
    T, Hk, Hv, seg = 2048, 1, 4, 8                                            # 32 chunks, 4 segments
    inp = ref.make_inputs([T], Hk, Hv, K=32, V=32, seed=5, l2norm_inputs=True)
    gen = torch.Generator().manual_seed(5)
    g = (torch.zeros(T, Hv) if kind == "none"
         else draw_gates(kind, T, Hv, lambda *s: torch.randn(*s, generator=gen)))
    q, k, v, beta = (inp[x].double() for x in ("q", "k", "v", "beta"))
    exact, _ = ref.chunked(q, k, v, g, beta, cu_seqlens=torch.tensor([0, T]))
    o, cuts = segmented_with_cut(q, k, v, g, beta, seg)
    err = ((o - exact).abs().max() / exact.abs().max()).item()
    if kind == "none":
        assert cuts == 0 and err < 1e-12
    else:
        assert cuts > 0 and err < math.exp(grids.MAP_CUT_LOG_DECAY), (cuts, err)


def test_a_large_value_before_the_cut_barely_moves_the_outputs():
    """The cut drops what came before a segment's last w chunks, scaled by less than
    e^GDN_MAP_CUT_LOG_DECAY: a value far larger than the rest, in the dropped chunk next to the kept
    ones (the worst place), moves o by that share of its size.  Every chunk's log-decay -6, one
    chunk's values 1e4x: o moves by less than 1e-4 of its scale after the segment, 30x below the
    kernel's own bf16 error (~3e-3).  At e^-10 (FlashQLA's cut) it moved by 6.8e-3."""
    T, Hk, Hv, seg = 2048, 1, 4, 8
    inp = ref.make_inputs([T], Hk, Hv, K=32, V=32, seed=5, l2norm_inputs=True)
    q, k, v, beta = (inp[x].double() for x in ("q", "k", "v", "beta"))
    g = torch.full((T, Hv), -6.0 / C, dtype=torch.float64)
    w = int(cut_chunks(g, 0, seg)[0])
    c = seg - w - 1                                                           # the dropped chunk next to the kept
    assert c >= 0
    v = v.clone()
    v[c * C:(c + 1) * C] *= 1e4
    exact, _ = ref.chunked(q, k, v, g, beta, cu_seqlens=torch.tensor([0, T]))
    o, cuts = segmented_with_cut(q, k, v, g, beta, seg)
    after = slice(seg * C, T)
    err = ((o - exact)[after].abs().max() / exact[after].abs().max()).item()
    assert cuts > 0 and err < 1e-4, (w, err)
