"""The fp64 oracle for the Gated DeltaNet prefill (docs/DESIGN.md §1), in pure torch.

Every kernel is judged against this module, so it is written for clarity, not speed,
and it imports nothing but torch (no DSL, no extension).  All arithmetic is float64,
on torch's default device (the CPU; GPU tests wrap large checks in `with torch.device("cuda")`).

Inputs are in the library's packed form (docs/DESIGN.md §2):

    q, k  [T, Hk, K]      v  [T, Hv, V]      g, beta  [T, Hv]
    cu_seqlens  [N+1]      (None: one sequence of T tokens)
    state       [P, Hv, K, V] ("kv") or [P, Hv, V, K] ("vk"), or None
    state_indices [N]      (None: P == N and sequence n uses slot n; -1: padding)

Entry points
------------
recurrent(...)            token-by-token recurrence (the definition).
chunked(...)              the chunked algorithm (C = 64), same result.
chunked_intermediates(...) every stage of the chunked algorithm in the workspace
                          layout of include/gdn/gdn_abi.h (for per-stage GPU tests).
make_inputs(...)          deterministic, realistic random inputs.
rel_err(x, ref)           ||x - ref||_F / ||ref||_F over the finite elements of ref.
round_to_pool(x, dtype)   an fp32 state as the kernels write it into a pool of `dtype`.
pool_rounding_bound(x, dtype)  the most that rounding can move x, relative (Frobenius).

Conventions of the results
--------------------------
* ``o`` is float64 [T, Hv, V].  Rows the kernel must not write (tokens of padding
  sequences, tokens past cu_seqlens[-1]) are NaN.
* ``new_state`` is float64.  With a state it has the state's layout and shape: the
  whole pool, with the slots of real sequences replaced by their final states and
  every other slot copied through.  With ``state=None`` it holds the final state of
  every sequence (started from zero), [N, Hv, K, V] for "kv" or [N, Hv, V, K] for
  "vk"; rows of padding sequences are NaN.
* A zero-length sequence produces no rows; its final state is its initial state.

For long sequences (thousands of tokens, K = V = 128) prefer ``chunked``: the
recurrence costs a few python-level torch ops per token.  On a shared CPU,
``torch.set_num_threads(1)`` around small problems is often 10x faster (tiny ops).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ._abi import CHUNK

__all__ = [
    "CHUNK",
    "L2NORM_EPS",
    "recurrent",
    "chunked",
    "chunked_intermediates",
    "first_slot",
    "make_inputs",
    "rel_err",
    "POOL_DTYPES",
    "round_to_pool",
    "pool_rounding_bound",
]

L2NORM_EPS = 1e-6
_F64 = torch.float64


# --------------------------------------------------------------------------------------
# argument handling
# --------------------------------------------------------------------------------------

@dataclass
class _Problem:
    q: torch.Tensor            # [T, Hv, K] float64, l2-normalised if asked, expanded to Hv heads
    k: torch.Tensor            # [T, Hv, K]
    v: torch.Tensor            # [T, Hv, V]
    g: torch.Tensor            # [T, Hv]
    beta: torch.Tensor         # [T, Hv]
    rq: torch.Tensor           # [T, Hv] inverse norms (or ones)
    rk: torch.Tensor           # [T, Hv]
    cu: list[int]              # N + 1 offsets
    slots: list[int]           # per sequence: the pool slot, or -1 (padding)
    pool: torch.Tensor         # [P, Hv, K, V] float64 working copy (always KV orientation)
    has_state: bool
    layout: str
    scale: float
    ck_every: int = 0          # checkpoint interval in tokens (0: none)
    ck: list[list[int]] | None = None  # per sequence: its row of the checkpoint table (pool slots, -1: none)

    def checkpoint_slot(self, n: int, done: int, length: int) -> int:
        """The pool slot that takes sequence n's state after its first `done` tokens, or -1: a
        multiple of the interval at or before the sequence's end (FlashInfer's rule: length // c of
        them), with a table entry >= 0."""
        if not self.ck_every or done % self.ck_every or done > length:
            return -1
        j = done // self.ck_every - 1
        row = self.ck[n]
        return row[j] if j < len(row) else -1

    @property
    def T(self) -> int:
        return self.v.shape[0]

    @property
    def N(self) -> int:
        return len(self.cu) - 1

    @property
    def Hv(self) -> int:
        return self.v.shape[1]


def _f64(x: torch.Tensor) -> torch.Tensor:
    # The oracle computes on torch's default device (the CPU unless a caller wraps it in
    # `with torch.device("cuda"):`, which GPU tests do to check large problems quickly).
    return x.detach().to(device=torch.get_default_device(), dtype=_F64)


def _int_list(x, name: str) -> list[int]:
    if isinstance(x, torch.Tensor):
        if x.dim() != 1:
            raise ValueError(f"{name}: expected a 1-D tensor, got shape {tuple(x.shape)}")
        if x.dtype.is_floating_point or x.dtype.is_complex:
            raise TypeError(f"{name}: expected an integer tensor, got {x.dtype}")
        return [int(i) for i in x.detach().cpu().tolist()]
    return [int(i) for i in x]


def _l2norm_inv(x: torch.Tensor) -> torch.Tensor:
    """rsqrt(sum x^2 + eps) over the last dim, in x's dtype (the oracle's float64; the kernels'
    formula, which the benchmarks also use to pre-norm FlashInfer's q and k in float32)."""
    return torch.rsqrt((x * x).sum(-1) + L2NORM_EPS)


