"""Benchmark harness: the whole prefill against FLA (and FlashInfer when importable).

    python benchmarks/bench_prefill.py [--quick] [--shapes 1x8K,varlen16] [--heads 16/32] ...
    python -m gdn_prefill            # main_job(): --quick on a Hopper GPU, else the plan + an oracle check

Imports nothing heavy at module level (torch, the extension, FLA and FlashInfer are
imported inside the functions that need them), so the formulas and the report writers
work on any machine, and `import gdn_prefill.bench` never loads the CuTe DSL.

What is timed
-------------
Every implementation runs in this one process, on the same inputs, one after another:
``gdn:<spine>`` (gdn_prefill.prefill with ``spine=<spine>``, one row per spine compiled
into the build; ``gdn:wgmma`` fuses the output into the spine where the inputs allow it,
``gdn:wgmma-4k`` runs the same spine in the unfused plan, spine then fwd_o,
through the stage hook, so each table shows what the fusion gains, and ``gdn:wgmma-overlap`` the
fused plan as the opt-in overlap plan (GDN_PREFILL_OVERLAP=1: stage 1 split around the spine where
its rule applies; the same row as ``gdn:wgmma`` elsewhere), so it shows what the opt-in gains,
and ``gdn:wgmma-single`` the single plan forced (cute_kernels/fused.py; prefill() runs it only
where its rule applies)), ``fla`` (fla.ops.gated_delta_rule.chunk_gated_delta_rule) and
``flashinfer`` (flashinfer.gdn_prefill.chunk_gated_delta_rule, skipped when it does
not import).  Inputs are bf16 q/k/v, fp32 g (log decay) and beta, a dense fp32 initial
state that every implementation reads and whose final value it writes, K = V = 128,
scale K^-1/2.  By default q and k are unit-normed when generated and
``use_qk_l2norm`` is False everywhere (the kernels alone); ``--qk-l2norm`` turns the
normalisation on for all three, as engines call them (FlashInfer 0.7.2 runs it as a separate
kernel before its chunk kernel; a FlashInfer without the flag gets pre-normed copies).
``--pool``: the state is a pool of 2N + 1 slots updated through slot indices (gdn and
FlashInfer in place; FLA, which takes no indices, gathered and scattered around its call).

Each implementation gets everything it needs prepared outside the timed region:
gdn gets packed [T, H, D] tensors, int32 cu_seqlens, out, state and workspace
preallocated; FLA gets [1, T, H, D] views of the same memory, int64 cu_seqlens and,
when its signature accepts it, ``cu_seqlens_cpu`` (no host sync); FlashInfer gets
alpha = exp(g), the state transposed to [N, Hv, V, K], and preallocated output and
output_state.  FLA allocates its outputs inside the call, as its API does.

Methodology: the inputs are rotated among ``n_sets`` buffer sets (at least 3, and at
least 4x the L2 size in all, so no implementation is flattered by a warm L2; fewer than 3
only where 3 would take more than a quarter of the GPU's memory and each set alone is
over 4x the L2: the many-sequences rows' dense states).  After
warm-up (Triton autotune and JIT happen there), two modes are timed:
  graph  one call per buffer set captured in a CUDA graph; graphs replayed round-robin.
  eager  the Python call itself, round-robin (includes launch gaps when host-bound).
Each repetition is bracketed by CUDA events on the current stream; the figure is the
median over the repetitions (p10 / p90 are kept in the JSON).  The host overhead of
one Python call is measured on its own: a tiny problem (one sequence of 64 tokens),
1000 calls, wall clock, divided by 1000 (it is an upper bound on the host cost when
the GPU is slower than the host; the GPU time of the same call is printed beside it).

FLOP count (per token, per value head; matmuls only, 2 FLOP per multiply-add,
dense tiles, chunk C = 64).  Per chunk of C tokens and one value head, the chunked
algorithm (docs/DESIGN.md §1) does
    stage 1   K K^T (C.C.K)   T = (I + A)^-1 (~C^3/6 mul-adds)   W = T.(K)  (C.C.K)   U = T.(V)  (C.C.V)
    stage 2   W S  (C.K.V)    K^T Vnew  (K.C.V)
    stage 3   Q S  (C.K.V)    Q K^T  (C.C.K)    (Q K^T o decay) Vnew  (C.C.V)
so, dividing by C,

    FLOP/token = Hv * ( 6 K V  +  2 C (3 K + 2 V)  +  C^2 / 3 )

Hk does not appear: every product is done per value head (as FLA, FlashInfer and our
kernels do).  K = V = 128, C = 64: 181,589 FLOP per token and value head, i.e.
5.81 MFLOP/token for Hv = 32 (docs/DESIGN.md §4: ~5.8), 11.6 for Hv = 64, 1.45 for Hv = 8.
Elementwise work (gates, exp, l2norm) is not counted.  A sequence's last partial
chunk is counted by its tokens only.

HBM bytes (the floor: every input read once, every output written once):

    bytes = T (2 Hk K + Hv V) e_in  +  T Hv (e_g + e_beta)  +  T Hv V e_out
            +  4 (N + 1)  +  2 N Hv K V 4        (cu_seqlens; state read + written, fp32)

e_in = e_out = 2 (bf16), e_g = e_beta = 4 (fp32): 24,832 B/token for Hk/Hv = 16/32.
"% of compute floor" = (FLOP / peak FLOP/s) / measured time, and likewise for HBM;
peaks default to 790 TFLOP/s (bf16 dense, measured on H200) and 4.3 TB/s (measured
copy bandwidth), or --peak-tflops / --peak-tbps.
"""
from __future__ import annotations

import argparse
import datetime
import inspect
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any, Callable

from .cases import (  # noqa: F401  (re-exported: the benchmark scripts and tests use bench.<name>)
    CHUNK, PEAK_TFLOPS, PEAK_TBPS, L2_FALLBACK_BYTES, SETS_MEMORY_SHARE, HOST_OVERHEAD_CALLS, HOST_OVERHEAD_SAMPLES, HEADS, SHAPES, QUICK_HEADS, QUICK_SHAPES, VARLEN_SEED, VARLEN_N, VARLEN_TOKENS, NUMERICS_T, NUMERICS_HEADS, NUMERICS_FALLBACK_HEADS, NUMERICS_REPEATS, varlen_lengths, parse_shape, parse_heads, Case, select_cases, flops_per_token, flops, hbm_bytes, floors_us, rotation_sets)
from .report import (  # noqa: F401
    derive, _fmt, _ratio, _note, markdown_report, numerics_markdown, write_json, table_report, write_text, plot, plot_shapes,
    Progress)

# used by the benchmark scripts and tests as bench.<name> (named here so that pyflakes, which
# reads no noqa comments, sees them used)
_REEXPORTED = (CHUNK, HEADS, QUICK_HEADS, VARLEN_SEED, VARLEN_N, VARLEN_TOKENS, parse_shape, flops, _fmt, _ratio,
               _note, table_report)

IMPL_ORDER = ("gdn", "fla", "flashinfer")


