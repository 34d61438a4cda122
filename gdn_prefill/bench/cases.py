"""The benchmark's cases, constants and floor formulas (gdn_prefill.bench's docstring derives the
formulas): pure Python, importable without torch or a GPU."""
from __future__ import annotations

import fnmatch
import math
import random
from dataclasses import dataclass

CHUNK = 64
PEAK_TFLOPS = 790.0            # bf16 dense, measured on H200
PEAK_TBPS = 4.3                # copy bandwidth, measured on H200
L2_FALLBACK_BYTES = 60 << 20   # when the device does not report its L2 size
SETS_MEMORY_SHARE = 0.25       # of the GPU's memory, the most the rotated input sets may take
HOST_OVERHEAD_CALLS = 20      # calls per sample of host_cost_us (80 launches: far below the queue depth)
HOST_OVERHEAD_SAMPLES = 15

HEADS = ((16, 32), (16, 64), (8, 8))
SHAPES = ("1x1K", "1x8K", "1x64K", "8x4K", "32x2K", "varlen16")
QUICK_HEADS = ((16, 32),)
QUICK_SHAPES = ("1x1K", "1x8K", "8x4K", "varlen16")
VARLEN_SEED = 2024
VARLEN_N = 16
VARLEN_TOKENS = 32768
NUMERICS_T = (4096, 65536)
NUMERICS_HEADS = (16, 32)
NUMERICS_FALLBACK_HEADS = (2, 4)
NUMERICS_REPEATS = 5


# ===================================================================================== cases
def varlen_lengths(seed: int = VARLEN_SEED, n: int = VARLEN_N, total: int = VARLEN_TOKENS) -> list[int]:
    """n sequence lengths summing to `total`, log-normally spread, fixed by `seed`."""
    rng = random.Random(seed)
    raw = [rng.lognormvariate(0.0, 1.0) for _ in range(n)]
    s = sum(raw)
    lens = [max(1, int(r / s * total)) for r in raw]
    lens[lens.index(max(lens))] += total - sum(lens)
    return lens


def parse_shape(name: str) -> list[int]:
    """'8x4K' -> [4096] * 8, '1x1000' -> [1000], '16Kx4' -> [4] * 16384 (B and T take parse_count's
    K / M suffixes: the many-sequence rows), 'varlen16' -> varlen_lengths(), '3x2K+1500+700+100' ->
    [2048] * 3 + [1500, 700, 100] (a mixed batch: terms of either form joined by '+')."""
    if name == "varlen16":
        return varlen_lengths()
    if "+" in name:
        return [n for part in name.split("+") for n in parse_shape(part if "x" in part.lower() else "1x" + part)]
    try:
        b, t = name.lower().split("x")
        tok = parse_count(t)
        B = parse_count(b)
    except ValueError:
        raise ValueError(f"shape {name!r}: expected BxT (e.g. 8x4K, 1x1000, 16Kx4) or varlen16") from None
    if B < 1 or tok < 1:
        raise ValueError(f"shape {name!r}: B and T must be positive")
    return [tok] * B


def parse_count(text: str) -> int:
    """'8K' -> 8192, '1M' -> 1048576, '300' -> 300 (token or sequence counts of the scripts)."""
    t = text.strip().upper()
    try:
        return int(t[:-1]) * (1 << 20 if t.endswith("M") else 1 << 10) if t[-1:] in ("K", "M") else int(t)
    except ValueError:
        raise ValueError(f"count {text!r}: expected an integer with an optional K or M suffix") from None


def parse_heads(text: str) -> tuple[int, int]:
    try:
        hk, hv = (int(x) for x in text.split("/"))
    except ValueError:
        raise ValueError(f"heads {text!r}: expected Hk/Hv, e.g. 16/32") from None
    if hk < 1 or hv % hk:
        raise ValueError(f"heads {text!r}: Hv must be a positive multiple of Hk")
    return hk, hv


@dataclass(frozen=True)
class Case:
    shape: str
    lens: tuple
    Hk: int
    Hv: int
    K: int = 128
    V: int = 128

    @property
    def T(self) -> int:
        return sum(self.lens)

    @property
    def N(self) -> int:
        return len(self.lens)

    @property
    def heads(self) -> str:
        return f"{self.Hk}/{self.Hv}"

    @property
    def name(self) -> str:
        return f"{self.shape}@{self.heads}"


