"""What every spine reads from and writes into the state pool: which slot is the sequence's own
(pool_slot), where the initial state comes from, and which pool slot, if any, takes a checkpoint
of the state after a chunk (prefix caching).  One rule for every spine, so that no two of them can disagree.

The initial state (gdn_problem_t.state_in, set by the launcher): 0, zeros; 1, the sequence's slot
of `state` (in place: read, then overwritten with the final state); 2, the same slot of
`initial_state` (read only; `state`, when bound, is only written); 3 and 4, 1 and 2 where the
per-sequence mask has_initial[n] is nonzero and zeros where it is 0 (`source`).

Checkpoints:
With checkpoint_chunks = c > 0, the state after chunk i (0-based) is a checkpoint when (i + 1) is
a multiple of c and the chunk is full, (i + 1) * CHUNK <= the sequence's length: the state after
every c CHUNK tokens up to the sequence's end, FlashInfer's rule (floor(length / (c CHUNK))
checkpoints; when the length is a multiple, the last is the final state, which serving engines
keep in a cache slot of its own).  It is the sequence's j-th checkpoint, j = (i + 1) / c - 1, and
goes to slot checkpoints[n, j] of checkpoint_pool (`state` itself unless the caller gives another
pool) when j < J (the table's columns) and that entry is >= 0.
"""
from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import BFloat16, Float8E4M3FN, Float16, Float32, Int32
from cutlass.cute.nvgpu import cpasync

# The pools' element types: every spine is built for each (a variant per type, the suffix in its
# name; the launcher picks by the state's dtype).  A bf16, fp16 or fp8 pool is read once, converted
# exactly to fp32 (to_f32), and rounded once when written (from_f32: the final state, a checkpoint);
# inside, the state stays fp32.  Each conversion is one sm_90a instruction in registers: fp32 ->
# bf16 / fp16 F2FP.{BF16,F16}.F32 (round to nearest even; an fp16 overflow gives +-inf, as torch's
# conversion); fp32 -> fp8 e4m3 F2FP.SATFINITE.E4M3.F32 (round to nearest even, saturating: a
# magnitude beyond 448, the largest finite e4m3, is written as +-448, NaN stays NaN; PTX has no
# non-saturating f32 -> e4m3 conversion, and a state that overflowed to NaN would poison every later
# token of its sequence, where a clamped one is a bounded error); fp8 -> fp32 through fp16, exact.
# (tests/test_sass.py checks the instructions; docs/DESIGN.md §2 states the rule.)
STATE_DTYPES = {"fp32": ("", Float32), "bf16": ("_sbf16", BFloat16), "fp16": ("_sf16", Float16),
                "fp8e4m3": ("_sf8e4m3", Float8E4M3FN)}


def state_dtype(name: str):
    """The DSL type of a variant's state_dtype kwarg."""
    return STATE_DTYPES[name][1]


def variants(base: dict[str, dict]) -> dict[str, dict]:
    """A module's variants, each for every pool element type: name + suffix, kwargs + state_dtype."""
    return {name + sfx: {**kw, "state_dtype": dt} for dt, (sfx, _) in STATE_DTYPES.items()
            for name, kw in base.items()}


@cute.jit
def to_f32(x):
    """A pool element as fp32 (no instruction for an fp32 pool)."""
    if cutlass.const_expr(x.dtype == Float32):
        return x
    else:
        return x.to(Float32)


@cute.jit
def from_f32(x: Float32, dtype: cutlass.Constexpr):
    """An fp32 state element in the pool's type (one rounding for a bf16, fp16 or fp8 pool)."""
    if cutlass.const_expr(dtype == Float32):
        return x
    else:
        return x.to(dtype)


@cute.jit
def pool_slot(n: Int32, state_indices: cute.Tensor, use_state_indices: Int32):
    """(run, slot) of sequence n: its state-pool slot (n itself without a pool), and run = 0 for a
    padding entry (a negative slot: the sequence is skipped entirely)."""
    run = Int32(1)
    slot = n
    if use_state_indices != 0:
        slot = state_indices[n]
        if slot < 0:
            run = Int32(0)
    return run, slot


