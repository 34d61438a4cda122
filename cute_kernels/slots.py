"""Chunk slots: where each 64-token chunk of N packed sequences lives, with no index kernel.

Sequence n (tokens cu[n] .. cu[n+1]) owns the slots

    first_slot(n) = cu[n] // CHUNK + n,   first_slot(n) + i  for its chunks i = 0 .. ceil(len/CHUNK) - 1

(grids.first_slot).  first_slot is strictly increasing in n and the slots of sequence n end
before first_slot(n + 1), because floor(a/C) + ceil(l/C) <= floor((a+l)/C) + 1; the last slot
is below floor(T/C) + N, so grids.chunk_slots(T, N) = ceil(T/C) + N slots always suffice and
the host never reads cu_seqlens.  A per-chunk CTA finds its sequence from its slot by a warp
search over cu_seqlens; the spines know n and compute the slot of each chunk directly.

Segment slots (the segmented plan, docs/DESIGN.md §3): the same construction one level up.
Sequence n's chunks are cut into segments of seg_chunks chunks, and its segment j lives in slot
first_slot(n) // seg_chunks + n + j (grids.first_segment_slot): strictly increasing in n by the
same inequality, below (floor(T/C) + N) // seg_chunks + N (grids.segment_slots).
"""
from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Int32

from gdn_prefill import grids

CHUNK = grids.CHUNK
SEARCH_ROUNDS = grids.SLOT_SEARCH_ROUNDS   # 32 ** 4: the most sequences the search covers


@cute.jit
def first_slot(bos: Int32, n: Int32) -> Int32:
    """The slot of sequence n's first chunk (bos = cu_seqlens[n]): grids.first_slot, the one formula."""
    return grids.first_slot(bos, n)


@cute.jit
def first_segment_slot(bos: Int32, n: Int32, seg_chunks: Int32) -> Int32:
    """The segment slot of sequence n's first segment: grids.first_segment_slot, the one formula."""
    return grids.first_segment_slot(bos, n, seg_chunks)


@cute.jit
def _last_at_or_below(c: Int32, cu_seqlens: cute.Tensor, key, *key_args):
    """(found, n, bos, eos): the last sequence n with key(cu[n], n, *key_args) <= c (key increasing
    in n), by a
    warp search with no barrier: 32 candidates per round, each lane one load of cu_seqlens, a
    ballot (key is increasing, so the lanes that pass are a prefix).  The final round's lanes also
    hold cu[n] and cu[n+1] (one lane loads the end of the last candidate): shuffles, not a second
    dependent load; for 2 <= N <= 32 that is one load of cu_seqlens per lane in all.  found = 0:
    c is below the first sequence's key (cu[0] > 0)."""
    lane = cute.arch.lane_idx()
    N = cu_seqlens.shape[0] - 1
    lo = Int32(0)                  # invariant: key(lo) <= c, if any n has it
    size = N                       # candidates lo .. lo + size - 1
    found = Int32(1)
    bos = Int32(0)
    eos = Int32(0)
    have = Int32(0)                # bos, eos came from the last round's own loads
    for _ in cutlass.range_constexpr(SEARCH_ROUNDS):
        if size > 1:
            step = (size + 31) // 32
            p = lo + lane * step
            ok = Int32(0)
            x = Int32(0)
            if p <= lo + size:     # lo + size <= N: cu[lo + size] is the last candidate's end
                x = cu_seqlens[p]
                if p < lo + size:
                    if key(x, p, *key_args) <= c:
                        ok = Int32(1)
            k = cute.arch.popc(cute.arch.vote_ballot_sync(ok != 0)) - 1
            if k < 0:
                found = Int32(0)   # c is below the first sequence's key (cu[0] > 0)
                k = Int32(0)
            if step == 1:
                # the final round: lane k loaded cu[n] and lane k + 1 cu[n + 1] (one dependent
                # global load fewer than loading them again; lane 32 does not exist)
                bos = cute.arch.shuffle_sync(x, k)
                eos = cute.arch.shuffle_sync(x, cutlass.min(k + 1, 31))
                have = Int32(1)
                if k == 31:
                    have = Int32(0)
            top = lo + size
            lo = lo + k * step
            size = cutlass.min(step, top - lo)
    n = lo
    if have == 0:
        bos = cu_seqlens[n]
        eos = cu_seqlens[n + 1]
    return found, n, bos, eos


@cute.jit
def chunk_of_slot(c: Int32, cu_seqlens: cute.Tensor, state_indices: cute.Tensor, use_state_indices: Int32):
    """What a per-chunk CTA (recompute_wu, fwd_o) needs to know of its slot c: (live, n, t0, L).

    live: 1 if slot c holds chunk i of sequence n and the sequence is not a padding entry
    (state_indices[n] == -1 skips it); t0 = cu[n] + CHUNK i its first token; L = min(CHUNK,
    cu[n+1] - t0) its rows.  Every warp searches on its own (_last_at_or_below: the last n with
    first_slot(n) <= c), then reads state_indices[n] when used."""
    found, n, bos, eos = _last_at_or_below(c, cu_seqlens, first_slot)
    i = c - first_slot(bos, n)
    live = Int32(0)
    t0 = Int32(0)
    L = Int32(0)
    if found != 0 and i >= 0 and i * CHUNK < eos - bos:
        live = Int32(1)
        t0 = bos + i * CHUNK
        L = cutlass.min(eos - t0, CHUNK)
        if use_state_indices != 0:
            if state_indices[n] < 0:
                live = Int32(0)
    return live, n, t0, L


@cute.jit
def segment_of_slot(s: Int32, cu_seqlens: cute.Tensor, seg_chunks: Int32):
    """What a CTA of the segmented plan needs to know of its segment slot s: (live, n, j, nseg,
    bos, eos).  Sequence n's segments (seg_chunks chunks each, the last one shorter) are the
    slots grids.first_segment_slot(n) + j, j < nseg = max(ceil(chunks / seg_chunks), 1); live = 0
    where no segment maps to s.  Padding entries (state_indices) are the caller's to skip."""
    found, n, bos, eos = _last_at_or_below(s, cu_seqlens, first_segment_slot, seg_chunks)
    j = s - first_segment_slot(bos, n, seg_chunks)
    nch = (eos - bos + (CHUNK - 1)) // CHUNK
    # an empty sequence has one segment (of no chunks): its CTAs write its final state, the
    # initial one, as the serial plan's do
    nseg = cutlass.max((nch + seg_chunks - 1) // seg_chunks, Int32(1))
    live = Int32(0)
    if found != 0 and j >= 0 and j < nseg:
        live = Int32(1)
    return live, n, j, nseg, bos, eos
