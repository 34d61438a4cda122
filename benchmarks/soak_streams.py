"""Soak prefill() and its peers under concurrent streams and host threads: no hang, no wrong bit.

    python benchmarks/soak_streams.py [--runs 20] [--iters 200] [--modes streams2,threads4]
                                      [--impls gdn,fla,flashinfer,flashinfer-cp]
                                      [--shape 1x8192] [--heads 16/32]
                                      [--fused-shape 8x1024] [--fused-heads 16/32]
                                      [--cp-shape 1x8192] [--cp-heads 2/4]
                                      [--stall 10] [--first-stall 300] [--md PATH] [--json PATH]
    python benchmarks/soak_streams.py --worker streams2 --impl gdn --iters 100   (one run; what the soak repeats)

Implementations (--impls, default all; one that is not installed gets a "not installed" row):
  gdn            gdn_prefill.prefill() at --shape / --heads (default 1 x 8192 at 16/32, the shape
                 of the overlap plan), max_seqlen given as an engine gives it (4 x 2048 at
                 16/32: the single plan)
  fla            FLA's fla.ops.gated_delta_rule.chunk_gated_delta_rule at --shape / --heads
  flashinfer     flashinfer.gdn_prefill.chunk_gated_delta_rule at --fused-shape / --fused-heads,
                 a shape where FlashInfer takes its fused route (default 8 x 1024 at 16/32)
  flashinfer-cp  the same function at --cp-shape / --cp-heads, a shape where it takes its
                 context-parallel route (default 1 x 8192 at 2/4)
FlashInfer chooses its route itself from the shape (context parallel where N x max(Hk, Hv) x 2 <
SMs, or its own should_use_cp_host); each worker reports the route the shape takes
(gdn_prefill.bench.flashinfer_route) and the row records it, with a note where it is not the
route the row was meant for.  The peers are called exactly as the timing harness calls them
(gdn_prefill.bench.peer_call: q and k unit-normed when generated, use_qk_l2norm off, FlashInfer's
alpha = exp(g) and [N, Hv, V, K] state re-derived from the copied-in inputs each iteration).

A run is one fresh process (so a hung GPU context dies with it), used as a serving engine uses
the library:
  streams2   one host thread, two streams; each iteration a late producer on stream 0
             (torch.cuda._sleep, ~0.5 ms), the inputs copied in on each stream, then the call on
             both (stream 0 through torch's current stream; for gdn, stream 1 through stream=
             while torch's current stream is another; the peers take no stream argument, so they
             run on torch's current stream on both), then a device synchronize;
  threads4   four host threads, a stream each, free-running: sleep, copy, call, stream
             synchronize.
Every call's out and final state are compared bit for bit with a single-stream run of the same
inputs.  That single-stream run is made twice first: an implementation whose two runs differ is
not deterministic even alone ("deterministic alone: no", with how far apart the two were); its
differences under concurrency are then not counted as concurrency mismatches (the note gives
their count and size).  The worker prints a heartbeat per iteration; the driver kills a run that
makes no progress for --stall seconds (--first-stall before the first iteration: imports, JIT,
autotuning) and counts it as a hang.  The exit status is 1 when a gdn row has a hang, a failed run, a
mismatch or a nondeterministic single-stream run; the peers' rows are reported and do not set it.
Needs a Hopper GPU; without one it says so and exits 0.  tests/test_gpu_concurrency.py runs one
run of each mode of gdn under the same watchdog.
"""
from __future__ import annotations

import argparse
import datetime
import importlib.util
import math
import os
import subprocess
import sys
import threading
import time

from gdn_prefill import bench
from gdn_prefill.bench import table_report
from gdn_prefill.bench.cases import parse_heads, parse_shape

HERE = os.path.abspath(__file__)
SLEEP_CYCLES = 900_000          # torch.cuda._sleep: ~0.5 ms at the H200's ~1.8 GHz
MODES = ("streams2", "threads4")
LANES = {"streams2": 2, "threads4": 4}
CALLS_PER_LINE = {"streams2": 2, "threads4": 1}     # calls checked per heartbeat line (an iteration of
                                                     # streams2; of one thread in threads4)
FUSED, CP = "fused", "context-parallel"              # bench.flashinfer_route's names

# --impls name -> (what the worker runs, the top-level module that must be installed, the
# FlashInfer route the row is for: None for implementations without routes)
IMPLS = {
    "gdn": ("gdn", "gdn_prefill", None),
    "fla": ("fla", "fla", None),
    "flashinfer": ("flashinfer", "flashinfer", FUSED),
    "flashinfer-cp": ("flashinfer", "flashinfer", CP),
}


