"""The benchmark's inputs on the GPU: a buffer set (drawn like reference.make_inputs, on the
device), a serving engine's state pool around it, and cu_seqlens in each peer's form."""
from __future__ import annotations

from dataclasses import dataclass, field
from itertools import accumulate

from .cases import Case


@dataclass
class _Set:
    q: object
    k: object
    v: object
    g: object
    beta: object
    state: object
    out: object
    extra: dict = field(default_factory=dict)


#: The gates a benchmark draws (``--gates``).  "fast": every head forgets within a few chunks, the
#: log-decay logsigmoid(3 + 1.5 randn), about -0.1 a token.  "mixed": each value head its own rate,
#: log-spaced from -0.3 to -1e-4 a token across the heads (x (1 + 0.1 randn), at least half the
#: rate), so that some heads remember a whole long prompt.  "slow": every head at -1e-4 a token
#: (x (1 + 0.1 randn), at least half), so that no head forgets within a prompt: the worst case of
#: work that depends on the decay.  Such work (FlashQLA's context parallelism, our segmented plan's
#: MAPS pass: each segment's map formed from only the chunks not yet decayed below a threshold,
#: FlashQLA's e^-10, our GDN_MAP_CUT_LOG_DECAY) is fairly timed only on all three.
GATES = ("fast", "mixed", "slow")


def draw_gates(kind: str, T: int, Hv: int, rn):
    """g [T, Hv] (fp32 log-decay, <= 0) of `kind` (GATES); rn(*shape) draws standard normals."""
    import torch
    import torch.nn.functional as F

    def jitter():                       # each token's rate x (1 + 0.1 randn), at least half of it
        return (1.0 + 0.1 * rn(T, Hv)).clamp(min=0.5)
    if kind == "fast":
        return F.logsigmoid(3.0 + 1.5 * rn(T, Hv))
    if kind == "mixed":
        j = jitter()
        h = torch.arange(Hv, dtype=j.dtype, device=j.device) / max(Hv - 1, 1)
        return -0.3 * ((1e-4 / 0.3) ** h)[None, :] * j
    if kind == "slow":
        return -1e-4 * jitter()
    raise ValueError(f"gates: expected one of {', '.join(GATES)}, got {kind!r}")


def _make_set(case: Case, seed: int, *, normed: bool, pool: bool = False, gates: str = "fast"):
    """One buffer set on the GPU, drawn like reference.make_inputs (but on the device, for speed):
    q, k randn (unit-normed if `normed`), v randn, g by draw_gates(gates), beta = sigmoid(randn),
    state randn * K^-1/2 [N, Hv, K, V].  pool: the state is a serving engine's pool of pool_slots(N)
    slots instead, and extra["slots"] the N distinct slots (int64, a random draw) of the sequences."""
    import torch
    import torch.nn.functional as F
    gen = torch.Generator(device="cuda").manual_seed(seed)
    T, dev = case.T, "cuda"

    def rn(*shape):
        return torch.randn(*shape, generator=gen, device=dev, dtype=torch.float32)

    q, k = rn(T, case.Hk, case.K), rn(T, case.Hk, case.K)
    if normed:
        q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)
    s = _Set(q=q.to(torch.bfloat16), k=k.to(torch.bfloat16), v=rn(T, case.Hv, case.V).to(torch.bfloat16),
             g=draw_gates(gates, T, case.Hv, rn), beta=torch.sigmoid(rn(T, case.Hv)),
             state=rn(pool_slots(case.N) if pool else case.N, case.Hv, case.K, case.V) * case.K ** -0.5,
             out=torch.empty(T, case.Hv, case.V, dtype=torch.bfloat16, device=dev))
    if pool:
        s.extra["slots"] = torch.randperm(pool_slots(case.N), generator=gen, device=dev)[:case.N]
    del q, k
    return s


def pool_slots(n: int) -> int:
    """A pool's slots for n sequences: twice as many, plus one (an engine's pool holds requests
    that are not in this batch)."""
    return 2 * n + 1


def pooled(fn, pool, slots):
    """A peer that takes no slot indices (FLA; a FlashInfer without state_indices) called as a
    serving engine calls it with a state pool: gather the sequences' states, call
    fn(initial_state) -> final state (the pool's layout), scatter it back into their slots."""
    def call():
        final = fn(pool.index_select(0, slots))
        pool.index_copy_(0, slots, final)
        return final
    return call


def _cu(case: Case):
    import torch
    cpu64 = torch.tensor(list(accumulate(case.lens, initial=0)), dtype=torch.int64)
    return dict(cu32=cpu64.to(torch.int32).cuda(), cu64=cpu64.cuda(), cu64_cpu=cpu64)