# named groups of head counts --heads takes beside Hk/Hv: the Qwen3.5 family's GDN layers, value-to-
# key ratios 4, 3 and 1 (397B / 122B 16/64, and 8/32, 4/16, 2/8 under tensor parallelism; 27B 16/48
# and 8/24; 2B / 0.8B 16/16)
HEAD_GROUPS = {"qwen3.5": ("16/64", "8/32", "4/16", "2/8", "16/48", "8/24", "16/16")}


def _heads(heads: str) -> list[tuple[int, int]]:
    """A comma list of Hk/Hv and HEAD_GROUPS names, in order, each pair once."""
    out: list[tuple[int, int]] = []
    for item in (h.strip() for h in heads.split(",") if h.strip()):
        for h in HEAD_GROUPS.get(item.lower(), (item,)):
            pair = parse_heads(h)
            if pair not in out:
                out.append(pair)
    return out


def select_cases(quick: bool = False, shapes: str | None = None, heads: str | None = None) -> list[Case]:
    """The cases to run, heads-major (the first head config's shapes come first).

    `shapes`: comma list of shape names or globs over SHAPES ('1x*'), or new BxT shapes.
    `heads`: comma list of Hk/Hv and HEAD_GROUPS names (e.g. 'qwen3.5').
    """
    base = QUICK_SHAPES if quick else SHAPES
    if shapes:
        names: list[str] = []
        for item in (s.strip() for s in shapes.split(",") if s.strip()):
            hits = [s for s in SHAPES if fnmatch.fnmatch(s.lower(), item.lower())]
            if not hits:
                parse_shape(item)          # a new shape: must parse
                hits = [item]
            names += [h for h in hits if h not in names]
    else:
        names = list(base)
    hs = _heads(heads) if heads else list(QUICK_HEADS if quick else HEADS)
    return [Case(s, tuple(parse_shape(s)), hk, hv) for hk, hv in hs for s in names]


# ===================================================================================== formulas
def flops_per_token(Hv: int, K: int = 128, V: int = 128, C: int = CHUNK) -> float:
    """Hv * (6 K V + 2 C (3 K + 2 V) + C^2 / 3): matmul FLOP of the chunked algorithm per token."""
    return Hv * (6.0 * K * V + 2.0 * C * (3 * K + 2 * V) + C * C / 3.0)


def flops(T: int, Hv: int, K: int = 128, V: int = 128) -> float:
    return T * flops_per_token(Hv, K, V)


def hbm_bytes(T: int, N: int, Hk: int, Hv: int, K: int = 128, V: int = 128, *, state: bool = True,
              e_in: int = 2, e_out: int = 2, e_g: int = 4, e_beta: int = 4) -> int:
    """Inputs read once + outputs written once + the fp32 state read and written (see module doc)."""
    b = T * (2 * Hk * K + Hv * V) * e_in + T * Hv * (e_g + e_beta) + T * Hv * V * e_out + 4 * (N + 1)
    if state:
        b += 2 * N * Hv * K * V * 4
    return b


def floors_us(T: int, N: int, Hk: int, Hv: int, K: int = 128, V: int = 128, *, peak_tflops: float = PEAK_TFLOPS,
              peak_tbps: float = PEAK_TBPS) -> tuple[float, float]:
    """(compute floor, HBM floor) in microseconds."""
    return (flops(T, Hv, K, V) / (peak_tflops * 1e12) * 1e6,
            hbm_bytes(T, N, Hk, Hv, K, V) / (peak_tbps * 1e12) * 1e6)


def rotation_sets(set_bytes: int, l2_bytes: int = L2_FALLBACK_BYTES, *, min_sets: int = 3, max_sets: int = 32,
                  l2_factor: int = 4, memory_bytes: int | None = None) -> int:
    """Buffer sets to rotate through: >= min_sets, and >= l2_factor x L2 bytes in all (<= max_sets).
    With memory_bytes (the share of GPU memory the sets may take: the peers' own copies need the
    rest), min_sets yields to what fits, down to the L2 rule's own need (a set of >= l2_factor x L2
    bytes is rotated alone): 128K sequences' dense states are 32 GB a set at 2/4."""
    need = math.ceil(l2_factor * l2_bytes / max(set_bytes, 1))
    n = max(min_sets, min(max_sets, need))
    if memory_bytes is not None:
        n = max(min(n, memory_bytes // max(set_bytes, 1)), min(need, max_sets), 1)
    return n