# ===================================================================================== environment
def hopper_status() -> tuple[bool, str]:
    """(True, device name) on a Hopper GPU, else (False, why not)."""
    try:
        import torch
    except ImportError:
        return False, "torch is not installed"
    if not torch.cuda.is_available():
        return False, f"CUDA is not available (torch {torch.__version__})"
    major, minor = torch.cuda.get_device_capability(0)
    name = torch.cuda.get_device_name(0)
    if major != 9:
        return False, f"device 0 is {name} (sm_{major}{minor}), not Hopper (sm_90)"
    return True, name


def eager_median_us(call, reps: int, before=None) -> float:
    """Median microseconds of one eager call() between two CUDA events, after two warm-up calls
    (before(), e.g. a barrier, ahead of each timed one): the benchmark scripts' simple timer."""
    import torch
    call()
    call()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        if before is not None:
            before()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        call()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1000.0)
    return statistics.median(times)


def script_cannot_time(script: str) -> bool:
    """A benchmark script's first check: True, having said why, where no Hopper GPU can time it
    (the script then exits 0)."""
    ok, why = hopper_status()
    if not ok:
        print(f"{script}: no Hopper GPU ({why}); nothing to time")
    return not ok


def _version(dist: str, module: str | None = None):
    try:
        from importlib.metadata import version
        return version(dist)
    except Exception:
        pass
    try:
        import importlib
        return getattr(importlib.import_module(module or dist), "__version__", "unknown")
    except Exception:
        return None


def _driver() -> str | None:
    import subprocess
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version,clocks.max.sm", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
    except Exception:
        return None


def compiled_spines() -> list[str]:
    """Spines with a 'kv' variant in this build, from gdn_prefill.compiled_variants()."""
    import gdn_prefill
    from gdn_prefill import _ext
    out = []
    for v in gdn_prefill.compiled_variants():
        if v.startswith("spine_") and v.endswith("_kv"):
            s = v[len("spine_"):-len("_kv")]
            if s in _ext.SPINES and s not in out:   # spine_wgmma_wg2_kv is a build of "wgmma"
                out.append(s)
    return out


METHODOLOGY = ("one process, implementations timed one after another on the same inputs; inputs rotated among "
               "n_sets buffer sets (>= 3 and >= 4x L2 in all; fewer only where 3 would take over a quarter of the GPU memory and one set alone is >= 4x L2); warm-up (autotune/JIT) outside timing; each "
               "implementation runs its own calls for warm_s seconds before its timed repetitions (the card's "
               "sustained, power-limited clock, not its first boost); "
               "graph = one call per set captured in a CUDA graph, replayed round-robin; eager = the Python call "
               "round-robin; CUDA events around each repetition, median of the repetitions; FLA's cached chunk indices "
               "stay warm (one cu_seqlens object per case, as across the layers of one forward); inputs converted "
               "outside timing (FLA: [1,T,H,D] views, int64 cu_seqlens + cu_seqlens_cpu; FlashInfer: alpha=exp(g), "
               "state [N,Hv,V,K], output/output_state preallocated; gdn: out/state/workspace preallocated, "
               "max_seqlen given as an engine knows it)")


def _meta(args, cases) -> dict:
    import torch
    props = torch.cuda.get_device_properties(0)
    try:
        import gdn_prefill
        variants = gdn_prefill.compiled_variants()
    except Exception as e:  # the extension may not import; FLA can still be timed
        variants = f"unavailable: {e}"
    return dict(
        card=torch.cuda.get_device_name(0), sms=props.multi_processor_count,
        l2_bytes=getattr(props, "L2_cache_size", None), memory_bytes=getattr(props, "total_memory", None),
        driver=_driver(),
        date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        torch=torch.__version__, cuda=torch.version.cuda, python=sys.version.split()[0],
        gdn_prefill=_version("gdn-prefill", "gdn_prefill"), fla=_version("fla-core", "fla"),
        flashinfer=_version("flashinfer-python", "flashinfer"), compiled_variants=variants,
        peak_tflops=args.peak_tflops, peak_tbps=args.peak_tbps, use_qk_l2norm=args.qk_l2norm,
        state_pool=getattr(args, "pool", False), quick=args.quick, modes=args.modes, warm_s=getattr(args, "warm_s", None), cases=[dict(name=c.name, lens=list(c.lens) if c.N <= 32 else None,
                                                        T=c.T, N=c.N, Hk=c.Hk, Hv=c.Hv) for c in cases],
        varlen_lengths=varlen_lengths(), methodology=METHODOLOGY,
        flop_formula="FLOP/token = Hv*(6*K*V + 2*C*(3*K + 2*V) + C^2/3), C = 64",
        byte_formula="T*(2*Hk*K + Hv*V)*2 + T*Hv*(4+4) + T*Hv*V*2 + 4*(N+1) + 2*N*Hv*K*V*4",
    )


# ===================================================================================== GPU: inputs
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