def parse_impls(text: str | None) -> list[str]:
    """'gdn, fla' -> ['gdn', 'fla'] (in the order given, once each); None, '' or 'all' -> every
    name of IMPLS.  An unknown name is an argument error."""
    if text is None or text.strip() in ("", "all"):
        return list(IMPLS)
    out: list[str] = []
    for name in (s.strip() for s in text.split(",")):
        if not name:
            continue
        if name not in IMPLS:
            raise argparse.ArgumentTypeError(f"unknown implementation {name!r} (known: {', '.join(IMPLS)})")
        if name not in out:
            out.append(name)
    if not out:
        raise argparse.ArgumentTypeError("no implementation named")
    return out


def installed(module: str) -> bool:
    """Whether `module` (a top-level package) can be found, without importing it."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def targets(impls: list[str], a) -> list[dict]:
    """One entry per implementation to soak: its name, what the worker runs, its shape and heads,
    the route it is for, and whether it is installed."""
    out = []
    for name in impls:
        worker_impl, module, route = IMPLS[name]
        shape, heads = {None: (a.shape, a.heads), FUSED: (a.fused_shape, a.fused_heads),
                        CP: (a.cp_shape, a.cp_heads)}[route]
        out.append(dict(impl=name, worker=worker_impl, module=module, shape=shape, heads=heads, route=route,
                        installed=installed(module)))
    return out


# ===================================================================================== worker
def _inputs(lens, hk, hv, seed):
    from gdn_prefill import reference as ref
    return ref.make_inputs(lens, hk, hv, seed=seed, device="cuda", l2norm_inputs=True, state="dense")


def _absdiff(a, b) -> float:
    """max |a - b| in fp32 (nan where either holds a NaN: an element never written)."""
    return float((a.float() - b.float()).abs().max().item()) if a.numel() else 0.0


def _fmax(a: float, b: float) -> float:
    return math.nan if math.isnan(a) or math.isnan(b) else max(a, b)


class _Lane:
    """One stream's buffers: the inputs it copies in each iteration, its out and state, and the
    single-stream result they must equal."""

    def __init__(self, src, stream, max_seqlen=None):
        import torch
        self.src, self.stream = src, stream
        self.max_seqlen = max_seqlen      # as an engine passes it: the planner's single plan reads it
        self.q, self.k, self.v = (torch.empty_like(src[n]) for n in ("q", "k", "v"))
        self.g, self.beta = torch.empty_like(src["g"]), torch.empty_like(src["beta"])
        self.state = torch.empty_like(src["state"])
        self.out = torch.empty_like(src["v"])
        self.ref_out = self.ref_state = None
        self.maxdiff = [0.0, 0.0]

    def issue(self, use_stream_arg, sleep=False):
        """Enqueue one iteration on this lane's stream: (a late producer,) the input copies, then
        prefill() with the lane's stream as torch's current one, or (use_stream_arg) passed as
        stream= while torch's current stream is another."""
        import torch

        import gdn_prefill
        args = (self.q, self.k, self.v, self.g, self.beta, self.out, self.state)
        with torch.cuda.stream(self.stream):
            if sleep:
                torch.cuda._sleep(SLEEP_CYCLES)
            for name in ("q", "k", "v", "g", "beta", "state"):
                getattr(self, name).copy_(self.src[name], non_blocking=True)
            self.out.fill_(float("nan"))
            if not use_stream_arg:
                gdn_prefill.prefill(*args, cu_seqlens=self.src["cu_seqlens"], max_seqlen=self.max_seqlen)
        if use_stream_arg:
            gdn_prefill.prefill(*args, cu_seqlens=self.src["cu_seqlens"], stream=self.stream,
                                max_seqlen=self.max_seqlen)

    def results(self):
        return self.out, self.state

    def check(self):
        """1 if this iteration's out or state differs from the single-stream run in any bit."""
        import torch
        bad = int(not (torch.equal(self.out.view(torch.int16), self.ref_out.view(torch.int16))
                       and torch.equal(self.state, self.ref_state)))
        if bad:
            _note_diff(self)
        return bad