def _prepare(q, k, v, g, beta, cu_seqlens, state, state_indices, state_layout, scale,
             use_qk_l2norm, checkpoint_every=None, checkpoints=None) -> _Problem:
    if state_layout not in ("kv", "vk"):
        raise ValueError(f"state_layout: expected 'kv' or 'vk', got {state_layout!r}")
    if q.dim() != 3 or k.dim() != 3 or v.dim() != 3:
        raise ValueError("q, k, v: expected 3-D [T, H, D] tensors")
    if q.shape != k.shape:
        raise ValueError(f"q {tuple(q.shape)} and k {tuple(k.shape)} must have the same shape")
    T, Hk, K = k.shape
    Tv, Hv, V = v.shape
    if Tv != T:
        raise ValueError(f"v: {Tv} tokens, q/k have {T}")
    if Hk < 1 or Hv % Hk != 0:
        raise ValueError(f"Hv={Hv} must be a positive multiple of Hk={Hk}")
    for name, x in (("g", g), ("beta", beta)):
        if tuple(x.shape) != (T, Hv):
            raise ValueError(f"{name}: expected shape {(T, Hv)}, got {tuple(x.shape)}")

    cu = [0, T] if cu_seqlens is None else _int_list(cu_seqlens, "cu_seqlens")
    if len(cu) < 1:
        raise ValueError("cu_seqlens: needs N + 1 >= 1 entries")
    if cu[0] < 0 or cu[-1] > T or any(b < a for a, b in zip(cu, cu[1:])):
        raise ValueError(f"cu_seqlens: must be non-decreasing within [0, {T}], got {cu}")
    N = len(cu) - 1

    if state_indices is None:
        idx = None
    else:
        idx = _int_list(state_indices, "state_indices")
        if len(idx) != N:
            raise ValueError(f"state_indices: expected {N} entries, got {len(idx)}")

    if state is not None:
        if state.dim() != 4:
            raise ValueError("state: expected a 4-D tensor [P, Hv, K, V] / [P, Hv, V, K]")
        want = (Hv, K, V) if state_layout == "kv" else (Hv, V, K)
        if tuple(state.shape[1:]) != want:
            raise ValueError(f"state ({state_layout}): expected [P, {want[0]}, {want[1]}, {want[2]}],"
                             f" got {tuple(state.shape)}")
        P = state.shape[0]
        pool = _f64(state).clone()
        if state_layout == "vk":
            pool = pool.transpose(-1, -2)
        pool = pool.contiguous()
        if idx is None:
            if P != N:
                raise ValueError(f"state: without state_indices P must equal N={N}, got P={P}")
            slots = list(range(N))
        else:
            slots = idx
    else:
        P = N
        pool = torch.zeros(N, Hv, K, V, dtype=_F64)
        slots = list(range(N)) if idx is None else [n if i >= 0 else -1 for n, i in enumerate(idx)]
        if idx is not None and any(i < -1 for i in idx):
            raise ValueError(f"state_indices: entries must be >= -1, got {idx}")

    if state is not None and idx is not None:
        live = [i for i in slots if i != -1]
        if any(i < -1 or i >= P for i in slots):
            raise ValueError(f"state_indices: entries must be -1 or in [0, {P}), got {slots}")
        if len(set(live)) != len(live):
            raise ValueError(f"state_indices: a slot is used by two sequences: {slots}")

    ck = None
    if (checkpoint_every is None) != (checkpoints is None):
        raise ValueError("checkpoint_every and checkpoints: give both or neither")
    if checkpoints is not None:
        if state is None:
            raise ValueError("checkpoints: need a state pool to write into")
        if checkpoint_every <= 0 or checkpoint_every % CHUNK:
            raise ValueError(f"checkpoint_every: must be a positive multiple of {CHUNK}, got {checkpoint_every}")
        ck = [[int(x) for x in row] for row in checkpoints.detach().cpu().tolist()]
        if len(ck) != N:
            raise ValueError(f"checkpoints: expected {N} rows, got {len(ck)}")
        if any(not (-1 <= x < P) for row in ck for x in row):
            raise ValueError(f"checkpoints: entries must be -1 or in [0, {P})")

    G = Hv // Hk
    head = torch.arange(Hv) // G
    q64, k64 = _f64(q), _f64(k)
    if use_qk_l2norm:
        rq, rk = _l2norm_inv(q64), _l2norm_inv(k64)      # [T, Hk]
        q64 = q64 * rq[..., None]
        k64 = k64 * rk[..., None]
    else:
        rq = torch.ones(T, Hk, dtype=_F64)
        rk = torch.ones(T, Hk, dtype=_F64)

    return _Problem(
        q=q64[:, head].contiguous(), k=k64[:, head].contiguous(), v=_f64(v).contiguous(),
        g=_f64(g).contiguous(), beta=_f64(beta).contiguous(),
        rq=rq[:, head].contiguous(), rk=rk[:, head].contiguous(),
        cu=cu, slots=slots, pool=pool, has_state=state is not None, layout=state_layout,
        scale=float(K ** -0.5 if scale is None else scale), ck_every=checkpoint_every or 0, ck=ck,
    )