def _make_set(case: Case, seed: int, *, normed: bool, pool: bool = False):
    """One buffer set on the GPU, drawn like reference.make_inputs (but on the device, for speed):
    q, k randn (unit-normed if `normed`), v randn, g = logsigmoid(3 + 1.5 randn), beta = sigmoid(randn),
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
             g=F.logsigmoid(3.0 + 1.5 * rn(T, case.Hv)), beta=torch.sigmoid(rn(T, case.Hv)),
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


# ===================================================================================== GPU: implementations
def _impl_list(requested: str | None) -> tuple[list[str], list[dict]]:
    """Implementation names to run, and the skipped ones with reasons."""
    want = [s.strip() for s in requested.split(",")] if requested else None
    names, skipped = [], []
    try:
        spines = compiled_spines()
    except Exception as e:
        spines = []
        skipped.append(dict(what="gdn", reason=f"gdn_prefill extension unavailable: {e}"))
    for s in spines:
        names.append(f"gdn:{s}")
    try:
        import gdn_prefill
        if "wgmma" in spines and "spine_rs_o_kv" in gdn_prefill.compiled_variants():
            names.append("gdn:wgmma-4k")
            names.append("gdn:wgmma-overlap")
        if "wgmma" in spines and any(v.startswith("fused_prefill_") for v in gdn_prefill.compiled_variants()):
            names.append("gdn:wgmma-single")
    except Exception:
        pass
    from importlib import import_module
    for name, module in (("fla", "fla.ops.gated_delta_rule"), ("flashinfer", "flashinfer.gdn_prefill")):
        try:
            if not hasattr(import_module(module), "chunk_gated_delta_rule"):
                raise ImportError(f"cannot import name 'chunk_gated_delta_rule' from {module!r}")
            names.append(name)
        except Exception as e:
            skipped.append(dict(what=name, reason=f"not importable ({type(e).__name__}: {e})"))
    if want:
        keep = []
        for n in names:
            if any(n == w or (w == "gdn" and n.startswith("gdn:")) for w in want):
                keep.append(n)
        unknown = [w for w in want if w != "gdn" and w not in names and not any(s["what"] == w for s in skipped)]
        for w in unknown:
            skipped.append(dict(what=w, reason="not an available implementation"))
        skipped = [s for s in skipped if any(w.startswith(s["what"]) or s["what"].startswith(w) for w in want)]
        names = keep
    return names, skipped


def _filter_kwargs(fn, kw: dict) -> dict:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return kw
    if any(p.kind == p.VAR_KEYWORD for p in params.values()):
        return kw
    return {k: v for k, v in kw.items() if k in params}


def _gdn_call(impl: str, s, out, state, cu32, use_l2: bool, ws, split: int = 0, max_seqlen=None,
              state_indices=None) -> str:
    """One gdn call of `impl` ("gdn:<spine>" -> prefill(spine=<spine>); "gdn:wgmma-4k" -> the
    unfused plan with the wgmma spine, "gdn:wgmma-overlap" -> the fused plan split at chunk slot
    `split` (0: serial), "gdn:wgmma-single" -> the single plan, all through the stage hook);
    returns what ran.  max_seqlen: the longest sequence, as a serving engine passes it (the
    planner's segmented and single plans read it).  state_indices: the sequences' slots of a state
    pool (prefill() only)."""
    import gdn_prefill
    spine = impl.split(":", 1)[1]
    if spine == "wgmma-4k":
        from gdn_prefill import _ext
        _ext._launch_stages(("recompute_wu", "spine", "fwd_o"), s.q, s.k, s.v, s.g, s.beta, out,
                            state, cu_seqlens=cu32, spine="wgmma", use_qk_l2norm=use_l2, workspace=ws, fused=0)
        return spine
    if spine == "wgmma-overlap":
        from gdn_prefill import _ext
        _ext._launch_stages(("recompute_wu", "spine"), s.q, s.k, s.v, s.g, s.beta, out, state, cu_seqlens=cu32,
                            spine="wgmma", use_qk_l2norm=use_l2, workspace=ws, fused=1, overlap_split=split)
        return spine
    if spine == "wgmma-single":
        from gdn_prefill import _ext
        _ext._launch_stages(("fused",), s.q, s.k, s.v, s.g, s.beta, out, state, cu_seqlens=cu32, spine="wgmma",
                            use_qk_l2norm=use_l2, workspace=ws, fused=2, max_seqlen=max_seqlen)
        return spine
    if state_indices is not None and spine.startswith("wgmma-"):
        raise ValueError(f"gdn:{spine} runs through the stage hook, which takes no state pool")
    return gdn_prefill.prefill(s.q, s.k, s.v, s.g, s.beta, out, state, cu_seqlens=cu32, spine=spine,
                               use_qk_l2norm=use_l2, workspace=ws, max_seqlen=max_seqlen,
                               state_indices=state_indices)


def flashinfer_route(case: Case) -> str:
    """The route FlashInfer's chunk_gated_delta_rule takes for a case with use_cp="auto": its own
    rule (flashinfer.gdn_kernels.delta_rule_dsl.varlen_helper.should_use_cp_host, on N x max(Hq,
    Hv) parallel work items), or, where that helper is not importable, the rule its docs state
    (context parallel where N x H x 2 < SMs)."""
    import torch
    props = torch.cuda.get_device_properties(0)
    work = case.N * max(case.Hk, case.Hv)
    try:
        from flashinfer.gdn_kernels.delta_rule_dsl.varlen_helper import should_use_cp_host
        cp = should_use_cp_host(work, props.multi_processor_count, props.name, (props.major, props.minor))
    except Exception:
        cp = work * 2 < props.multi_processor_count
    return "context-parallel" if cp else "fused"


def _calls(impl: str, case: Case, sets: list, cu: dict, use_l2: bool) -> tuple[list, str]:
    """One zero-argument callable per buffer set, and a note (what was passed)."""
    import torch
    if impl.startswith("gdn:"):
        import gdn_prefill
        spine = impl.split(":", 1)[1]
        ws = torch.empty(max(gdn_prefill.workspace_bytes(case.T, case.N, case.Hv), 1), dtype=torch.uint8,
                         device="cuda")
        split = 0
        if spine == "wgmma-overlap":
            from gdn_prefill import _ext
            sms = torch.cuda.get_device_properties(0).multi_processor_count
            split = _ext._overlap_split_rule(case.T, case.N, case.Hv, sms) or 0

        def mk(s):
            slots = s.extra.get("slots")
            idx = None if slots is None else slots.to(torch.int32)

            def call():
                return _gdn_call(impl, s, s.out, s.state, cu["cu32"], use_l2, ws, split, max(case.lens), idx)
            return call
        calls = [mk(s) for s in sets]
        ran = calls[0]()
        if ran != spine:
            raise RuntimeError(f"asked for spine {spine!r}, prefill ran {ran!r}")
        return calls, ""
    if impl in ("fla", "flashinfer"):
        peers = [peer_call(impl, case, s, cu, use_l2) for s in sets]
        return [p.call for p in peers], peers[0].note
    raise ValueError(f"unknown implementation {impl!r}")


@dataclass
class PeerCall:
    """One peer's call on one buffer set, its arguments mapped as this harness passes them (FLA:
    [1, T, H, D] views of the set, int64 cu_seqlens and, where its signature takes it,
    cu_seqlens_cpu; FlashInfer: alpha = exp(g), the state transposed to [N, Hv, V, K], output and
    output_state preallocated).
      call()       one call on torch's current stream; returns what the implementation returns
                   (what the timing harness times)
      result(ret)  call()'s return -> (o [T, Hv, V], final state [N, Hv, K, V]) in our conventions
                   (views where the layouts allow)
      prepare()    on the current stream: derive the converted inputs again from the set's tensors
                   (after new values were copied into them) and fill preallocated outputs with NaN
      note         what was passed (FlashInfer: and the route it takes)"""
    call: Callable[[], Any]
    result: Callable[[Any], tuple]
    prepare: Callable[[], None]
    note: str = ""


def peer_call(impl: str, case: Case, s, cu: dict, use_l2: bool) -> PeerCall:
    """PeerCall of impl "fla" or "flashinfer" on set `s` (FlashInfer's converted inputs are kept in
    s.extra["fi"], made on the first call for a set and reused after).  Where the set holds a state
    pool (s.extra["slots"]), a peer that takes slot indices (FlashInfer's state_indices) updates its
    own pool in place; one that does not (FLA) is called as engines call it: gather, call, scatter
    (pooled)."""
    import torch
    slots = s.extra.get("slots")
    if impl == "fla":
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule as fn
        kw = _filter_kwargs(fn, dict(output_final_state=True, cu_seqlens=cu["cu64"],
                                     cu_seqlens_cpu=cu["cu64_cpu"], use_qk_l2norm_in_kernel=use_l2))
        note = "" if "cu_seqlens_cpu" in kw else "cu_seqlens_cpu not accepted by this FLA"
        q, k, v, g, b = s.q[None], s.k[None], s.v[None], s.g[None], s.beta[None]
        if slots is None:
            return PeerCall(call=lambda: fn(q, k, v, g, b, initial_state=s.state, **kw),
                            result=lambda ret: (ret[0][0], ret[1]), prepare=lambda: None, note=note)
        last = {}

        def fla_once(init):
            last["o"], final = fn(q, k, v, g, b, initial_state=init, **kw)
            return final
        call = pooled(fla_once, s.state, slots)
        return PeerCall(call=call, result=lambda ret: (last["o"][0], ret), prepare=lambda: None,
                        note=(note + "; " if note else "") + "state pool: gather, call, scatter")
    if impl == "flashinfer":
        from flashinfer.gdn_prefill import chunk_gated_delta_rule as fn
        from ..reference import _l2norm_inv
        honours_l2 = "use_qk_l2norm_in_kernel" in _filter_kwargs(fn, dict(use_qk_l2norm_in_kernel=use_l2))
        in_place = slots is not None and "state_indices" in _filter_kwargs(fn, dict(state_indices=slots))
        note = f"alpha=exp(g), state [N,Hv,V,K], route: {flashinfer_route(case)}"
        if use_l2:
            note += ("; q/k normalised by FlashInfer (use_qk_l2norm_in_kernel)" if honours_l2 else
                     "; q/k pre-normed (this FlashInfer takes no use_qk_l2norm_in_kernel)")
        if slots is not None:
            note += "; state pool in place (state_indices)" if in_place else "; state pool: gather, call, scatter"

        def converted() -> dict:
            q, k = s.q, s.k
            if use_l2 and not honours_l2:       # the kernels' (and the oracle's) rsqrt(|x|^2 + eps)
                q = (q.float() * _l2norm_inv(q.float())[..., None]).to(q.dtype)
                k = (k.float() * _l2norm_inv(k.float())[..., None]).to(k.dtype)
            return dict(q=q, k=k, alpha=s.g.exp().contiguous(), state=s.state.transpose(-1, -2).contiguous())
        if "fi" not in s.extra:
            c = converted()
            st = c["state"]         # in place: the pool is its own output; else one state per sequence
            out_state = st if in_place else st.new_empty((case.N,) + tuple(st.shape[1:]))
            s.extra["fi"] = dict(c, out=torch.empty_like(s.out), out_state=out_state)
        f = s.extra["fi"]
        kw = _filter_kwargs(fn, dict(scale=None, output_final_state=True, cu_seqlens=cu["cu64"],
                                     use_qk_l2norm_in_kernel=use_l2, output=f["out"], max_seqlen=max(case.lens)))
        if in_place:
            kw.update(initial_state=f["state"], output_state=f["state"], state_indices=slots)
        elif slots is None:
            kw.update(initial_state=f["state"], output_state=f["out_state"])

        def prepare() -> None:
            for name, t in converted().items():
                if t is not f[name]:            # q, k are the set's own tensors unless pre-normed
                    f[name].copy_(t)
            f["out"].fill_(float("nan"))
            if f["out_state"] is not f["state"]:
                f["out_state"].fill_(float("nan"))

        def result(ret) -> tuple:
            o, st = ret if isinstance(ret, tuple) else (ret, f["out_state"])
            if in_place:
                st = st.index_select(0, slots)
            return o, st.transpose(-1, -2)
        if slots is not None and not in_place:
            def fi_once(init):
                fn(f["q"], f["k"], s.v, f["alpha"], s.beta, initial_state=init, output_state=f["out_state"], **kw)
                return f["out_state"]
            call = pooled(fi_once, f["state"], slots)
            return PeerCall(call=lambda: (f["out"], call()), result=result, prepare=prepare, note=note)
        return PeerCall(call=lambda: fn(f["q"], f["k"], s.v, f["alpha"], s.beta, **kw), result=result,
                        prepare=prepare, note=note)
    raise ValueError(f"not a peer implementation: {impl!r}")


# ===================================================================================== GPU: timing
def _median_stats(times_us: list[float]) -> dict:
    ts = sorted(times_us)
    q = lambda p: ts[min(len(ts) - 1, max(0, int(round(p * (len(ts) - 1)))))]  # noqa: E731
    return dict(median=statistics.median(ts), p10=q(0.1), p90=q(0.9), min=ts[0], reps=len(ts))


def _head_start(seconds: float) -> None:
    """Keep the GPU busy while the host enqueues the timed loop (hides launch latency in graph mode)."""
    import torch
    try:
        torch.cuda._sleep(int(seconds * 1.5e9))
    except Exception:
        pass


def _event_loop(run_one, n: int, reps: int, *, head_start_s: float = 0.0) -> list[float]:
    import torch
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    torch.cuda.synchronize()
    if head_start_s > 0:
        _head_start(head_start_s)
    for i in range(reps):
        starts[i].record()
        run_one(i % n)
        ends[i].record()
    torch.cuda.synchronize()
    return [a.elapsed_time(b) * 1e3 for a, b in zip(starts, ends)]


def one_call_graph(call, reps: int):
    """(median µs per replay, the graph) of one call captured in a CUDA graph, each replay timed
    alone on an idle GPU (host submission and drain included): warm-up on a side stream, the
    capture, three replays, then `reps` timed ones.  The microbenchmarks' "one call"."""
    import statistics

    import torch
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        call()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        call()
    for _ in range(3):
        graph.replay()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        graph.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3)
    return statistics.median(times), graph


