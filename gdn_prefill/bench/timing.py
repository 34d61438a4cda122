"""The benchmark's timers: CUDA-graph replays and eager calls between CUDA events, the warm-up
that holds the card at its sustained clock, and the host cost of one call with the GPU kept busy."""
from __future__ import annotations

import statistics
import time

from .cases import HOST_OVERHEAD_CALLS, HOST_OVERHEAD_SAMPLES, Case
from .inputs import _cu, _make_set
from .peers import _calls


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
    round-robin after WARM_S of warm replays) under torch.profiler: tools/overlap_parts.py's
    per-launch view."""
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