def _final_state(p: _Problem) -> torch.Tensor:
    """The pool (or per-sequence finals) in the caller's layout."""
    out = p.pool
    if not p.has_state:
        out = out.clone()
        for n, s in enumerate(p.slots):
            if s == -1:
                out[n] = float("nan")
    if p.layout == "vk":
        out = out.transpose(-1, -2)
    return out.contiguous()


# --------------------------------------------------------------------------------------
# the recurrence (the definition)
# --------------------------------------------------------------------------------------

def recurrent(q, k, v, g, beta, *, cu_seqlens=None, state=None, state_indices=None,
              state_layout="kv", scale=None, use_qk_l2norm=False, checkpoint_every=None, checkpoints=None):
    """Token-by-token Gated DeltaNet recurrence in float64.  Returns ``(o, new_state)``.

        S_t = e^{g_t} S_{t-1} + k_t (beta_t (v_t - e^{g_t} S_{t-1}^T k_t))^T
        o_t = scale * S_t^T q_t

    With checkpoint_every = c and checkpoints [N, J] (prefill()'s contract), new_state's slot
    checkpoints[n, j] holds S after token (j + 1) c of sequence n, for (j + 1) c <= its length.
    """
    p = _prepare(q, k, v, g, beta, cu_seqlens, state, state_indices, state_layout, scale,
                 use_qk_l2norm, checkpoint_every, checkpoints)
    o = torch.full((p.T, p.Hv, p.v.shape[2]), float("nan"), dtype=_F64)
    for n in range(p.N):
        slot = p.slots[n]
        if slot == -1:
            continue
        S = p.pool[slot].clone()                                 # [Hv, K, V]
        for t in range(p.cu[n], p.cu[n + 1]):
            kt, qt, vt = p.k[t], p.q[t], p.v[t]                  # [Hv, K], [Hv, K], [Hv, V]
            S = S * torch.exp(p.g[t])[:, None, None]
            pred = torch.einsum("hkv,hk->hv", S, kt)             # (decayed S)^T k
            delta = p.beta[t][:, None] * (vt - pred)
            S = S + kt[:, :, None] * delta[:, None, :]
            o[t] = p.scale * torch.einsum("hkv,hk->hv", S, qt)
            ck = p.checkpoint_slot(n, t + 1 - p.cu[n], p.cu[n + 1] - p.cu[n])
            if ck >= 0:
                p.pool[ck] = S
        p.pool[slot] = S
    return o, _final_state(p)


