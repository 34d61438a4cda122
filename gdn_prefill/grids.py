"""Launch geometry shared by the DSL kernels (build time) and explain() (run time).

Every grid is a function of the problem dims only (T, N, heads): nothing here
reads device memory, so a call never synchronises with the host and can be
captured in a CUDA graph.  The DSL launch functions call these same functions
with their dynamic shape values, so the kernels and the plan cannot disagree.
Integer arithmetic is written with + and // so it works on Python ints and on
the DSL's dynamic integers alike.

The planning rules have one home, in C: the extension's one planning call, pyx/gdn_prefill/plan.pxi
_plan_call (docs/PLANNER.md; hooks: _ext._spine_rs_build, _overlap_rule, ...).  This module
keeps gdn_abi.h's constants, the grid and slot functions, and dual_lead_solo (for reports); the
planner's nogil copies of the functions it needs are generated from them (c_formulas_pxi, run by
setup.py at build time: each C copy is its function evaluated on symbols, never written twice).
"""
from __future__ import annotations

from ._abi import CONSTANTS as _C

CHUNK = _C["GDN_CHUNK"]
HEAD_DIM_K = _C["GDN_HEAD_DIM_K"]
HEAD_DIM_V = _C["GDN_HEAD_DIM_V"]
SCALAR_SPINE_VBLOCK = _C["GDN_SCALAR_SPINE_VBLOCK"]
SCALAR_SPINE_THREADS = _C["GDN_SCALAR_SPINE_THREADS"]
WGMMA_SPINE_VBLOCK = _C["GDN_WGMMA_SPINE_VBLOCK"]
RS_SPINE_VBLOCK = _C["GDN_RS_SPINE_VBLOCK"]
MAP_CUT_LOG_DECAY = _C["GDN_MAP_CUT_LOG_DECAY"]       # the segmented plan's cut of a segment's maps
RS_SPINE_PAIR = HEAD_DIM_V // RS_SPINE_VBLOCK          # CTAs of one head: the pair build's cluster
RS_SPINE_DUAL_WG = _C["GDN_RS_SPINE_DUAL_WG"]                 # the dual build: 64 state columns per warpgroup
RS_BUILDS = ("solo", "pair", "dual")        # spine_rs_o's builds, in the order of the launcher's codes (rs_build=)
RS_SOLO_WAVE_NS = _C["GDN_RS_SOLO_WAVE_NS"]                   # a wave of solo / dual CTAs advancing one chunk
RS_DUAL_WAVE_NS = _C["GDN_RS_DUAL_WAVE_NS"]
RS_CTA_NS = _C["GDN_RS_CTA_NS"]                               # a spine CTA's fixed cost (the dual build's lead rule)
COMPOSE_COLS = _C["GDN_COMPOSE_COLS"]                         # state columns per CTA of compose (the segmented plan)
SM_COUNT = _C["GDN_SM_COUNT"]   # H100/H200 SXM; a fixed constant, the device is never queried
MAX_SMEM = 227 * 1024           # dynamic shared memory an sm_90 CTA may opt in to (every kernel's bound)

# The wgmma spine is built with 1 and with 2 warpgroups per CTA (CTA = 128 * warpgroups threads,
# grid z = HEAD_DIM_V / (WGMMA_SPINE_VBLOCK * warpgroups)); the warpgroups of a CTA share one
# TMA copy of the W and K tiles, and the WG=2 build's 2 CTAs of a (sequence, head) form a cluster
# that multicasts it.  WG=1 has the shortest per-chunk chain, WG=2 a quarter of the W/K L2
# traffic.  Rule: WG=2 once the WG=1 grid would exceed GDN_WGMMA_WG1_MAX_CTAS (gdn_abi.h, where
# the crossover measurements are recorded: WG=2 already wins at 256 CTAs, WG=1 at 128).  The
# launcher (pyx/gdn_prefill/plan.pxi, _wgmma_warpgroups) applies it.
WGMMA_SPINE_WG1_MAX_CTAS = _C["GDN_WGMMA_WG1_MAX_CTAS"]


MAX_SEQUENCES = _C["GDN_MAX_SEQUENCES"]
ORDER_MAX_SEQS = _C["GDN_ORDER_MAX_SEQS"]   # the fused plan's ranked sequence order (workspace `order`)
SINGLE_RANK_MAX_SEQS = 64              # the single plan ranks its sequences itself up to this many (one warp)
SLOT_SEARCH_ROUNDS = 4                 # 32 candidates per round (cute_kernels/slots.py)
assert 32 ** SLOT_SEARCH_ROUNDS == MAX_SEQUENCES
# The single plan's fp16 inverse (cute_kernels/inverse_f16.py, its range check): a chunk takes it
# only if every row m < L has 0 <= beta_m <= F16_INVERSE_BETA_MAX, g_m <= 0 and ||k_m||^2 <=
# F16_INVERSE_KNORM2_MAX (the key as the kernel uses it); then no fp16 value exceeds 1000
# (docs/DESIGN.md, the fp16 inverse).  Any other chunk is inverted in fp32.
F16_INVERSE_BETA_MAX = 2.0
F16_INVERSE_KNORM2_MAX = 1.0 + 2.0 ** -6      # bf16 keys normalised outside: within ~2^-8 of 1


