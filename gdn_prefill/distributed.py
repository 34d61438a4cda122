"""Context parallelism: one long sequence sharded over the ranks of a torch.distributed group.

Rank r holds tokens [t_r, t_{r+1}) of the sequence, the shards in rank order.  The state map of a
segment is affine (docs/DESIGN.md §1: S_t = e^{g_t} (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T):

    S_end = A_r S_start + B_r,    A_r = prod_t e^{g_t} (I - beta_t k_t k_t^T)  (K x K per head),
                                  B_r = the segment's final state from S_start = 0.

With K = V = 128 the prefill kernels produce both:

    pass A: v = 0, initial state I   -> final state A_r
    pass B: the real v, initial state 0 -> final state B_r

On the GPU a rank forms both in two launches shared with the one-GPU segmented plan
(docs/DESIGN.md §3): its stage 1 and its MAPS pass, which runs the A and B chains side by side
with no outputs (_ext._segment_maps: the shard is one segment, every map formed).  Where the fused
plans do not serve the inputs (rows not 16-byte aligned), the rank runs passes A and B through
prefill() instead, pass A on a side stream beside pass B (one sequence's spine fills 2 Hv CTAs,
fewer than an H200's SMs at Hv <= 64).  Then one all_gather exchanges the (A_r, B_r), each rank
composes its initial state S_r = A_{r-1} S_{r-1} + B_{r-1} from the first rank's (on the GPU by
the one-GPU plan's composition kernel, compose_f32), and runs pass C over its tokens from S_r:
its outputs and final state, rounded as a one-device prefill's are.  The first rank knows its
initial state: it runs one pass from it and publishes (A, B) = (0, S_end).  Per rank: stage 1
twice and two chain passes over T / R tokens (the first rank one prefill), one collective of
2 x Hv x 128 x 128 fp32; no host sync beyond the collective.  One GPU is the same plan with the
segments side by side and no collective (docs/DESIGN.md §3).
Why a third pass and not a fix-up: pass A's outputs are o^A_t = scale Phi_t^T q_t (Phi_t the
prefix of the product), pass B's o^0_t, and o_t = o^0_t + o^A_t S_r; but that GEMM in fp32
over [T / R, Hv, 128] moves ~60 GB through HBM (our count) at T / R = 512 K tokens in torch (measured on
one GPU, two ranks emulated: the second rank 59.8 ms where one GPU runs all 1 M tokens in 27.4) and
held 24 GB of temporaries, and it added a bf16 rounding of both outputs.
"""
from __future__ import annotations

import logging
from itertools import accumulate
from typing import TYPE_CHECKING, Any, Callable, Optional

from . import grids
from .errors import GdnShapeError

if TYPE_CHECKING:
    from torch import Tensor

_log = logging.getLogger("gdn_prefill")

# A segment pass: (q, k, v, g, beta, initial state [Hv, K, V] or None for zeros, scale, use_qk_l2norm)
# -> (out [T_r, Hv, V], final state [Hv, K, V] fp32); with lens= (host ints, the lengths of the
# packed sequences in these tokens) the states are [N, Hv, K, V] instead.  The default runs
# gdn_prefill.prefill; tests pass reference_pass (the fp64 oracle) to check the composition on the CPU.
SegmentPass = Callable[..., "tuple[Tensor, Tensor]"]


def prefill_pass(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, initial: Optional[Tensor],
                 scale: Optional[float], use_qk_l2norm: bool, spine: str = "auto",
                 lens: Optional[list[int]] = None) -> tuple[Tensor, Tensor]:
    """One segment through gdn_prefill.prefill on the current stream: one sequence, or with lens
    the packed sequences, in one launch (their cu_seqlens copied from pinned host memory without
    waiting; none for a single one)."""
    import torch

    from . import _ext
    Hv = v.shape[1]
    out = torch.empty(v.shape, dtype=torch.bfloat16, device=v.device)
    final = torch.empty(1 if lens is None else len(lens), Hv, grids.HEAD_DIM_K, grids.HEAD_DIM_V, dtype=torch.float32,
                        device=v.device)
    cu = None
    if lens is not None and len(lens) > 1:
        cu = torch.tensor(list(accumulate(lens, initial=0)), dtype=torch.int32, pin_memory=v.is_cuda).to(
            v.device, non_blocking=True)
    init = initial if initial is None or lens is not None else initial[None]
    _ext.prefill(q, k, v, g, beta, out, final, cu_seqlens=cu, scale=scale, use_qk_l2norm=use_qk_l2norm, spine=spine,
                 initial_state=init, has_initial_state=initial is not None)
    return out, final if lens is not None else final[0]