# --------------------------------------------------------------------------------------
# the chunked algorithm
# --------------------------------------------------------------------------------------

def _chunk_stage1(k, v, g, beta):
    """One chunk, all heads: k [Hv,L,K], v [Hv,L,V], g/beta [Hv,L] -> gcum, w, u, decay, tu.

    decay[h, i, j] = exp(gcum_i - gcum_j) for i >= j, else 0; tu = (I + A)^-1, the fused plan's
    stage-1 output (u = tu diag(beta) v, w = tu diag(beta exp(gcum)) k: its spine puts beta on Y).
    """
    L = g.shape[-1]
    gcum = torch.cumsum(g, dim=-1)
    diff = gcum[:, :, None] - gcum[:, None, :]
    lower_incl = torch.ones(L, L, dtype=torch.bool).tril()
    decay = torch.where(lower_incl, diff, torch.full_like(diff, -math.inf)).exp()
    strict = torch.ones(L, L, dtype=torch.bool).tril(-1)
    A = (beta[:, :, None] * (k @ k.transpose(-1, -2)) * decay).masked_fill(~strict, 0.0)
    eye = torch.eye(L, dtype=_F64).expand_as(A)
    Tm = torch.linalg.solve_triangular(eye + A, eye, upper=False, unitriangular=True)
    w = Tm @ ((beta * gcum.exp())[..., None] * k)
    u = Tm @ (beta[..., None] * v)
    return gcum, w, u, decay, Tm


def _chunk_stage2(S, k, gcum, w, u):
    """The spine for one chunk: S [Hv,K,V] at entry -> (vnew, S at exit)."""
    vnew = u - w @ S
    last = gcum[:, -1]
    kd = k * (last[:, None] - gcum).exp()[..., None]             # k_j e^{gcum_last - gcum_j}
    S = last.exp()[:, None, None] * S + kd.transpose(-1, -2) @ vnew
    return vnew, S


def _chunk_attention(q, k, decay, scale):
    """The in-chunk attention P_ij = scale (q_i . k_j) exp(gcum_i - gcum_j), j <= i (else 0):
    the workspace `pqk` of the fused-output plan."""
    return scale * ((q @ k.transpose(-1, -2)) * decay)                # decay is 0 above the diagonal


def _chunk_stage3(S, q, k, gcum, decay, vnew, scale):
    """fwd_o for one chunk: S = state at chunk entry."""
    inter = gcum.exp()[..., None] * (q @ S)
    return scale * inter + _chunk_attention(q, k, decay, scale) @ vnew


def first_slot(cu: list[int], n: int) -> int:
    """The chunk slot of sequence n's first chunk (gdn_abi.h: cu_seqlens[n] / 64 + n); its chunk
    i is slot first_slot + i.  Mirrors grids.first_slot; kept here so the oracle imports nothing
    from the package."""
    return cu[n] // CHUNK + n