def queued_graph_times(replay, n: int, reps: int) -> list[float]:
    """µs of each of `reps` graph replays (replay(i), i over n graphs round-robin) queued behind a
    sleep kernel, so the host's launch latency stays outside every sample (the graph method of
    this harness and of benchmarks/bench_spine.py)."""
    return _event_loop(replay, n, reps, head_start_s=min(reps * 15e-6, 0.03))


def _reps_for(t_us: float, budget_s: float, min_reps: int, max_reps: int) -> int:
    return int(max(min_reps, min(max_reps, budget_s / max(t_us * 1e-6, 1e-7))))


# Seconds each implementation runs before its timed repetitions (bench_prefill --warm-s).  Measured
# on an H200 (8x4K, per-replay series beside nvidia-smi): the first ~0.1 s of load run at 1980 MHz, then
# ~1845-1875, and from ~1 s, once the card's averaged power reaches its 700 W limit, 1665-1830 with
# a dip to 1485; 8x4K replays 660 -> 694 -> up to 800 us along the way.  Timed cold, a row measured
# boost clocks that no sustained load keeps (the quick harness: 661-671 us at 8x4K where the full
# one, timed after other rows had heated the card, read 721).  Warm, every row is timed on the
# sustained, power-limited clock, whatever ran before it.
WARM_S = 1.5


def _keep_busy(run_one, n: int, seconds: float) -> None:
    """Run the calls round-robin for `seconds` of wall time (a few queued at a time)."""
    import torch
    t_end = time.time() + seconds
    i = 0
    while time.time() < t_end:
        for _ in range(8):
            run_one(i % n)
            i += 1
        torch.cuda.synchronize()


def profiled_replays(call, n_sets: int, reps: int) -> list[tuple[float, float, str]]:
    """(start, end, name) of every CUDA kernel record, sorted, of `reps` replays of call(i)'s
    CUDA graphs (one per buffer set i, captured in one pool after an eager call of each, replayed
    round-robin after WARM_S of warm replays) under torch.profiler: the tools' per-launch views
    (tools/overlap_parts.py, tools/plan_timeline.py)."""
    import torch
    for i in range(n_sets):
        call(i)
    torch.cuda.synchronize()
    graphs = []
    pool = torch.cuda.graph_pool_handle()
    for i in range(n_sets):
        gr = torch.cuda.CUDAGraph()
        with torch.cuda.graph(gr, pool=pool):
            call(i)
        graphs.append(gr)
    _keep_busy(lambda i: graphs[i].replay(), len(graphs), WARM_S)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for r in range(reps):
            graphs[r % n_sets].replay()
        torch.cuda.synchronize()
    return sorted((e.time_range.start, e.time_range.end, e.name) for e in prof.events()
                  if e.device_type == torch.autograd.DeviceType.CUDA)


