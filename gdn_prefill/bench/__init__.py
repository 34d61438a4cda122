"""Benchmark harness: the whole prefill against FLA (and FlashInfer when importable).

    python benchmarks/bench_prefill.py [--quick] [--shapes 1x8K,varlen16] [--heads 16/32] ...
    python -m gdn_prefill            # main_job(): --quick on a Hopper GPU, else the plan + an oracle check

A module per concern: cases (shapes, constants, the floor formulas), report (derived columns,
tables, JSON, the plot), env (versions, the run's metadata), inputs (buffer sets on the GPU, a
state pool), peers (how each implementation is called), timing (graph / eager timers, host
cost); this one runs them (run_timing, run_numerics, the CLI, main_job) and hands their names on
as bench.<name>.  None imports anything heavy at module level (torch, the extension, FLA and
FlashInfer are imported inside the functions that need them), so the formulas and the report
writers work on any machine, and `import gdn_prefill.bench` never loads the CuTe DSL.

What is timed
-------------
Every implementation runs in this one process, on the same inputs, one after another:
``gdn:<spine>`` (gdn_prefill.prefill with ``spine=<spine>``, one row per spine compiled
into the build; ``gdn:wgmma`` fuses the output into the spine where the inputs allow it,
``gdn:wgmma-4k`` runs the same spine in the unfused plan, spine then fwd_o,
through the stage hook, so each table shows what the fusion gains, and ``gdn:wgmma-serial`` the
fused plan's serial form (stage 1, then the spine: no overlap plan, no segments), so it shows what
those plans gain where they run,
and ``gdn:wgmma-single`` the single plan forced (cute_kernels/single.py; prefill() runs it only
where its rule applies), and ``gdn:invariant`` prefill(batch_invariant=True)), ``fla``
(fla.ops.gated_delta_rule.chunk_gated_delta_rule) and
``flashinfer`` (flashinfer.gdn_prefill.chunk_gated_delta_rule) and ``flashqla``
(flash_qla.chunk_gated_delta_rule, FLA's signature; TileLang kernels), each skipped when it does
not import.  Inputs are bf16 q/k/v, fp32 g (log decay) and beta, a dense fp32 initial
state that every implementation reads and whose final value it writes, K = V = 128,
scale K^-1/2.  By default q and k are unit-normed when generated and
``use_qk_l2norm`` is False everywhere (the kernels alone); ``--qk-l2norm`` turns the
normalisation on for every implementation, as engines call them (FlashInfer 0.7.2 runs it as a separate
kernel before its chunk kernel; a FlashInfer without the flag gets pre-normed copies).
``--pool``: the state is a pool of 2N + 1 slots updated through slot indices (gdn and
FlashInfer in place; FLA and FlashQLA, which take no indices, gathered and scattered around their
calls).  ``--gates mixed``: each head decays at its own rate, some slow enough to remember a whole
prompt; ``--gates slow``: every head does (inputs.GATES says why work that depends on the decay
needs them).

Each implementation gets everything it needs prepared outside the timed region:
gdn gets packed [T, H, D] tensors, int32 cu_seqlens, out, state and workspace
preallocated; FLA gets [1, T, H, D] views of the same memory, int64 cu_seqlens and,
when its signature accepts it, ``cu_seqlens_cpu`` (no host sync); FlashInfer gets
alpha = exp(g), the state transposed to [N, Hv, V, K], and preallocated output and
output_state; FlashQLA is called as FLA is, with its defaults (auto_cp).  FLA and FlashQLA
allocate their outputs inside the call, as their APIs do.

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
import json
import os
import sys
import time
from itertools import accumulate

from .cases import (  # noqa: F401  (re-exported: the benchmark scripts and tests use bench.<name>)
    CHUNK, PEAK_TFLOPS, PEAK_TBPS, L2_FALLBACK_BYTES, SETS_MEMORY_SHARE, HOST_OVERHEAD_CALLS, HOST_OVERHEAD_SAMPLES, HEADS, SHAPES, QUICK_HEADS, QUICK_SHAPES, VARLEN_SEED, VARLEN_N, VARLEN_TOKENS, NUMERICS_T, NUMERICS_HEADS, NUMERICS_FALLBACK_HEADS, NUMERICS_REPEATS, varlen_lengths, parse_shape, parse_heads, Case, select_cases, flops_per_token, flops, hbm_bytes, floors_us, rotation_sets)
from .report import (  # noqa: F401
    derive, _fmt, _ratio, _note, markdown_report, numerics_markdown, write_json, table_report, write_text, plot, plot_shapes,
    Progress)
from .env import _meta, _version, peer_versions  # noqa: F401
from .inputs import GATES, _Set, _cu, _make_set, draw_gates, pool_slots, pooled  # noqa: F401
from .peers import _calls, _gdn_call, _impl_list, flashinfer_route, peer_call  # noqa: F401
from .timing import (  # noqa: F401
    WARM_S, _keep_busy, _record_failure, _time_impl, eager_median_us, host_cost_us, host_overhead, one_call_graph,
    profiled_replays, queued_graph_times)

# used by the benchmark scripts and tests as bench.<name> (named here so that pyflakes, which
# reads no noqa comments, sees them used)
_REEXPORTED = (CHUNK, HEADS, QUICK_HEADS, VARLEN_SEED, VARLEN_N, VARLEN_TOKENS, parse_shape, flops, _fmt, _ratio,
               _note, table_report, _version, pool_slots, pooled, flashinfer_route, peer_call, WARM_S, _keep_busy,
               eager_median_us, host_cost_us, one_call_graph, profiled_replays, queued_graph_times, HOST_OVERHEAD_CALLS,
               HOST_OVERHEAD_SAMPLES, varlen_lengths)


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


def script_cannot_time(script: str) -> bool:
    """A benchmark script's first check: True, having said why, where no Hopper GPU can time it
    (the script then exits 0)."""
    ok, why = hopper_status()
    if not ok:
        print(f"{script}: no Hopper GPU ({why}); nothing to time")
    return not ok


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
                sets = [_make_set(case, args.seed + i, normed=not args.qk_l2norm, pool=args.pool, gates=args.gates)
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
                    s = _make_set(case, args.seed + 1000 + T, normed=not args.qk_l2norm, gates=args.gates)
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
    ap.add_argument("--heads", help="comma list of Hk/Hv, or qwen3.5 (its GDN layers' seven head counts) "
                                    "(default 16/32,16/64,8/8; --quick: 16/32)")
    ap.add_argument("--impls", help="comma list among gdn, gdn:<spine>, fla, flashinfer, flashqla (default: all available)")
    ap.add_argument("--modes", default="graph,eager", help="graph,eager (default both)")
    ap.add_argument("--out", default=default_out, help="output directory (default %(default)s)")
    ap.add_argument("--tag", default=None, help="file name stem (default prefill_<date> / prefill_quick_<date>)")
    ap.add_argument("--peak-tflops", type=float, default=PEAK_TFLOPS, help="compute peak, TFLOP/s (default %(default)s)")
    ap.add_argument("--peak-tbps", type=float, default=PEAK_TBPS, help="HBM bandwidth, TB/s (default %(default)s)")
    ap.add_argument("--qk-l2norm", action="store_true", help="use_qk_l2norm in kernel (default: pre-normed q/k)")
    ap.add_argument("--gates", choices=GATES, default="fast",
                    help="the gates' log-decay: fast (every head forgets within a few chunks) or mixed (per-head "
                         "rates from -0.3 to -1e-4 a token: some heads remember a whole prompt) or slow (every head "
                         "-1e-4 a token: none forgets); default %(default)s")
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