def first_slot(bos, n):
    """Chunk slot of sequence n's first chunk (bos = cu_seqlens[n]); its chunk i is first_slot + i.
    Increasing in n, and a sequence's slots end before the next one's (cute_kernels/slots.py)."""
    return bos // CHUNK + n


def chunk_slots(T, N):
    """Slots of the per-chunk workspace (h) and grids: first_slot(n) + i < floor(T / C) + N for
    every chunk of N packed sequences of T tokens in all, so ceil(T / C) + N suffice without
    reading cu_seqlens; slots no chunk maps to are idle."""
    return (T + CHUNK - 1) // CHUNK + N


def first_segment_slot(bos, n, seg_chunks):
    """Segment slot of sequence n's first segment in the segmented plan (segments of seg_chunks
    chunks; its segment j is first_segment_slot + j).  Strictly increasing in n, and a sequence's
    segment slots end before the next one's: first_slot(n) // seg_chunks + n is the chunk-slot
    construction applied to chunk slots (cute_kernels/slots.py)."""
    return first_slot(bos, n) // seg_chunks + n


def segment_slots(T, N, seg_chunks):
    """Segment slots that cover every segment of N packed sequences of T tokens in all: the last
    chunk slot is below floor(T / C) + N, so the last segment slot is below
    (floor(T / C) + N) // seg_chunks + N, whatever the lengths."""
    return (T // CHUNK + N) // seg_chunks + N


RECOMPUTE_WU_THREADS = 256
FWD_O_THREADS = 256


def grid_recompute_wu(T, N, Hv):
    """One CTA per (chunk slot, value head), the head fastest: block x = slot * Hv + hv.  The Hv
    CTAs of a chunk run side by side, so the q/k rows a key head shares with its Hv/Hk value
    heads are read from HBM once and from L2 after (slot-fastest, they were a wave apart)."""
    return grid_recompute_wu_slots(chunk_slots(T, N), Hv)


def grid_recompute_wu_slots(slots, Hv):
    """grid_recompute_wu from the count of chunk slots (the kernel's launch takes it from the
    workspace's ready rows)."""
    return (slots * Hv, 1, 1)


def grid_recompute_wu_workers(wu_ctas):
    """The overlap plan's stage 1 (recompute_wu_workers): wu_ctas CTAs, one per SM the spine leaves,
    each running chunk workers over the (slot, head) items (cute_kernels/recompute_wu.py)."""
    return (wu_ctas, 1, 1)


def grid_spine_scalar(T, N, Hv):
    return (N, Hv, HEAD_DIM_V // SCALAR_SPINE_VBLOCK)


def grid_spine_wgmma(T, N, Hv, warpgroups=1):
    return (N, Hv, HEAD_DIM_V // (WGMMA_SPINE_VBLOCK * warpgroups))


def grid_spine_rs(T, N, Hv, dual=False):
    """spine_rs (the state in registers).  Solo and pair: one CTA per (sequence, value head, 64
    state columns), block x = (rank * Hv + hv) * (V / 64) + vb with the sequences ranked longest
    first (handoff.longest_first): the CTAs that read one head's Tu, K, q and pqk tiles (and the
    heads that share a key head's K and q) run side by side, so those tiles come from DRAM once and
    from L2 after (with n slowest they were 256 CTAs apart at B=8: 1.7 GB read where 1.0 GB is the
    data), and a long sequence starts in the first wave.  Dual: one CTA per
    (sequence, value head) and Hv more: the longest sequence owns blocks [0, 2 Hv), which run it
    one chain per CTA where its chain is the call's critical path, else half of them run it as the
    others and half exit (spine_rs._dual_block)."""
    if dual:
        return ((N + 1) * Hv, 1, 1)
    return (N * Hv * (HEAD_DIM_V // RS_SPINE_VBLOCK), 1, 1)


def grid_spine_rs_segments(T, N, Hv, seg_chunks, subs=2):
    """spine_rs's segmented roles: one CTA per (segment slot, value head, sub) with sub fastest, subs
    of them: the map (MAPS: A, B; dual CTAs of 128 columns), the 64-column half of the state (the
    solo SEGMENT build), or one CTA of both halves (the dual SEGMENT build, subs = 1); slots no
    segment maps to exit at once (spine_rs._segment_block)."""
    return (segment_slots(T, N, seg_chunks) * Hv * subs, 1, 1)


def grid_compose(N, Hv):
    """compose.py: one CTA per (sequence, value head, COMPOSE_COLS state columns)."""
    return (N * Hv * (HEAD_DIM_V // COMPOSE_COLS), 1, 1)


def dual_lead_solo(lengths, Hv, sm_count=SM_COUNT):
    """True where the dual build runs the longest of these sequences one chain per CTA on 2 Hv SMs
    (the rest dual on the others) rather than all of them dual: the one Python copy of the rule its
    kernel evaluates on cu_seqlens (spine_rs._lead_solo; constants in gdn_abi.h).  For reports
    (bench_spine --rs-skew) and tests; the launcher never needs it.  Beyond ORDER_MAX_SEQS
    sequences the kernel reads no lengths and runs them all dual."""
    if len(lengths) > ORDER_MAX_SEQS:
        return False
    chunks = [-(-n // CHUNK) for n in lengths]
    lead, total, busy = max(chunks), sum(chunks), sum(1 for c in chunks if c > 0)
    all_dual = max(lead * RS_DUAL_WAVE_NS + RS_CTA_NS,
                   (total * RS_DUAL_WAVE_NS + busy * RS_CTA_NS) * Hv / sm_count)
    if 2 * Hv >= sm_count:
        return False
    split = max(lead * RS_SOLO_WAVE_NS + RS_CTA_NS,
                ((total - lead) * RS_DUAL_WAVE_NS + (busy - 1) * RS_CTA_NS) * Hv / (sm_count - 2 * Hv))
    return split < all_dual


def grid_single(T, N, Hv):
    """single.py (the single plan): one CTA per (value head, sequence)."""
    return (Hv, N, 1)


def grid_fwd_o(T, N, Hv):
    return (chunk_slots(T, N), Hv, 1)


# ----------------------------------------------------------------------------- the planner's C copies
class _CExpr:
    """An integer expression in Cython form: the functions above evaluated on these symbols (they
    use only +, -, * and // on integers) give their formula, for the planner's nogil copies."""

    def __init__(self, text):
        self.text = text

    def _op(self, other, op, reverse=False):
        o = other.text if isinstance(other, _CExpr) else str(int(other))
        a, b = (o, self.text) if reverse else (self.text, o)
        return _CExpr(f"({a} {op} {b})")

    def __add__(self, o):
        return self._op(o, "+")

    def __radd__(self, o):
        return self._op(o, "+", True)

    def __sub__(self, o):
        return self._op(o, "-")

    def __rsub__(self, o):
        return self._op(o, "-", True)

    def __mul__(self, o):
        return self._op(o, "*")

    def __rmul__(self, o):
        return self._op(o, "*", True)

    def __floordiv__(self, o):
        return self._op(o, "//")

    def __rfloordiv__(self, o):
        return self._op(o, "//", True)


def _c_text(x):
    return x.text if isinstance(x, _CExpr) else str(int(x))


def c_formulas_pxi() -> str:
    """The planner's nogil copies of the functions it needs (pyx/gdn_prefill/plan.pxi includes the
    result as plan_formulas.pxi, which setup.py generates): each C function returns its Python
    function's formula, evaluated on symbols.  Every value they see is non-negative, where C's and
    Python's integer division agree."""
    T, N, Hv, sc = _CExpr("T"), _CExpr("N"), _CExpr("Hv"), _CExpr("sc")
    wg1 = grid_spine_wgmma(T, N, Hv, 1)
    funcs = (
        ("_chunk_slots", "T, N", chunk_slots(T, N), "chunk_slots(T, N)"),
        ("_segment_slots", "T, N, sc", segment_slots(T, N, sc), "segment_slots(T, N, sc)"),
        ("_rs_ctas", "N, Hv", grid_spine_rs(T, N, Hv)[0], "grid_spine_rs(T, N, Hv)[0]: the solo and pair builds' CTAs"),
        ("_wgmma_wg1_ctas", "N, Hv", wg1[0] * wg1[1] * wg1[2],
         "grid_spine_wgmma(T, N, Hv, 1)'s CTAs: the 1-warpgroup build's"),
    )
    out = ["# Generated at build time from gdn_prefill/grids.py (c_formulas_pxi): do not edit.  The planner's",
           "# nogil copies of grids.py's functions, each its Python function evaluated on symbols."]
    for name, params, expr, doc in funcs:
        args = ", ".join(f"int64_t {a.strip()}" for a in params.split(","))
        out += ["", "", f"cdef inline int64_t {name}({args}) noexcept nogil:",
                f'    """gdn_prefill.grids.{doc}."""', f"    return {_c_text(expr)}"]
    return "\n".join(out) + "\n"