def _time_impl(calls: list, modes: tuple, budget_s: float, min_reps: int, max_reps: int,
               warm_s: float = 0.0) -> dict:
    """Warm up, then time the requested modes (each after `warm_s` seconds of its own calls: the
    sustained clock, WARM_S).  Returns {graph_us, graph_stats, eager_us, ...}."""
    import torch
    n = len(calls)
    out: dict = {}
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):                 # warm-up: every set once, then two more calls
        for i in range(n + 2):
            calls[i % n]()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    est = statistics.median(_event_loop(lambda i: calls[i](), n, min(n, 3)))
    if "graph" in modes:
        graphs = []
        try:
            pool = torch.cuda.graph_pool_handle()
            for c in calls:
                gr = torch.cuda.CUDAGraph()
                with torch.cuda.graph(gr, pool=pool):
                    c()
                graphs.append(gr)
            for gr in graphs:
                gr.replay()
            torch.cuda.synchronize()
            _keep_busy(lambda i: graphs[i].replay(), n, warm_s)
            reps = _reps_for(est, budget_s, min_reps, max_reps)
            st = _median_stats(queued_graph_times(lambda i: graphs[i].replay(), n, reps))
            out.update(graph_us=st["median"], graph_stats=st)
        except Exception as e:
            out["graph_error"] = f"{type(e).__name__}: {e}"
            try:
                torch.cuda.synchronize()
            except Exception:
                pass
        finally:
            del graphs
    if "eager" in modes:
        if "graph" not in modes:
            _keep_busy(lambda i: calls[i](), n, warm_s)
        reps = _reps_for(out.get("graph_us", est), budget_s, min_reps, max_reps)
        st = _median_stats(_event_loop(lambda i: calls[i](), n, reps))
        out.update(eager_us=st["median"], eager_stats=st)
    return out


def _record_failure(row: dict, e: Exception) -> None:
    """Keep a failed implementation's row with the first line of its error, and let any
    asynchronous CUDA error surface now rather than in the next implementation's timing."""
    import torch
    row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    try:
        torch.cuda.synchronize()
    except Exception:
        pass


def host_overhead(impls: list[str], Hk: int = 16, Hv: int = 32, T: int = 64, calls: int = HOST_OVERHEAD_CALLS,
                  use_l2: bool = False) -> list[dict]:
    """Wall-clock µs per Python call on a tiny problem (one sequence of T tokens), per implementation."""
    import torch
    case = Case(f"1x{T}", (T,), Hk, Hv)
    s = _make_set(case, 7, normed=not use_l2)
    cu = _cu(case)
    rows = []
    ours = [i for i in impls if i.startswith("gdn:")]
    ours = ["gdn:wgmma"] if "gdn:wgmma" in ours else ours[:1]
    targets = ours + [i for i in impls if not i.startswith("gdn:")]
    for impl in targets:
        row = dict(impl=impl if not impl.startswith("gdn:") else "gdn.prefill", problem=f"1x{T} @ {Hk}/{Hv}")
        try:
            (fn,), note = _calls(impl, case, [s], cu, use_l2)
            if impl.startswith("gdn:"):
                row["note"] = f"spine={impl[4:]}, out/state/workspace passed"
            else:
                row["note"] = note
            rows.append(row)
            row.update(_host_loop(fn, calls))
        except Exception as e:
            row["error"] = f"{type(e).__name__}: {e}"
            rows.append(row)
        if impl.startswith("gdn:"):
            # the FLA-shaped layer: allocates out and the final state, as a drop-in for FLA would
            import gdn_prefill
            q, k, v, g, b, st = s.q[None], s.k[None], s.v[None], s.g[None], s.beta[None], s.state
            spine = impl[4:]
            r2 = dict(impl="gdn.chunk_gated_delta_rule", problem=row["problem"],
                      note=f"FLA-shaped API, spine={spine}, allocates out and the final state")
            try:
                r2.update(_host_loop(lambda: gdn_prefill.chunk_gated_delta_rule(
                    q, k, v, g, b, initial_state=st, output_final_state=True, cu_seqlens=cu["cu32"],
                    use_qk_l2norm_in_kernel=use_l2, spine=spine), calls))
            except Exception as e:
                r2["error"] = f"{type(e).__name__}: {e}"
            rows.append(r2)
    del s
    torch.cuda.empty_cache()
    return rows


def host_cost_us(fn, calls: int = HOST_OVERHEAD_CALLS, samples: int = HOST_OVERHEAD_SAMPLES,
                 sleep_cycles: int = 300_000_000) -> float:
    """Median host microseconds per fn() call while the GPU is kept busy by a sleep kernel
    queued first (~150 ms), so launches only enter the queue and the host never waits for the
    GPU; a sample in which the sleep had already ended is discarded.  (Timing back-to-back
    calls on an idle GPU measures how fast the GPU drains tiny kernels, not the host.)"""
    import torch
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    per_call: list[float] = []
    for _ in range(4 * samples):
        torch.cuda._sleep(sleep_cycles)
        busy = torch.cuda.Event()
        busy.record()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        dt = time.perf_counter() - t0
        still_busy = not busy.query()
        torch.cuda.synchronize()
        if still_busy:
            per_call.append(dt / calls * 1e6)
        if len(per_call) == samples:
            break
    if not per_call:
        raise RuntimeError("every sample outlived the GPU's sleep kernel: the call waits for the GPU "
                           "(a host sync inside it?)")
    return statistics.median(per_call)


def _host_loop(fn, calls: int) -> dict:
    host = host_cost_us(fn, calls)
    gpu = None
    try:
        st = _time_impl([fn], ("graph",), 0.05, 20, 200)
        gpu = st.get("graph_us")
    except Exception:
        pass
    return dict(us_per_call=host, gpu_us=gpu, calls=calls)