@cute.jit
def segment_chunks(nch: Int32, checkpoint_chunks: Int32) -> Int32:
    """Chunks per segment of a spine's chunk loop: the checkpoint interval, or all of the
    sequence's chunks (at least 1) without checkpoints.  The spines run their chunk loop inside a
    loop over segments and store a checkpoint between segments: inside the chunk loop, the store's
    code slows the one-sequence rows even where it never runs (docs/PERFORMANCE.md)."""
    return cutlass.select_(checkpoint_chunks > 0, checkpoint_chunks, cutlass.max(nch, 1))


@cute.jit
def checkpoint_index_after(i: Int32, nfull: Int32, checkpoint_chunks: Int32, J: Int32) -> Int32:
    """j of the checkpoint after chunk i of a sequence of nfull full chunks (length // CHUNK), or
    -1: arithmetic only."""
    j = Int32(-1)
    if checkpoint_chunks > 0:
        done = i + 1
        if done <= nfull:
            if done % checkpoint_chunks == 0:
                if done // checkpoint_chunks <= J:
                    j = done // checkpoint_chunks - 1
    return j


@cute.jit
def checkpoint_slot_after(i: Int32, nfull: Int32, n: Int32, checkpoints: cute.Tensor, checkpoint_chunks: Int32) -> Int32:
    """The checkpoint_pool slot that takes the state after chunk i of sequence n (nfull full
    chunks), or -1 (a register load of the table entry when there is a checkpoint)."""
    j = checkpoint_index_after(i, nfull, checkpoint_chunks, checkpoints.shape[1])
    slot = Int32(-1)
    if j >= 0:
        slot = checkpoints[n, j]
    return slot


@cute.jit
def copy_checkpoint_slot_after(i: Int32, nfull: Int32, n: Int32, checkpoints: cute.Tensor, checkpoint_chunks: Int32,
                    dst: cute.Tensor):
    """For a loop that must not wait on register loads: a 4-byte cp.async of the table entry
    checkpoint_slot_after(i) would read into dst (one Int32 of shared memory), when chunk i has a checkpoint
    (else nothing is copied and dst is not to be read).  The caller completes it on its own
    mbarrier (cp.async.mbarrier.arrive) and reads dst after that barrier, under checkpoint_index_after."""
    j = checkpoint_index_after(i, nfull, checkpoint_chunks, checkpoints.shape[1])
    if j >= 0:
        atom = cute.make_copy_atom(cpasync.CopyG2SOp(), Int32, num_bits_per_copy=32)
        cute.copy(atom, cute.local_tile(checkpoints[n, None], (1,), (j,)), dst)


@cute.jit
def source(state_in: Int32, has_initial: cute.Tensor, n: Int32) -> Int32:
    """Sequence n's initial-state source, 0, 1 or 2 (load's state_in): state_in itself, or for
    the masked codes 3 and 4, 1 and 2 where has_initial[n] is nonzero and 0 (zeros) where it is 0
    (one byte read per sequence, only with a mask)."""
    src = state_in
    if state_in > 2:
        src = state_in - 2
        if has_initial[n] == 0:
            src = Int32(0)
    return src


@cute.jit
def load(acc: cute.Tensor, coords: cute.Tensor, gS: cute.Tensor, gI: cute.Tensor, state_in: Int32):
    """The initial state into fp32 accumulators: acc[e] = S[coords[e]] from gS (state_in 1) or gI
    (state_in 2), views of one slot's block in the caller's index order; zeros for state_in 0."""
    if state_in == 1:
        for e in cutlass.range_constexpr(cute.size(acc)):
            acc[e] = to_f32(gS[coords[e]])
    elif state_in == 2:
        for e in cutlass.range_constexpr(cute.size(acc)):
            acc[e] = to_f32(gI[coords[e]])
    else:
        acc.fill(0.0)


@cute.jit
def store(acc: cute.Tensor, coords: cute.Tensor, gS: cute.Tensor):
    """fp32 accumulators back to a slot's block (the final state or a checkpoint)."""
    for e in cutlass.range_constexpr(cute.size(acc)):
        gS[coords[e]] = from_f32(acc[e], gS.element_type)