class _PeerLane:
    """A lane of a peer (FLA, FlashInfer): the same copies in and checks, the call made through
    gdn_prefill.bench.peer_call (so its arguments are those the timing harness passes)."""

    def __init__(self, impl, src, stream, lens, hk, hv):
        import torch
        self.src, self.stream = src, stream
        case = bench.Case("soak", tuple(lens), hk, hv)
        self.set = bench._Set(q=torch.empty_like(src["q"]), k=torch.empty_like(src["k"]),
                              v=torch.empty_like(src["v"]), g=torch.empty_like(src["g"]),
                              beta=torch.empty_like(src["beta"]), state=torch.empty_like(src["state"]),
                              out=torch.empty_like(src["v"]))
        self.peer = bench.peer_call(impl, case, self.set, bench._cu(case), use_l2=False)
        self.out = self.state = self.ref_out = self.ref_state = None
        self.maxdiff = [0.0, 0.0]

    def issue(self, use_stream_arg, sleep=False):
        """Enqueue one iteration on this lane's stream, torch's current one inside: (a late
        producer,) the input copies, the peer's input conversions, the call.  The peers take no
        stream argument, so use_stream_arg changes nothing."""
        import torch
        with torch.cuda.stream(self.stream), torch.no_grad():      # no_grad as in the timing harness
            if sleep:
                torch.cuda._sleep(SLEEP_CYCLES)
            for name in ("q", "k", "v", "g", "beta", "state"):
                getattr(self.set, name).copy_(self.src[name], non_blocking=True)
            self.peer.prepare()
            self.out, self.state = self.peer.result(self.peer.call())

    def results(self):
        return self.out, self.state

    def check(self):
        """1 if this iteration's out or state differs from the single-stream run in any bit."""
        bad = int(not (bench._bitwise_equal(self.out, self.ref_out)
                       and bench._bitwise_equal(self.state.contiguous(), self.ref_state)))
        if bad:
            _note_diff(self)
        return bad


def _note_diff(lane) -> None:
    lane.maxdiff = [_fmax(lane.maxdiff[0], _absdiff(lane.out, lane.ref_out)),
                    _fmax(lane.maxdiff[1], _absdiff(lane.state, lane.ref_state))]


def _maxdiff_line(lanes) -> str:
    o = s = 0.0
    for lane in lanes:
        o, s = _fmax(o, lane.maxdiff[0]), _fmax(s, lane.maxdiff[1])
    return f"maxdiff {o:.6g} {s:.6g}"


def _reference(lanes) -> str:
    """Each lane's single-stream result, one lane after the other, nothing else running; then the
    same again, compared bit for bit with the first: the 'alone deterministic ...' line."""
    import torch
    for lane in lanes:
        lane.issue(use_stream_arg=False)
        torch.cuda.synchronize()
        out, state = lane.results()
        lane.ref_out, lane.ref_state = out.clone(), state.contiguous().clone()
    same, o, s = True, 0.0, 0.0
    for lane in lanes:
        lane.issue(use_stream_arg=False)
        torch.cuda.synchronize()
        out, state = lane.results()
        if not (bench._bitwise_equal(out, lane.ref_out) and bench._bitwise_equal(state.contiguous(), lane.ref_state)):
            same = False
            o, s = _fmax(o, _absdiff(out, lane.ref_out)), _fmax(s, _absdiff(state, lane.ref_state))
    return "alone deterministic yes" if same else f"alone deterministic no {o:.6g} {s:.6g}"