def run_timing(cases: list[Case], args, log=print) -> dict:
    """Time every implementation on every case; writes partial JSON after each case if args.json_path."""
    import torch
    impls, skipped = _impl_list(args.impls)
    result = dict(meta=_meta(args, cases), rows=[], host_overhead=[], skipped=list(skipped))
    result["meta"]["implementations"] = impls
    if not impls:
        return derive(result)
    l2 = result["meta"].get("l2_bytes") or L2_FALLBACK_BYTES
    mem = result["meta"].get("memory_bytes")
    modes = tuple(m.strip() for m in args.modes.split(","))
    t_start = time.time()
    bar = Progress(len(cases), "bench_prefill", enable=not args.no_progress)
    with torch.no_grad():
        for ci, case in enumerate(cases):
            if args.budget_s and time.time() - t_start > args.budget_s:
                for c in cases[ci:]:
                    result["skipped"].append(dict(what=c.name, reason=f"time budget of {args.budget_s:g} s spent"))
                break
            bar.step(case.name)
            n_sets = rotation_sets(hbm_bytes(case.T, case.N, case.Hk, case.Hv), l2,
                                   memory_bytes=int(mem * SETS_MEMORY_SHARE) if mem else None)
            try:
                sets = [_make_set(case, args.seed + i, normed=not args.qk_l2norm, pool=getattr(args, "pool", False))
                        for i in range(n_sets)]
                cu = _cu(case)
            except Exception as e:
                for impl in impls:
                    result["rows"].append(_row(case, impl, n_sets, error=f"inputs: {type(e).__name__}: {e}"))
                bar.done()
                continue
            for impl in impls:
                row = _row(case, impl, n_sets)
                try:
                    calls, note = _calls(impl, case, sets, cu, args.qk_l2norm)
                    if note:
                        row["note"] = note
                    t = _time_impl(calls, modes, args.rep_budget_s, args.min_reps, args.max_reps, args.warm_s)
                    row.update({k: v for k, v in t.items()})
                    del calls
                except Exception as e:
                    _record_failure(row, e)
                result["rows"].append(row)
                torch.cuda.empty_cache()
            del sets
            torch.cuda.empty_cache()
            bar.write(f"  {case.name} ({n_sets} sets): " + " | ".join(
                f"{r['impl']} " + (f"{r['graph_us']:.1f} µs" if r.get("graph_us") else
                                   f"eager {r['eager_us']:.1f} µs" if r.get("eager_us") else "error")
                for r in result["rows"] if r["case"] == case.name))
            bar.done()
            if getattr(args, "json_path", None):
                write_json(derive(result), args.json_path)
    bar.close()
    if not args.no_host_overhead and impls:
        hk, hv = (cases[0].Hk, cases[0].Hv) if cases else (16, 32)
        try:
            result["host_overhead"] = host_overhead(impls, hk, hv, use_l2=args.qk_l2norm)
        except Exception as e:
            result["host_overhead"] = [dict(impl="all", error=f"{type(e).__name__}: {e}")]
    result["meta"]["wall_s"] = round(time.time() - t_start, 1)
    return derive(result)


def _row(case: Case, impl: str, n_sets: int, **kw) -> dict:
    return dict(case=case.name, shape=case.shape, N=case.N, T=case.T, Hk=case.Hk, Hv=case.Hv, K=case.K, V=case.V,
                impl=impl, n_sets=n_sets, **kw)


# ===================================================================================== GPU: numerics
def _bitwise_equal(a, b) -> bool:
    import torch
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    view = {torch.bfloat16: torch.int16, torch.float16: torch.int16, torch.float32: torch.int32,
            torch.float64: torch.int64}.get(a.dtype)
    return bool(torch.equal(a.view(view), b.view(view))) if view is not None else bool(torch.equal(a, b))


def _run_once(impl: str, case: Case, s, cu, use_l2: bool):
    """(o [T, Hv, V], final state [N, Hv, K, V]) of one call on fresh copies of the state / outputs."""
    import torch
    if impl.startswith("gdn:"):
        import gdn_prefill
        out = torch.full_like(s.out, float("nan"))
        state = s.state.clone()
        ws = torch.empty(max(gdn_prefill.workspace_bytes(case.T, case.N, case.Hv), 1), dtype=torch.uint8,
                         device="cuda")
        _gdn_call(impl, s, out, state, cu["cu32"], use_l2, ws, max_seqlen=max(case.lens))
        return out, state
    fresh = _Set(q=s.q, k=s.k, v=s.v, g=s.g, beta=s.beta, state=s.state.clone(), out=s.out)
    peer = peer_call(impl, case, fresh, cu, use_l2)
    peer.prepare()
    return peer.result(peer.call())


def _numerics_impl(impl: str, case: Case, s, cu, use_l2: bool, o_ref, s_ref) -> dict:
    """Errors of the first run against the oracle; bitwise comparison of the next runs with the first."""
    import torch
    from .. import reference as ref
    r: dict = {}
    o0, st0 = _run_once(impl, case, s, cu, use_l2)
    torch.cuda.synchronize()
    o0, st0 = o0.clone(), st0.contiguous().clone()
    with torch.device("cuda"):
        r["err_o"] = ref.rel_err(o0, o_ref)
        r["err_state"] = ref.rel_err(st0, s_ref)
    r["nonfinite_o"] = int((~torch.isfinite(o0.float())).sum().item())
    same = True
    for _ in range(NUMERICS_REPEATS - 1):
        o, st = _run_once(impl, case, s, cu, use_l2)
        torch.cuda.synchronize()
        same = same and _bitwise_equal(o0, o) and _bitwise_equal(st0, st.contiguous())
        del o, st
    r["bitwise_identical"] = same
    return r


def run_numerics(args, log=print) -> dict:
    """Per implementation: rel error of o and of the final state against the fp64 oracle (on the GPU) at
    each T, one sequence, dense initial state; and whether NUMERICS_REPEATS runs on the same inputs are
    bitwise identical.  If the oracle runs out of memory at the requested heads, T is checked at
    NUMERICS_FALLBACK_HEADS instead and a note says so."""
    import torch
    from .. import reference as ref
    impls, skipped = _impl_list(args.impls)
    Ts = [int(t) for t in str(args.numerics_T).split(",") if t.strip()]
    heads = parse_heads(args.numerics_heads)
    num = dict(meta=dict(_meta(args, []), repeats=NUMERICS_REPEATS, numerics_T=Ts,
                         numerics_heads=f"{heads[0]}/{heads[1]}"), rows=[], notes=[], skipped=skipped)
    for sk in skipped:
        num["notes"].append(f"{sk['what']}: skipped, {sk['reason']}")
    bar = Progress(len(Ts), "numerics", enable=not args.no_progress)
    with torch.no_grad():
        for T in Ts:
            bar.step(f"T={T}")
            tried = [heads] + ([NUMERICS_FALLBACK_HEADS] if heads != NUMERICS_FALLBACK_HEADS else [])
            for hk, hv in tried:
                case = Case(f"1x{T}", (T,), hk, hv)
                s = o_ref = s_ref = None
                try:
                    s = _make_set(case, args.seed + 1000 + T, normed=not args.qk_l2norm)
                    cu = _cu(case)
                    with torch.device("cuda"):
                        o_ref, s_ref = ref.chunked(s.q, s.k, s.v, s.g, s.beta, cu_seqlens=cu["cu32"],
                                                   state=s.state, use_qk_l2norm=args.qk_l2norm)
                except torch.cuda.OutOfMemoryError:
                    s = o_ref = s_ref = None
                    torch.cuda.empty_cache()
                    num["notes"].append(f"T={T}: the fp64 oracle ran out of GPU memory at Hk/Hv={hk}/{hv}.")
                    continue
                except Exception as e:
                    for impl in impls:
                        num["rows"].append(dict(T=T, Hk=hk, Hv=hv, impl=impl,
                                                error=f"oracle: {type(e).__name__}: {e}"))
                    break
                if (hk, hv) != heads:
                    num["notes"].append(f"T={T} was checked at Hk/Hv={hk}/{hv} instead of {heads[0]}/{heads[1]} "
                                        f"(fp64 oracle memory).")
                for impl in impls:
                    r = dict(T=T, Hk=hk, Hv=hv, impl=impl)
                    try:
                        r.update(_numerics_impl(impl, case, s, cu, args.qk_l2norm, o_ref, s_ref))
                        if impl == "flashinfer":
                            r["note"] = "alpha=exp(g), state [N,Hv,V,K]"
                    except Exception as e:
                        _record_failure(r, e)
                    num["rows"].append(r)
                    log(f"  T={T} {hk}/{hv} {impl}: " + (r.get("error") or
                        f"err o {r['err_o']:.3e}, state {r['err_state']:.3e}, bitwise {r['bitwise_identical']}"))
                    torch.cuda.empty_cache()
                s = o_ref = s_ref = None
                torch.cuda.empty_cache()
                break
            bar.done()
    bar.close()
    return num