def _run_chunked(p: _Problem, keep: bool):
    """The one implementation of the chunked math; updates p.pool in place.

    Returns (o, workspace) where workspace is None unless ``keep``.
    """
    T, Hv, K, V = p.T, p.Hv, p.k.shape[2], p.v.shape[2]
    nan = float("nan")
    o = torch.full((T, Hv, V), nan, dtype=_F64)
    ws = None
    if keep:
        CB = (T + CHUNK - 1) // CHUNK + p.N
        ws = dict(
            gcum=torch.full((T, Hv), nan, dtype=_F64),
            rq=torch.full((T, Hv), nan, dtype=_F64),
            rk=torch.full((T, Hv), nan, dtype=_F64),
            w=torch.full((T, Hv, K), nan, dtype=_F64),
            u=torch.full((T, Hv, V), nan, dtype=_F64),
            vnew=torch.full((T, Hv, V), nan, dtype=_F64),
            h=torch.full((CB, Hv, K, V), nan, dtype=_F64),
            pqk=torch.full((T, Hv, CHUNK), nan, dtype=_F64),
            tu=torch.full((T, Hv, CHUNK), nan, dtype=_F64),
        )
    # token-major [T, Hv, D] -> head-major per chunk [Hv, L, D]
    for n in range(p.N):
        slot = p.slots[n]
        if slot == -1:
            continue
        S = p.pool[slot].clone()
        bos, eos = p.cu[n], p.cu[n + 1]
        for ci, t0 in enumerate(range(bos, eos, CHUNK)):
            t1 = min(t0 + CHUNK, eos)
            qc = p.q[t0:t1].transpose(0, 1)
            kc = p.k[t0:t1].transpose(0, 1)
            vc = p.v[t0:t1].transpose(0, 1)
            gc = p.g[t0:t1].transpose(0, 1)
            bc = p.beta[t0:t1].transpose(0, 1)
            gcum, w, u, decay, tu = _chunk_stage1(kc, vc, gc, bc)
            if keep:
                c = first_slot(p.cu, n) + ci
                assert c < CB
                ws["h"][c] = S
            S_entry = S
            vnew, S = _chunk_stage2(S_entry, kc, gcum, w, u)
            o[t0:t1] = _chunk_stage3(S_entry, qc, kc, gcum, decay, vnew, p.scale).transpose(0, 1)
            ck = p.checkpoint_slot(n, t1 - bos, eos - bos)
            if ck >= 0:
                p.pool[ck] = S
            if keep:
                ws["gcum"][t0:t1] = gcum.transpose(0, 1)
                ws["w"][t0:t1] = w.transpose(0, 1)
                ws["u"][t0:t1] = u.transpose(0, 1)
                ws["vnew"][t0:t1] = vnew.transpose(0, 1)
                att = torch.zeros(Hv, t1 - t0, CHUNK, dtype=_F64)
                att[:, :, :t1 - t0] = _chunk_attention(qc, kc, decay, p.scale)
                ws["pqk"][t0:t1] = att.transpose(0, 1)
                att[:, :, :t1 - t0] = tu
                ws["tu"][t0:t1] = att.transpose(0, 1)
        if keep:
            ws["rq"][bos:eos] = p.rq[bos:eos]
            ws["rk"][bos:eos] = p.rk[bos:eos]
        p.pool[slot] = S
    return o, ws


def chunked(q, k, v, g, beta, *, cu_seqlens=None, state=None, state_indices=None,
            state_layout="kv", scale=None, use_qk_l2norm=False, checkpoint_every=None, checkpoints=None):
    """The chunked algorithm of docs/DESIGN.md §1 (C = 64) in float64.  Returns ``(o, new_state)``,
    equal to :func:`recurrent` up to float64 rounding (checkpoints as there)."""
    p = _prepare(q, k, v, g, beta, cu_seqlens, state, state_indices, state_layout, scale,
                 use_qk_l2norm, checkpoint_every, checkpoints)
    o, _ = _run_chunked(p, keep=False)
    return o, _final_state(p)