def reference_pass(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, initial: Optional[Tensor],
                   scale: Optional[float], use_qk_l2norm: bool, lens: Optional[list[int]] = None,
                   **_: Any) -> tuple[Tensor, Tensor]:
    """One segment (or with lens the packed sequences) through the fp64 oracle
    (gdn_prefill.reference.chunked), on any device."""
    import torch

    from . import reference
    Hv, n = v.shape[1], 1 if lens is None else len(lens)
    if initial is None:
        init = torch.zeros(n, Hv, grids.HEAD_DIM_K, grids.HEAD_DIM_V, dtype=torch.float64)
    else:
        init = (initial if lens is not None else initial[None]).double()
    cu = None if lens is None else torch.tensor(list(accumulate(lens, initial=0)), dtype=torch.int32, device=v.device)
    o, s = reference.chunked(q, k, v, g, beta, cu_seqlens=cu, state=init.to(v.device), scale=scale,
                             use_qk_l2norm=use_qk_l2norm)
    return o.to(v.device), (s if lens is not None else s[0]).to(v.device)


def segment_maps(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, *, scale: Optional[float] = None,
                 use_qk_l2norm: bool = False, segment_pass: SegmentPass = prefill_pass,
                 out: Optional[Tensor] = None, **kw: Any) -> tuple[Tensor, Tensor]:
    """(A, B) of one segment (module docstring), [Hv, K, V] fp32 (K = V).  On the GPU through
    prefill_pass: the one-GPU segmented plan's first two launches (stage 1 and the MAPS pass,
    which forms A and B side by side without outputs; out, the segment's [T, Hv, V] bf16, is
    checked and not written), where its fused plan serves the inputs; else, and for any other
    segment_pass, passes A and B through segment_pass, their outputs dropped."""
    import torch
    if segment_pass is prefill_pass and v.is_cuda and out is not None and kw.get("spine", "auto") in ("auto", "wgmma"):
        from . import _ext
        A, B, why = _ext._segment_maps(q, k, v, g, beta, out, scale=scale, use_qk_l2norm=use_qk_l2norm)
        if why is None:
            return A, B
        _log.info("gdn_prefill.distributed: passes A and B through prefill(), the MAPS pass does not serve "
                  "these inputs: %s", why)
    Hv, K = v.shape[1], grids.HEAD_DIM_K
    eye = torch.eye(K, dtype=torch.float32, device=v.device).expand(Hv, K, K).contiguous()
    zero_v = torch.zeros_like(v)
    side = _side_stream(v, segment_pass)
    if side is None:
        _, A = segment_pass(q, k, zero_v, g, beta, eye, scale, use_qk_l2norm, **kw)
    else:
        main = torch.cuda.current_stream(v.device)
        side.wait_stream(main)
        with torch.cuda.stream(side):
            _, A = segment_pass(q, k, zero_v, g, beta, eye, scale, use_qk_l2norm, **kw)
    _, B = segment_pass(q, k, v, g, beta, None, scale, use_qk_l2norm, **kw)
    if side is not None:
        main.wait_stream(side)
        A.record_stream(main)       # made on the side stream, read on this one from here on
    return A.float(), B.float()


_SIDE_STREAMS: dict[Any, Any] = {}


def _side_stream(v: Tensor, segment_pass: SegmentPass):
    """The stream that runs pass A beside pass B, or None to run them one after the other.  One
    sequence's spine fills 2 Hv CTAs (64 of an H200's 132 SMs at Hv = 32), so the two passes'
    spines fit side by side.  Not for the oracle's pass, and not where a pass runs the overlap
    plan (its workers take the SMs the other pass would use)."""
    if segment_pass is not prefill_pass or not v.is_cuda:
        return None
    import torch

    from . import _ext
    dev = v.device.index if v.device.index is not None else torch.cuda.current_device()
    if _ext._overlap_rule(v.shape[0], 1, v.shape[1], torch.cuda.get_device_properties(dev).multi_processor_count):
        return None
    if dev not in _SIDE_STREAMS:
        _SIDE_STREAMS[dev] = torch.cuda.Stream(device=dev)
    return _SIDE_STREAMS[dev]


def compose(maps: list[tuple[Tensor, Tensor]], upto: int) -> Tensor:
    """The initial state of segment `upto`: S = 0, then S = A_j S + B_j for j < upto (the first
    segment's pair is (0, its final state)); in torch (fp32 on the GPU, float64 for the oracle's
    passes)."""
    import torch
    S = torch.zeros_like(maps[0][1])
    for A, B in maps[:upto]:
        S = torch.bmm(A, S) + B
    return S