# ===================================================================================== CLI
def build_parser(default_out: str = os.path.join("benchmarks", "results")) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="bench_prefill", description="GDN prefill against FLA / FlashInfer on Hopper.",
                                 epilog=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help=f"shapes {','.join(QUICK_SHAPES)} at Hk/Hv 16/32, fewer repetitions")
    ap.add_argument("--shapes", help=f"comma list of shapes or globs over {','.join(SHAPES)} (or new BxT, e.g. 4x1000)")
    ap.add_argument("--heads", help="comma list of Hk/Hv (default 16/32,16/64,8/8; --quick: 16/32)")
    ap.add_argument("--impls", help="comma list among gdn, gdn:<spine>, fla, flashinfer (default: all available)")
    ap.add_argument("--modes", default="graph,eager", help="graph,eager (default both)")
    ap.add_argument("--out", default=default_out, help="output directory (default %(default)s)")
    ap.add_argument("--tag", default=None, help="file name stem (default prefill_<date> / prefill_quick_<date>)")
    ap.add_argument("--peak-tflops", type=float, default=PEAK_TFLOPS, help="compute peak, TFLOP/s (default %(default)s)")
    ap.add_argument("--peak-tbps", type=float, default=PEAK_TBPS, help="HBM bandwidth, TB/s (default %(default)s)")
    ap.add_argument("--qk-l2norm", action="store_true", help="use_qk_l2norm in kernel (default: pre-normed q/k)")
    ap.add_argument("--pool", action="store_true",
                    help="the state as a serving engine's pool (2N + 1 slots) updated through slot indices "
                         "(gdn and FlashInfer in place; FLA: gather, call, scatter); default: a dense [N] state")
    ap.add_argument("--rep-budget-s", type=float, default=None,
                    help="seconds of repetitions per implementation and mode (default 0.3, --quick 0.1)")
    ap.add_argument("--min-reps", type=int, default=None, help="default 10 (--quick 5)")
    ap.add_argument("--max-reps", type=int, default=None, help="default 300 (--quick 50)")
    ap.add_argument("--warm-s", type=float, default=WARM_S,
                    help="seconds each implementation runs its own calls before its timed repetitions, so every "
                         "row is timed on the card's sustained (power-limited) clock, not its first boost "
                         "(default %(default)s; 0: time from cold)")
    ap.add_argument("--budget-s", type=float, default=None,
                    help="stop starting new cases after this many seconds (the rest are listed as skipped)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-host-overhead", action="store_true")
    ap.add_argument("--no-plot", action="store_true")
    ap.add_argument("--no-progress", action="store_true")
    ap.add_argument("--numerics", action="store_true", help="also write the numerics report (after the timing)")
    ap.add_argument("--numerics-only", action="store_true", help="only the numerics report")
    ap.add_argument("--numerics-T", default=",".join(str(t) for t in NUMERICS_T),
                    help="sequence lengths of the numerics report (default %(default)s)")
    ap.add_argument("--numerics-heads", default=f"{NUMERICS_HEADS[0]}/{NUMERICS_HEADS[1]}",
                    help="Hk/Hv of the numerics report (default %(default)s; falls back to 2/4 if the oracle OOMs)")
    ap.add_argument("--list", action="store_true", help="print the cases with their FLOP/byte floors and exit (no GPU)")
    ap.add_argument("--plot-from", nargs="+", metavar="JSON",
                    help="no timing: draw the shapes' times of these result files (in order) into --plot-out "
                         "(one bar per implementation and shape, log scale; no GPU)")
    ap.add_argument("--plot-out", default=os.path.join("docs", "prefill_h200.png"),
                    help="the --plot-from picture (default %(default)s)")
    ap.add_argument("--plot-mode", choices=("graph", "eager"), default="graph", help="the --plot-from column")
    return ap


def _finish_args(a) -> None:
    a.rep_budget_s = a.rep_budget_s if a.rep_budget_s is not None else (0.1 if a.quick else 0.3)
    a.min_reps = a.min_reps if a.min_reps is not None else (5 if a.quick else 10)
    a.max_reps = a.max_reps if a.max_reps is not None else (50 if a.quick else 300)


def list_cases(cases: list[Case], peak_tflops: float = PEAK_TFLOPS, peak_tbps: float = PEAK_TBPS) -> str:
    lines = ["| case | N | tokens | MFLOP/token | KB/token (no state) | compute floor µs | HBM floor µs | sets |",
             "|---|---|---|---|---|---|---|---|"]
    for c in cases:
        fc, fh = floors_us(c.T, c.N, c.Hk, c.Hv, c.K, c.V, peak_tflops=peak_tflops, peak_tbps=peak_tbps)
        per_tok = (hbm_bytes(c.T, c.N, c.Hk, c.Hv, state=False) - 4 * (c.N + 1)) / c.T
        lines.append(f"| {c.name} | {c.N} | {c.T} | {flops_per_token(c.Hv, c.K, c.V) / 1e6:.2f} | {per_tok / 1e3:.1f} | "
                     f"{fc:.1f} | {fh:.1f} | {rotation_sets(hbm_bytes(c.T, c.N, c.Hk, c.Hv))} |")
    return "\n".join(lines)


def main(argv=None, *, default_out: str = os.path.join("benchmarks", "results")) -> int:
    a = build_parser(default_out).parse_args(argv)
    if a.plot_from:
        results = [json.load(open(path)) for path in a.plot_from]
        png = plot_shapes(results, a.plot_out, a.plot_mode)
        print(f"wrote {png}" if png else "bench_prefill: no plot (matplotlib absent, or no row has a time)")
        return 0 if png else 1
    _finish_args(a)
    try:
        cases = select_cases(a.quick, a.shapes, a.heads)
    except ValueError as e:
        print(f"bench_prefill: {e}", file=sys.stderr)
        return 2
    if a.list:
        print(list_cases(cases, a.peak_tflops, a.peak_tbps))
        return 0
    ok, why = hopper_status()
    if not ok:
        print(f"bench_prefill: no Hopper GPU ({why}); nothing was timed.  "
              f"`--list` shows the cases and their floors; `python -m gdn_prefill` shows the plan.")
        return 1
    date = datetime.date.today().isoformat()
    stem = a.tag or (f"prefill_quick_{date}" if a.quick else f"prefill_{date}")
    os.makedirs(a.out, exist_ok=True)
    rc = 0
    if not a.numerics_only:
        a.json_path = os.path.join(a.out, stem + ".json")
        result = run_timing(cases, a)
        write_json(result, a.json_path)
        md = markdown_report(result)
        write_text(md, os.path.join(a.out, stem + ".md"))
        png = None if a.no_plot else plot(result, os.path.join(a.out, stem + ".png"))
        print(md)
        print(f"wrote {a.json_path}, {os.path.join(a.out, stem + '.md')}" + (f", {png}" if png else
              ("" if a.no_plot else " (no plot: matplotlib absent)")))
        if any(r.get("error") for r in result["rows"] if r["impl"].startswith("gdn:")) or \
                not any(r["impl"].startswith("gdn:") for r in result["rows"]):
            rc = 1
    if a.numerics or a.numerics_only:
        num = run_numerics(a)
        nstem = stem.replace("prefill", "numerics", 1) if "prefill" in stem else stem + "_numerics"
        write_json(num, os.path.join(a.out, nstem + ".json"))
        nmd = numerics_markdown(num)
        write_text(nmd, os.path.join(a.out, nstem + ".md"))
        print(nmd)
        print(f"wrote {os.path.join(a.out, nstem + '.json')}, {os.path.join(a.out, nstem + '.md')}")
        if any(r.get("error") for r in num["rows"] if r["impl"].startswith("gdn:")):
            rc = 1
    return rc