def chunked_intermediates(q, k, v, g, beta, *, cu_seqlens=None, state=None, state_indices=None,
                          state_layout="kv", use_qk_l2norm=False, scale=None):
    """Every stage of the chunked algorithm, in the workspace layout of gdn_abi.h.

    Returns a dict (CB = ceil(T/64) + N chunk slots; chunk i of sequence n in slot
    first_slot(cu, n) + i):
      gcum, rq, rk  [T, Hv]        float64 (rq/rk: 1/sqrt(sum x^2 + 1e-6), or 1.0)
      w [T, Hv, K], u [T, Hv, V], vnew [T, Hv, V]   float64
      h [CB, Hv, K, V]             float64, state at chunk entry, always S[k, v] orientation
      pqk [T, Hv, 64]              float64, row t of the in-chunk attention of t's chunk
                                   (columns past the chunk's length: 0)
      tu [T, Hv, 64]               float64, row t of (I + A)^-1 of t's chunk (the fused plan's
                                   stage 1; columns past the chunk's length: 0)
      o [T, Hv, V], new_state      as returned by :func:`chunked`
    Rows of padding sequences, of tokens outside every sequence, and unused h slots
    (including the slots of padding sequences) are NaN.
    """
    p = _prepare(q, k, v, g, beta, cu_seqlens, state, state_indices, state_layout, scale,
                 use_qk_l2norm)
    o, ws = _run_chunked(p, keep=True)
    ws["o"] = o
    ws["new_state"] = _final_state(p)
    return ws


# --------------------------------------------------------------------------------------
# helpers for tests
# --------------------------------------------------------------------------------------

def rel_err(x: torch.Tensor, ref: torch.Tensor) -> float:
    """||x - ref||_F / ||ref||_F in float64 over the elements where ref is finite.

    NaN in ``x`` where ``ref`` is finite gives NaN (a failure for any ``<=`` check).
    If ref is all zero there: 0.0 when x matches exactly, else inf.
    """
    x = _f64(x)
    ref = _f64(ref)
    if x.shape != ref.shape:
        raise ValueError(f"rel_err: shapes differ, {tuple(x.shape)} vs {tuple(ref.shape)}")
    mask = torch.isfinite(ref)
    d = torch.linalg.vector_norm(x[mask] - ref[mask]).item()
    r = torch.linalg.vector_norm(ref[mask]).item()
    if r == 0.0:
        return 0.0 if d == 0.0 else (d if math.isnan(d) else math.inf)
    return d / r


# The state pools' element types (prefill() takes a pool of each; docs/DESIGN.md §2): name ->
# (torch dtype, unit roundoff u = 2^-p for p significand bits, half the smallest subnormal spacing,
# largest finite value).  Round to nearest even moves a value x of the normal range by at most
# u |x|, a subnormal one by at most the half spacing.
POOL_DTYPES = {
    "fp32": (torch.float32, 2.0 ** -24, 2.0 ** -150, torch.finfo(torch.float32).max),
    "bf16": (torch.bfloat16, 2.0 ** -8, 2.0 ** -134, torch.finfo(torch.bfloat16).max),
    "fp16": (torch.float16, 2.0 ** -11, 2.0 ** -25, torch.finfo(torch.float16).max),
    "fp8e4m3": (torch.float8_e4m3fn, 2.0 ** -4, 2.0 ** -10, 448.0),
}


def _pool_entry(dtype):
    for entry in POOL_DTYPES.values():
        if entry[0] == dtype:
            return entry
    raise ValueError(f"{dtype}: not a state pool type ({', '.join(str(e[0]) for e in POOL_DTYPES.values())})")


