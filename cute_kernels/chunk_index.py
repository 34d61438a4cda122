"""chunk_index: map packed sequences to chunk slots on the device, without a host sync.

The host only knows T and N, so every chunked stage is launched over
plan.chunk_slots(T, N) = ceil(T/64) + N slots, an upper bound on the chunks of any
split of T tokens into N sequences.  This one-CTA kernel turns cu_seqlens into
  chunk_offsets[n]  first slot of sequence n (chunk_offsets[N] = chunks in all)
  chunk_seq[c]      owning sequence of slot c, -1 for slots past the last chunk
  chunk_token[c]    first token of slot c
so every later CTA finds its chunk with two loads.
"""
from __future__ import annotations

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
from cutlass import Int32

from gdn_prefill import plan

from . import fake

THREADS = plan.CHUNK_INDEX_THREADS
SMEM_BYTES = THREADS * 4 + 16


@cute.kernel
def chunk_index_kernel(cu_seqlens: cute.Tensor, chunk_offsets: cute.Tensor, chunk_seq: cute.Tensor,
                       chunk_token: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    n_seq = cu_seqlens.shape[0] - 1
    n_slots = chunk_seq.shape[0]

    smem = cutlass.utils.SmemAllocator()
    partial = smem.allocate_tensor(Int32, cute.make_layout(THREADS), byte_alignment=16)

    # Each thread owns a contiguous run of sequences: count its chunks ...
    per = (n_seq + THREADS - 1) // THREADS
    first = tidx * per
    last = cutlass.min(first + per, n_seq)
    count = Int32(0)
    for n in cutlass.range(first, last, 1):
        length = cu_seqlens[n + 1] - cu_seqlens[n]
        count += (cutlass.max(length, 0) + plan.CHUNK - 1) // plan.CHUNK
    partial[tidx] = count
    cute.arch.sync_threads()

    # ... an exclusive scan over the THREADS partial counts (tiny, done by one thread) ...
    if tidx == 0:
        running = Int32(0)
        for i in cutlass.range(THREADS):
            c = partial[i]
            partial[i] = running
            running += c
        chunk_offsets[n_seq] = running
    cute.arch.sync_threads()

    # ... then each thread writes the slots of its own sequences.
    slot = partial[tidx]
    for n in cutlass.range(first, last, 1):
        start = cu_seqlens[n]
        length = cutlass.max(cu_seqlens[n + 1] - start, 0)
        chunk_offsets[n] = slot
        n_chunks = (length + plan.CHUNK - 1) // plan.CHUNK
        for i in cutlass.range(n_chunks):
            chunk_seq[slot + i] = n
            chunk_token[slot + i] = start + i * plan.CHUNK
        slot += n_chunks
    cute.arch.sync_threads()

    total = chunk_offsets[n_seq]
    for c in cutlass.range(total + tidx, n_slots, THREADS):
        chunk_seq[c] = Int32(-1)
        chunk_token[c] = Int32(0)


@cute.jit
def chunk_slot(c: Int32, chunk_seq: cute.Tensor, chunk_token: cute.Tensor, cu_seqlens: cute.Tensor,
               state_indices: cute.Tensor, use_state_indices: Int32):
    """What a per-chunk CTA (recompute_wu, fwd_o) needs to know of its slot c: (live, n, t0, L).

    live: 1 if slot c holds a chunk of sequence n whose state slot is not padding
    (state_indices[n] == -1 skips the sequence); t0: its first token; L = min(64, eos - t0)
    its rows.  chunk_token[c] is read beside chunk_seq[c], and cu_seqlens[n + 1] beside
    state_indices[n], so the CTA waits on two dependent loads, not three."""
    n = Int32(-1)
    t0 = Int32(0)
    if c < chunk_seq.shape[0]:
        n = chunk_seq[c]
        t0 = chunk_token[c]
    live = Int32(0)
    L = Int32(0)
    if n >= 0:
        live = Int32(1)
        L = cutlass.min(cu_seqlens[n + 1] - t0, plan.CHUNK)
        if use_state_indices != 0:
            if state_indices[n] < 0:
                live = Int32(0)
    return live, n, t0, L


@cute.jit
def chunk_index(cu_seqlens: cute.Tensor, chunk_offsets: cute.Tensor, chunk_seq: cute.Tensor,
                chunk_token: cute.Tensor, stream: cuda.CUstream):
    chunk_index_kernel(cu_seqlens, chunk_offsets, chunk_seq, chunk_token).launch(
        grid=plan.grid_chunk_index(0, 0, 0), block=[THREADS, 1, 1], smem=SMEM_BYTES, stream=stream)


LAUNCH = chunk_index
VARIANTS = {"chunk_index": {}}


def fake_args(dims: fake.Dims):
    return [fake.cu_seqlens(dims), fake.chunk_offsets(dims), fake.chunk_slots(dims), fake.chunk_slots(dims)]