# ===================================================================================== python -m gdn_prefill
REPRESENTATIVE = Case("1x8K", (8192,), 16, 32)
MAIN_JOB_BOUND = 1e-2       # relative error bound of the GPU tests (bf16 operands, fp32 state)


def show_plan(case: Case = REPRESENTATIVE, out=print) -> bool:
    """Print gdn_prefill.explain() for `case` on CPU tensors (nothing launched).  True if it worked."""
    import torch
    out(f"Plan for {case.N} sequence(s), {case.T} tokens, Hk/Hv = {case.heads}, K = V = {case.K}, bf16, "
        f"fp32 state 'kv' (gdn_prefill.explain on CPU tensors; nothing is launched):")
    try:
        import gdn_prefill
        T = case.T
        q = torch.empty(T, case.Hk, case.K, dtype=torch.bfloat16)
        v = torch.empty(T, case.Hv, case.V, dtype=torch.bfloat16)
        gb = torch.empty(T, case.Hv, dtype=torch.float32)
        state = torch.empty(case.N, case.Hv, case.K, case.V, dtype=torch.float32)
        cu = torch.tensor(list(accumulate(case.lens, initial=0)), dtype=torch.int32)
        plan = gdn_prefill.explain(q, torch.empty_like(q), v, gb, torch.empty_like(gb), torch.empty_like(v), state,
                                   cu_seqlens=cu, check_device=False, max_seqlen=max(case.lens))
    except Exception as e:
        out(f"  (the plan is unavailable: {type(e).__name__}: {e})")
        return False
    out("  spines: " + "; ".join(f"{k}: {v}" for k, v in plan["spines"].items()) + f"  -> auto runs '{plan['chosen']}'")
    if "plan" in plan:
        out(f"  plan: {plan['plan']['name']}: {plan['plan']['why']}")
    if "fused_output" in plan:
        out(f"  output fused into the spine: {plan['fused_output']}")
    if "overlap" in plan:
        out(f"  stage 1 overlapped with the spine: {plan['overlap']}")
    out(f"  {'kernel':<34} {'grid':<16} {'block':>5} {'cluster':>7} {'smem bytes':>11}")
    for kern in plan["kernels"]:
        out(f"  {kern['name']:<34} {str(tuple(kern['grid'])):<16} {str(kern.get('block')):>5} "
            f"{str(kern.get('cluster', 1)):>7} {str(kern.get('smem_bytes')):>11}")
    wb = plan["workspace_bytes"]
    out(f"  workspace: {wb:,} bytes ({wb / 2**20:.1f} MiB); chunk slots: {plan.get('chunk_slots')}")
    try:
        out(f"  compiled variants: {', '.join(gdn_prefill.compiled_variants())}")
    except Exception:
        pass
    fc, fh = floors_us(case.T, case.N, case.Hk, case.Hv)
    out(f"  floors on H200: {flops_per_token(case.Hv) / 1e6:.2f} MFLOP/token -> {fc:.1f} µs at {PEAK_TFLOPS:g} TFLOP/s; "
        f"{hbm_bytes(case.T, case.N, case.Hk, case.Hv) / 1e6:.1f} MB of HBM traffic -> {fh:.1f} µs at {PEAK_TBPS:g} TB/s")
    return True


def oracle_check(out=print, tol: float = 1e-10) -> bool:
    """reference.recurrent against reference.chunked on a tiny CPU problem (float64).  True if they agree."""
    import torch
    from .. import reference as ref
    lens, Hk, Hv, D = [100, 37], 1, 2, 128
    n_threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        inp = ref.make_inputs(lens, Hk, Hv, K=D, V=D, seed=0, state="dense", l2norm_inputs=True)
        o_r, s_r = ref.recurrent(**inp)
        o_c, s_c = ref.chunked(**inp)
        eo, es = ref.rel_err(o_c, o_r), ref.rel_err(s_c, s_r)
    except Exception as e:
        out(f"Oracle check failed to run: {type(e).__name__}: {e}")
        return False
    finally:
        torch.set_num_threads(n_threads)
    good = eo <= tol and es <= tol
    out(f"Oracle check (CPU, float64): reference.recurrent vs reference.chunked, sequences {lens}, "
        f"Hk/Hv = {Hk}/{Hv}, K = V = {D}, dense initial state:")
    out(f"  rel err o = {eo:.2e}, final state = {es:.2e}  -> {'OK' if good else 'MISMATCH'} (tolerance {tol:g})")
    return good


def main_job(argv=None) -> int:
    """`python -m gdn_prefill`: on a Hopper GPU, the --quick benchmark and its table, then every
    implementation against the fp64 oracle at T = 4096 (exit 1 if a gdn spine errs or exceeds 1e-2);
    elsewhere, say so plainly, show the plan and check the oracle on the CPU.  Returns an exit code
    (0: everything shown ran and passed).  `argv` takes bench_prefill options (e.g. --heads 8/8)."""
    try:
        from .. import __version__
    except Exception:
        __version__ = "?"
    ok, why = hopper_status()
    if ok:
        print(f"gdn-prefill {__version__} on {why}: quick benchmark (Hk/Hv 16/32; see benchmarks/bench_prefill.py "
              f"for the full sweep)", flush=True)
        a = build_parser().parse_args(["--quick", "--no-plot", "--numerics-T", "4096"] + list(argv or []))
        _finish_args(a)
        a.json_path = None
        result = run_timing(select_cases(a.quick, a.shapes, a.heads), a)
        print(markdown_report(result))
        ours = [r for r in result["rows"] if r["impl"].startswith("gdn:")]
        ok_t = bool(ours) and not any(r.get("error") for r in ours)
        print("Against the fp64 oracle (one sequence, dense initial state):", flush=True)
        num = run_numerics(a, log=lambda *_: None)
        print(numerics_markdown(num))
        mine = [r for r in num["rows"] if r["impl"].startswith("gdn:")]
        ok_n = bool(mine) and all(not r.get("error") and r["err_o"] <= MAIN_JOB_BOUND and
                                  r["err_state"] <= MAIN_JOB_BOUND for r in mine)
        if not ok_n:
            print(f"gdn-prefill: an error above {MAIN_JOB_BOUND:g} (or a failed run) in the oracle check above")
        return 0 if (ok_t and ok_n) else 1
    print(f"gdn-prefill {__version__}: no Hopper GPU — {why}.  Nothing can be timed here; "
          f"showing the launch plan and a CPU check of the fp64 oracle instead.\n")
    plan_ok = show_plan()
    print()
    oracle_ok = oracle_check()
    return 0 if (plan_ok and oracle_ok) else 1