def compose_gathered(gathered: list[Tensor], upto: int, segment_pass: SegmentPass = prefill_pass) -> Tensor:
    """compose() of the all_gather's pairs [2, Hv, K, V]; on the GPU through prefill_pass, by the
    one-GPU segmented plan's composition kernel (compose_f32: the same fp32-accurate products on
    the tensor cores, one launch for every step)."""
    import torch
    if segment_pass is prefill_pass and gathered[0].is_cuda and upto >= 1:
        from . import _ext
        first = gathered[0]
        states = torch.empty((upto + 1,) + tuple(first.shape[1:]), dtype=torch.float32, device=first.device)
        _ext._compose_maps(torch.cat([g.float() for g in gathered[:upto + 1]]), states)
        return states[upto]
    return compose([(g[0], g[1]) for g in gathered], upto)


def _check_shard(q: Tensor, v: Tensor, out: Tensor, seq_lens: list[int]) -> None:
    """What the composition itself needs (prefill() checks the rest of each pass's arguments)."""
    if q.dim() != 3 or v.dim() != 3:
        raise GdnShapeError(f"q: a rank's shard is [T_r, H, 128], got {q.dim()} dims")
    if v.shape[2] != grids.HEAD_DIM_K:
        raise GdnShapeError(f"v: context parallelism needs V = K = {grids.HEAD_DIM_K} (the state map is K x K), "
                            f"got V = {v.shape[2]}")
    if tuple(out.shape) != tuple(v.shape):
        raise GdnShapeError(f"out: must have v's shape {tuple(v.shape)}, got {tuple(out.shape)}")
    if not seq_lens or any(n < 1 for n in seq_lens) or sum(seq_lens) != q.shape[0]:
        raise GdnShapeError(f"seq_lens: positive lengths summing to the shard's {q.shape[0]} tokens, got {seq_lens}")


class _Plan:
    """One rank's part: its sequences (local token ranges), whether the first continues from the
    previous rank and the last into the next, and what it keeps between the passes and pass C."""

    def __init__(self, rank: int, world: int, seq_lens: list[int], first_in: Optional[bool],
                 last_out: Optional[bool]):
        self.rank = rank
        self.lens = seq_lens
        self.bounds = list(accumulate(seq_lens, initial=0))
        self.first_in = rank > 0 if first_in is None else bool(first_in)
        self.last_out = rank < world - 1 if last_out is None else bool(last_out)
        if rank == 0 and self.first_in:
            raise GdnShapeError("first_continues: the first rank's first sequence continues from no rank")
        if rank == world - 1 and self.last_out:
            raise GdnShapeError("last_continues: the last rank's last sequence continues into no rank")
        self.kept: tuple[Tensor, ...] = ()
        self.rerun: Optional[Callable[[Tensor], tuple[Tensor, Tensor]]] = None   # pass C of the first sequence

    def seq(self, i: int) -> slice:
        return slice(self.bounds[i], self.bounds[i + 1])


def _local(pl: _Plan, x: dict[str, Tensor], out: Tensor, initial_states: Optional[Tensor],
           scale: Optional[float], use_qk_l2norm: bool, segment_pass: SegmentPass,
           pass_kw: dict[str, Any]) -> tuple[Tensor, list[Tensor]]:
    """A rank's work before the exchange: the sequences that start here through one pass from
    their initial states (their outputs final), the one that continues from the previous rank through
    segment_maps; returns the pair it publishes, (A, B) of the state it hands to the next rank
    as a function of the state it received ((0, S) when that does not depend on it), and the
    states after each sequence's last local token (the first's B until pass C replaces it)."""
    import torch
    n = len(pl.bounds) - 1
    finals: list[Tensor] = []
    if pl.first_in:
        cont = {name: t[pl.seq(0)] for name, t in x.items()}
        A, B = segment_maps(**cont, scale=scale, use_qk_l2norm=use_qk_l2norm, segment_pass=segment_pass,
                            out=out[pl.seq(0)], **pass_kw)
        pl.kept = (A, B)
        pl.rerun = lambda S: segment_pass(**cont, initial=S, scale=scale, use_qk_l2norm=use_qk_l2norm, **pass_kw)
        finals.append(B)
    first = 1 if pl.first_in else 0
    if n > first:                   # the sequences that start here: one pass over all of them
        span = slice(pl.bounds[first], pl.bounds[n])
        part = {name: t[span] for name, t in x.items()}
        init = None if initial_states is None else initial_states[first:n].float()
        o, S = segment_pass(**part, initial=init, lens=pl.lens[first:], scale=scale, use_qk_l2norm=use_qk_l2norm,
                            **pass_kw)
        out[span] = o
        finals.extend(S.float().unbind(0))
    zero = torch.zeros_like(finals[-1])
    if not pl.last_out:
        pair = torch.stack([zero, zero])               # nothing crosses into the next rank
    elif n == 1 and pl.first_in:
        pair = torch.stack([pl.kept[0], pl.kept[1]])   # the sequence passes through this rank
    else:
        pair = torch.stack([zero, finals[-1]])
    return pair, finals