def worker(mode: str, iters: int, lens, hk: int, hv: int, seed: int, impl: str = "gdn") -> int:
    """One run; prints 'iter i mismatches m' per iteration (and 'maxdiff o s' after an iteration
    with a mismatch) and a final 'done' line.  Exit status 0, 3 (a mismatch), 5 (not bitwise
    deterministic in a single stream), 1 (an exception in a thread)."""
    import torch

    import gdn_prefill
    nlanes = LANES[mode]
    streams = [torch.cuda.Stream() for _ in range(nlanes)]
    if impl == "gdn":
        lanes = [_Lane(_inputs(lens, hk, hv, seed + i), s, max(lens)) for i, s in enumerate(streams)]
    else:
        lanes = [_PeerLane(impl, _inputs(lens, hk, hv, seed + i), s, lens, hk, hv) for i, s in enumerate(streams)]
    alone = _reference(lanes)
    if impl == "gdn":
        plan = gdn_prefill.explain(lanes[0].q, lanes[0].k, lanes[0].v, lanes[0].g, lanes[0].beta, lanes[0].out,
                                   lanes[0].state, cu_seqlens=lanes[0].src["cu_seqlens"], max_seqlen=max(lens))
        kernels = [k["name"] for k in plan["kernels"]]
        print(f"plan {plan['plan']['name']} kernels={kernels} overlap={plan['overlap'][:40]!r}", flush=True)
    else:
        print(f"peer {impl} {lanes[0].peer.note}", flush=True)
        if impl == "flashinfer":
            print(f"route {bench.flashinfer_route(bench.Case('soak', tuple(lens), hk, hv))}", flush=True)
    print(alone, flush=True)
    bad = 0
    if mode == "streams2":
        for i in range(iters):
            for j, lane in enumerate(lanes):
                # lane 0 behind a late producer, through torch's current stream; lane 1 through
                # stream=, as engines that hold their own stream handles call it
                lane.issue(use_stream_arg=(j == 1), sleep=(j == 0))
            torch.cuda.synchronize()
            found = sum(lane.check() for lane in lanes)
            bad += found
            print(f"iter {i} mismatches {bad}", flush=True)
            if found:
                print(_maxdiff_line(lanes), flush=True)
    else:
        counts = [0] * nlanes
        errors = []
        plock = threading.Lock()      # one heartbeat line per print (threads' prints interleave)

        def run(j):
            lane = lanes[j]
            try:
                for i in range(iters):
                    lane.issue(use_stream_arg=(j % 2 == 1), sleep=(i % 2 == j % 2))
                    lane.stream.synchronize()
                    with torch.cuda.stream(lane.stream):
                        found = lane.check()
                    counts[j] += found
                    with plock:
                        print(f"iter {j}:{i} mismatches {sum(counts)}", flush=True)
                        if found:
                            print(_maxdiff_line(lanes), flush=True)
            except Exception as e:      # reported by the driver as a failed run
                errors.append(repr(e))
        threads = [threading.Thread(target=run, args=(j,)) for j in range(nlanes)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            print("error " + "; ".join(errors), flush=True)
            return 1
        bad = sum(counts)
    print(f"done mismatches {bad}", flush=True)
    if alone != "alone deterministic yes":
        return 5
    return 0 if bad == 0 else 3


# ===================================================================================== driver
def one_run(mode: str, iters: int, shape: str, heads: str, seed: int, stall: float,
            env=None, impl: str = "gdn", first_stall: float = 120.0) -> dict:
    """Run one worker process under the no-progress watchdog: watch()'s dict."""
    cmd = [sys.executable, HERE, "--worker", mode, "--impl", impl, "--iters", str(iters), "--shape", shape,
           "--heads", heads, "--seed", str(seed)]
    return watch(cmd, stall, env, first_stall=first_stall)


def watch(cmd, stall: float, env=None, first_stall: float = 120.0) -> dict:
    """Run cmd, reading its 'iter ... mismatches m' heartbeats; kill it after `stall` seconds
    without one (`first_stall`, or `stall` if longer, before the first: imports, inputs, JIT) and
    call that a hang.  Returns {'status': ok | hang | mismatch | nondeterministic | error,
    'seconds', 'mismatches', 'iters_done', 'alone': 'yes' | 'no' | None, 'alone_diff', 'maxdiff'
    ((out, state) or None), 'route', 'plan', 'tail'}."""
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"})
    lines: list[str] = []
    last = [time.monotonic()]
    started = [False]

    def pump():
        for line in proc.stdout:
            lines.append(line.rstrip())
            last[0] = time.monotonic()
            if line.startswith("iter "):
                started[0] = True
    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    status = None
    while proc.poll() is None:
        time.sleep(0.2)
        # before the first iteration the process imports torch and builds inputs: a longer grace
        if time.monotonic() - last[0] > (stall if started[0] else max(stall, first_stall)):
            proc.kill()
            status = "hang"
            break
    proc.wait()
    reader.join(timeout=5)
    done = [ln for ln in lines if ln.startswith("iter ")]
    mism = int(done[-1].split()[-1]) if done else 0
    if status is None:
        status = {0: "ok", 3: "mismatch", 5: "nondeterministic"}.get(proc.returncode, "error")

    def last_with(prefix):
        found = [ln[len(prefix):].split() for ln in lines if ln.startswith(prefix)]
        return found[-1] if found else None
    alone = last_with("alone deterministic ")
    diff = last_with("maxdiff ")
    route = last_with("route ")
    plan = [ln for ln in lines if ln.startswith("plan ")]
    return dict(status=status, seconds=round(time.monotonic() - t0, 2), mismatches=mism, iters_done=len(done),
                alone=alone[0] if alone else None,
                alone_diff=(float(alone[1]), float(alone[2])) if alone and len(alone) == 3 else None,
                maxdiff=(float(diff[0]), float(diff[1])) if diff else None,
                route=route[0] if route else None, plan=plan[-1][5:] if plan else None, tail=lines[-3:])


def _lens(shape: str):
    return parse_shape(shape)


def _fmt_diff(d) -> str:
    return "—" if d is None else f"{d[0]:.3g} / {d[1]:.3g}"


def _max_diff(diffs):
    diffs = [d for d in diffs if d is not None]
    if not diffs:
        return None
    return (max(d[0] for d in diffs) if not any(math.isnan(d[0]) for d in diffs) else math.nan,
            max(d[1] for d in diffs) if not any(math.isnan(d[1]) for d in diffs) else math.nan)


def summarize(t: dict, mode: str, res: list[dict]) -> dict:
    """One table row from the runs of target `t` in `mode`.  Runs that were not deterministic in
    a single stream do not count as concurrency mismatches; their differing calls go to the note."""
    per_line = CALLS_PER_LINE[mode]
    det = [r for r in res if r["status"] != "nondeterministic"]
    nondet = [r for r in res if r["status"] == "nondeterministic" or r.get("alone") == "no"]
    seen = [r["alone"] for r in res if r.get("alone")]
    alone = "—" if not seen else ("no" if "no" in seen else "yes")
    alone_diff = _max_diff([r.get("alone_diff") for r in res])
    routes = sorted({r["route"] for r in res if r.get("route")})
    route = routes[0] if len(routes) == 1 else ("/".join(routes) if routes else (t["route"] or "—"))
    notes = []
    if t["route"] and routes and routes != [t["route"]]:
        notes.append(f"this shape takes the {route} route, not {t['route']}")
    plans = sorted({r["plan"] for r in res if r.get("plan")})
    if plans:
        notes.append("plan " + "; ".join(plans))
    if alone == "no":
        nd_calls = sum(r["mismatches"] for r in nondet)
        notes.append(f"not deterministic alone (two single-stream runs differ by {_fmt_diff(alone_diff)}); "
                     f"{nd_calls} calls differed from the first single-stream run under concurrency, max "
                     f"{_fmt_diff(_max_diff([r.get('maxdiff') for r in nondet]))}, not counted as mismatches")
    for r in res:
        if r["status"] in ("hang", "error"):
            notes.append(f"{r['status']} after {r['iters_done']} heartbeats: {' / '.join(r['tail'])[-200:]}")
    mism_runs = [r for r in det if r["status"] == "mismatch"]
    return dict(impl=t["impl"], shape=t["shape"], heads=t["heads"], route=route, mode=mode, status="ran",
                runs=len(res), iterations=sum(r["iters_done"] for r in res),
                calls=sum(r["iters_done"] for r in res) * per_line,
                hangs=sum(r["status"] == "hang" for r in res), errors=sum(r["status"] == "error" for r in res),
                deterministic_alone=alone, alone_diff=alone_diff, mismatch_runs=len(mism_runs),
                mismatched_calls=sum(r["mismatches"] for r in det if r.get("alone") != "no"),
                max_abs_diff=_max_diff([r.get("maxdiff") for r in mism_runs]),
                median_s=sorted(r["seconds"] for r in res)[len(res) // 2] if res else None,
                note="; ".join(notes))


def not_installed_row(t: dict) -> dict:
    return dict(impl=t["impl"], shape=t["shape"], heads=t["heads"], route=t["route"] or "—", mode="—",
                status="not installed", runs=0, iterations=0, calls=0, hangs=0, errors=0, deterministic_alone="—",
                alone_diff=None, mismatch_runs=0, mismatched_calls=0, max_abs_diff=None, median_s=None,
                note=f"not installed (no module {t['module']!r})")


def failed(row: dict) -> bool:
    """A row that fails the soak: a hang, a failed run, a mismatch, or nondeterminism alone."""
    return row["status"] == "ran" and bool(row["hangs"] or row["errors"] or row["mismatch_runs"]
                                           or row["deterministic_alone"] == "no")


COLUMNS = ["impl", "shape", "Hk/Hv", "FlashInfer route", "mode", "runs", "iterations", "calls checked", "hangs",
           "failed runs", "deterministic alone", "runs with a mismatch", "mismatched calls",
           "max abs diff (out / state)", "median run (s)", "note"]


def table_line(r: dict) -> list:
    if r["status"] == "not installed":
        return [r["impl"], r["shape"], r["heads"], r["route"], "—", "not installed"] + ["—"] * 9 + [r["note"]]
    return [r["impl"], r["shape"], r["heads"], r["route"], r["mode"], r["runs"], r["iterations"], r["calls"],
            r["hangs"], r["errors"], r["deterministic_alone"], r["mismatch_runs"], r["mismatched_calls"],
            _fmt_diff(r["max_abs_diff"]), r["median_s"], r["note"] or ""]


def _jsonable(v):
    """NaN (an element never written) as the string 'nan', so the JSON stays standard."""
    if isinstance(v, float) and math.isnan(v):
        return "nan"
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    return v


def _device_name() -> str:
    import torch
    return torch.cuda.get_device_name(0)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker", choices=MODES, help=argparse.SUPPRESS)
    ap.add_argument("--impl", choices=("gdn", "fla", "flashinfer"), default="gdn", help=argparse.SUPPRESS)
    ap.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--modes", default="streams2,threads4")
    ap.add_argument("--impls", type=parse_impls, default=None,
                    help=f"comma list among {', '.join(IMPLS)} (default: all; one not installed is reported so)")
    ap.add_argument("--shape", default="1x8192", help="BxT of gdn and fla (default: the overlap plan's shape)")
    ap.add_argument("--heads", default="16/32", help="Hk/Hv of gdn and fla")
    ap.add_argument("--fused-shape", default="8x1024", help="BxT of flashinfer (its fused route)")
    ap.add_argument("--fused-heads", default="16/32")
    ap.add_argument("--cp-shape", default="1x8192", help="BxT of flashinfer-cp (its context-parallel route)")
    ap.add_argument("--cp-heads", default="2/4")
    ap.add_argument("--stall", type=float, default=10.0, help="seconds without progress that count as a hang")
    ap.add_argument("--first-stall", type=float, default=300.0,
                    help="the same before the first iteration (imports, JIT compiles, autotuning)")
    ap.add_argument("--md")
    ap.add_argument("--json")
    return ap


def main(argv=None) -> int:
    ap = build_parser()
    a = ap.parse_args(argv)
    modes = [m.strip() for m in a.modes.split(",") if m.strip()]
    bad_modes = [m for m in modes if m not in MODES]
    if bad_modes:
        ap.error(f"--modes: unknown mode(s) {bad_modes} (known: {', '.join(MODES)})")
    try:
        for shape, heads in ((a.shape, a.heads), (a.fused_shape, a.fused_heads), (a.cp_shape, a.cp_heads)):
            parse_shape(shape)
            parse_heads(heads)
    except ValueError as e:
        ap.error(str(e))
    if a.worker:
        hk, hv = parse_heads(a.heads)
        return worker(a.worker, a.iters, _lens(a.shape), hk, hv, a.seed, impl=a.impl)
    if bench.script_cannot_time("soak_streams"):
        return 0
    impls = a.impls if a.impls is not None else parse_impls(None)
    rows = []
    for t in targets(impls, a):
        if not t["installed"]:
            rows.append(not_installed_row(t))
            print(f"{t['impl']}: not installed", flush=True)
            continue
        for mode in modes:
            res = [one_run(mode, a.iters, t["shape"], t["heads"], 1000 * r, a.stall, impl=t["worker"],
                           first_stall=a.first_stall) for r in range(a.runs)]
            for r in res:
                if r["status"] not in ("ok", "nondeterministic"):
                    print(f"{t['impl']} {mode}: {r['status']} after {r['iters_done']} iterations: {r['tail']}",
                          flush=True)
            rows.append(summarize(t, mode, res))
            print(rows[-1], flush=True)
            if a.json:          # the rows so far, in case the whole soak is cut short
                bench.write_json(dict(partial=True, rows=[_jsonable(r) for r in rows]), a.json)
    versions = {n: v for n, v in bench.peer_versions().items()
                if any(r["impl"].startswith(n) and r["status"] == "ran" for r in rows)}
    head = (f"prefill soak under concurrency, gdn and its peers: {a.iters} iterations per run"
            + "".join(f", {n} {v or '?'}" for n, v in versions.items())
            + f"; {_device_name()}, {datetime.date.today()}")
    table_report(head, COLUMNS, [table_line(r) for r in rows],
                 dict(head=head, versions=versions, iters=a.iters, modes=modes, rows=[_jsonable(r) for r in rows]),
                 a.md, a.json)
    return 1 if any(failed(r) for r in rows if r["impl"] == "gdn") else 0


if __name__ == "__main__":
    sys.exit(main())