def round_to_pool(x: torch.Tensor, dtype) -> torch.Tensor:
    """x (fp32: a state as the kernels hold it) in a pool of `dtype`, rounded as the kernels write
    it (cute_kernels/state_pool.py from_f32): round to nearest even; float8_e4m3fn saturates, a
    magnitude beyond 448 (infinity included) becomes +-448 and NaN stays NaN (sm_90a's
    F2FP.SATFINITE.E4M3.F32: made explicit here, not left to torch's conversion); float16
    overflows to +-inf as torch's conversion does."""
    _pool_entry(dtype)
    x = x.float()
    if dtype == torch.float8_e4m3fn:
        x = x.clamp(-448.0, 448.0)
    return x.to(dtype)


def pool_rounding_bound(x: torch.Tensor, dtype) -> float:
    """A bound on rel_err(round_to_pool(x, dtype), x) = ||round(x) - x||_F / ||x||_F from the pool
    type's rounding alone: each element moves by at most max(u |x|, h) (u the unit roundoff, h
    half the smallest subnormal spacing: POOL_DTYPES).  x must be finite and within the type's
    range (a saturated or overflowed element has no such bound: ValueError)."""
    _, u, h, top = _pool_entry(dtype)
    a = _f64(x).abs()
    if not bool(torch.isfinite(a).all()) or bool((a > top).any()):
        raise ValueError(f"pool_rounding_bound: x has elements beyond the finite range of {dtype} (+-{top})")
    r = torch.linalg.vector_norm(a).item()
    d = torch.linalg.vector_norm(torch.clamp_min(a * u, h)).item()
    return 0.0 if r == 0.0 else d / r