def _finish(pl: _Plan, gathered: list[Tensor], out: Tensor, finals: list[Tensor],
            segment_pass: SegmentPass) -> Tensor:
    """A rank's work after the exchange: the continuing sequence's pass C from the state the
    previous ranks hand over (its outputs and state final); returns the states after each local
    sequence [N_r, Hv, K, V]."""
    import torch
    if pl.first_in:
        S_start = compose_gathered(gathered, pl.rank, segment_pass)
        o, S = pl.rerun(S_start)
        out[pl.seq(0)] = o
        finals[0] = S.float()
    return torch.stack(finals)


def context_parallel_prefill(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, out: Tensor, *,
                             group: Any = None, seq_lens: Optional[list[int]] = None,
                             first_continues: Optional[bool] = None, last_continues: Optional[bool] = None,
                             initial_states: Optional[Tensor] = None, scale: Optional[float] = None,
                             use_qk_l2norm: bool = False, segment_pass: SegmentPass = prefill_pass,
                             **pass_kw: Any) -> Tensor:
    """The prefill of sequences sharded over `group` (torch.distributed; None: the default group),
    the ranks holding consecutive stretches of one packed token stream: this rank's q, k
    [T_r, Hk, 128], v [T_r, Hv, 128], g, beta [T_r, Hv], its sequences' local lengths seq_lens
    (host ints; None: one sequence of T_r tokens).  By default the first continues from the
    previous rank (rank > 0) and the last into the next (rank < world - 1); first_continues /
    last_continues say otherwise where a sequence boundary falls on the rank boundary.
    initial_states [N_r, Hv, 128, 128] holds the initial state of each sequence that starts on
    this rank (None: zeros; the continuing sequence's entry is not read).  Writes out and returns
    the state after each local sequence's last local token [N_r, Hv, 128, 128] fp32 (a sequence's
    final state on the rank where it ends).  Every rank of the group calls it; its one
    communication is an all_gather of 2 x Hv x 128 x 128 fp32 per rank (NCCL: on the device; gloo,
    which gathers host tensors only, through the host)."""
    import torch.distributed as dist
    lens = [q.shape[0]] if seq_lens is None else [int(n) for n in seq_lens]
    _check_shard(q, v, out, lens)
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    pl = _Plan(rank, world, lens, first_continues, last_continues)
    pair, finals = _local(pl, dict(q=q, k=k, v=v, g=g, beta=beta), out, initial_states, scale, use_qk_l2norm,
                          segment_pass, pass_kw)
    via_host = pair.is_cuda and dist.get_backend(group) == "gloo"
    send = pair.cpu() if via_host else pair.contiguous()
    gathered = [send.new_empty(send.shape) for _ in range(world)]
    dist.all_gather(gathered, send, group=group)
    if via_host:
        gathered = [t.to(pair.device) for t in gathered]
    return _finish(pl, gathered, out, finals, segment_pass)


def emulate(shards: list[dict[str, Any]], outs: list[Tensor], *, scale: Optional[float] = None,
            use_qk_l2norm: bool = False, segment_pass: SegmentPass = prefill_pass, **pass_kw: Any) -> list[Tensor]:
    """context_parallel_prefill's ranks in one process (no process group): shards[r] holds rank r's
    q, k, v, g, beta and optionally seq_lens, first_continues, last_continues, initial_states;
    writes outs[r]; returns each rank's states."""
    plans, work = [], []
    for r, (sh, o) in enumerate(zip(shards, outs)):
        lens = [sh["q"].shape[0]] if sh.get("seq_lens") is None else list(sh["seq_lens"])
        _check_shard(sh["q"], sh["v"], o, lens)
        pl = _Plan(r, len(shards), lens, sh.get("first_continues"), sh.get("last_continues"))
        x = {n: sh[n] for n in ("q", "k", "v", "g", "beta")}
        work.append(_local(pl, x, o, sh.get("initial_states"), scale, use_qk_l2norm, segment_pass, pass_kw))
        plans.append(pl)
    gathered = [w[0] for w in work]
    return [_finish(pl, gathered, o, w[1], segment_pass) for pl, w, o in zip(plans, work, outs)]