def checkpoints_in(length: int, every: int) -> int:
    """How many checkpoints a sequence of `length` tokens has at interval `every`: the multiples
    of `every` up to its length (prefill()'s contract, FlashInfer's rule)."""
    return max(0, length // every)


def checkpoint_table(cu_seqlens, state_indices, P: int, every: int, *, skip_every: int = 0, extra_cols: int = 0,
                     device=None) -> torch.Tensor:
    """A checkpoint table for prefill(checkpoint_every=every, checkpoints=...): int32 [N, J] whose
    entries are pool slots no sequence of the call uses (state_indices' live slots excluded), one
    per checkpoint each sequence has (its multiples of `every` up to its length), J the most any
    sequence has plus extra_cols (at least 1); -1 past a sequence's own checkpoints, for every
    skip_every-th checkpoint (skip_every > 0), and once the free slots run out."""
    cu = _int_list(cu_seqlens, "cu_seqlens")
    live = {i for i in _int_list(state_indices, "state_indices") if i >= 0}
    free = iter([s for s in range(P) if s not in live])
    counts = [checkpoints_in(b - a, every) for a, b in zip(cu, cu[1:])]
    J = max(counts + [0]) + extra_cols
    table = torch.full((len(counts), max(J, 1)), -1, dtype=torch.int32)
    k = 0
    for n, m in enumerate(counts):
        for j in range(m):
            k += 1
            if skip_every and k % skip_every == 0:
                continue
            table[n, j] = next(free, -1)
    return table if device is None else table.to(device)


def make_inputs(T_list, Hk, Hv, K=128, V=128, *, seed, dtype=torch.bfloat16, device="cpu",
                state="none", state_layout="kv", pad_every=0, extra_slots=None,
                gate_bias=3.0, gate_std=1.5, l2norm_inputs=False, packed=False,
                beta_dtype=torch.float32):
    """Deterministic random inputs for one packed prefill call.

    T_list        lengths of the N sequences (0 allowed); T = sum(T_list).
    q, k, v       randn, cast to ``dtype``.  ``l2norm_inputs``: q and k are unit-normed
                  before the cast (use with use_qk_l2norm=False so the delta rule stays
                  contractive; raw randn k has |k|^2 ~ K).
    g             log-space gate, fp32: logsigmoid(gate_bias + gate_std * randn)
                  (default: median decay e^-0.05 per token, heavy tail to ~e^-2,
                  close to Qwen3-Next's -A * softplus(a + dt_bias)).
    beta          sigmoid(randn), ``beta_dtype``.
    state         "none"; "dense": [N, Hv, K, V] (or [N, Hv, V, K] for "vk") fp32 randn
                  * K^-1/2; "pool": P = N + extra_slots slots (default N // 2 + 2) and
                  state_indices = a random choice of N distinct slots, in random order.
    pad_every     (pool only) sequences n with n % pad_every == pad_every - 1 get index -1.
    packed        q, k, v are views into one [T, (2 Hk K + Hv V)] buffer (like a fused qkv
                  projection) and g, beta interleaved views of one [T, 2 Hv] buffer
                  (beta then has g's dtype, fp32).  Values equal those of packed=False.

    Returns a dict with keys q, k, v, g, beta, cu_seqlens (int32), state, state_indices
    (int32 or None), state_layout -- splattable into recurrent / chunked.
    """
    if state not in ("none", "dense", "pool"):
        raise ValueError(f"state: expected 'none', 'dense' or 'pool', got {state!r}")
    if pad_every and state != "pool":
        raise ValueError("pad_every needs state='pool' (padding is marked by state_indices == -1)")
    if state_layout not in ("kv", "vk"):
        raise ValueError(f"state_layout: expected 'kv' or 'vk', got {state_layout!r}")
    T_list = [int(t) for t in T_list]
    N, T = len(T_list), sum(T_list)
    gen = torch.Generator().manual_seed(int(seed))

    q = torch.randn(T, Hk, K, generator=gen, dtype=torch.float32)
    k = torch.randn(T, Hk, K, generator=gen, dtype=torch.float32)
    v = torch.randn(T, Hv, V, generator=gen, dtype=torch.float32)
    g = F.logsigmoid(gate_bias + gate_std * torch.randn(T, Hv, generator=gen))
    beta = torch.sigmoid(torch.randn(T, Hv, generator=gen))
    if l2norm_inputs:
        q = F.normalize(q, dim=-1)
        k = F.normalize(k, dim=-1)
    q, k, v = q.to(dtype), k.to(dtype), v.to(dtype)

    cu = torch.tensor([0] + list(torch.tensor(T_list, dtype=torch.int64).cumsum(0).tolist()),
                      dtype=torch.int32) if N else torch.zeros(1, dtype=torch.int32)

    st = idx = None
    if state != "none":
        P = N if state == "dense" else N + (N // 2 + 2 if extra_slots is None else int(extra_slots))
        st = torch.randn(P, Hv, K, V, generator=gen) * K ** -0.5
        if state_layout == "vk":
            st = st.transpose(-1, -2).contiguous()
        if state == "pool":
            idx = torch.randperm(P, generator=gen)[:N].to(torch.int32)
            if pad_every:
                for n in range(N):
                    if n % pad_every == pad_every - 1:
                        idx[n] = -1

    if packed:
        qkv = torch.empty(T, 2 * Hk * K + Hv * V, dtype=dtype)
        qkv[:, :Hk * K] = q.reshape(T, Hk * K)
        qkv[:, Hk * K:2 * Hk * K] = k.reshape(T, Hk * K)
        qkv[:, 2 * Hk * K:] = v.reshape(T, Hv * V)
        qkv = qkv.to(device)
        q = qkv[:, :Hk * K].unflatten(1, (Hk, K))
        k = qkv[:, Hk * K:2 * Hk * K].unflatten(1, (Hk, K))
        v = qkv[:, 2 * Hk * K:].unflatten(1, (Hv, V))
        gb = torch.stack([g, beta.to(g.dtype)], dim=-1).reshape(T, 2 * Hv).to(device)
        g, beta = gb[:, 0::2], gb[:, 1::2]
    else:
        q, k, v = q.to(device), k.to(device), v.to(device)
        g, beta = g.to(device), beta.to(beta_dtype).to(device)

    return dict(
        q=q, k=k, v=v, g=g, beta=beta, cu_seqlens=cu.to(device),
        state=None if st is None else st.to(device),
        state_indices=None if idx is None else idx.to(device),
        state_layout=state_layout,
    )
