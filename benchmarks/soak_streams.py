"""Soak prefill() under concurrent streams and host threads: no hang, no wrong bit.

    python benchmarks/soak_streams.py [--runs 20] [--iters 200] [--modes streams2,threads4]
                                      [--shape 1x8192] [--heads 16/32] [--stall 10] [--md PATH] [--json PATH]
    python benchmarks/soak_streams.py --worker streams2 --iters 100     (one run; what the soak repeats)

A run is one fresh process (so a hung GPU context dies with it), used as a serving engine uses
the library:
  streams2   one host thread, two streams; each iteration a late producer on stream 0
             (torch.cuda._sleep, ~0.5 ms), the inputs copied in on each stream, then prefill() on
             both (stream 0 through torch's current stream, stream 1 through stream=), then a
             device synchronize;
  threads4   four host threads, a stream each, free-running: sleep, copy, prefill, stream
             synchronize.
Every iteration's out and final state are compared bit for bit with a single-stream run of the
same inputs.  The worker prints a heartbeat per iteration; the driver kills a run that makes no
progress for --stall seconds and counts it as a hang.  The environment is passed on, so
GDN_PREFILL_OVERLAP=1 soaks the opt-in overlap plan.  Needs a Hopper GPU; without one it says so
and exits 0.  tests/test_gpu_concurrency.py runs one run of each mode under the same watchdog.
"""
from __future__ import annotations

import argparse
import datetime
import os
import subprocess
import sys
import threading
import time

from gdn_prefill import bench
from gdn_prefill.bench import table_report
from gdn_prefill.bench_cases import parse_heads

HERE = os.path.abspath(__file__)
SLEEP_CYCLES = 900_000          # torch.cuda._sleep: ~0.5 ms at the H200's ~1.8 GHz


def _inputs(lens, hk, hv, seed):
    from gdn_prefill import reference as ref
    return ref.make_inputs(lens, hk, hv, seed=seed, device="cuda", l2norm_inputs=True, state="dense")


class _Lane:
    """One stream's buffers: the inputs it copies in each iteration, its out and state, and the
    single-stream result they must equal."""

    def __init__(self, src, stream):
        import torch
        self.src, self.stream = src, stream
        self.q, self.k, self.v = (torch.empty_like(src[n]) for n in ("q", "k", "v"))
        self.g, self.beta = torch.empty_like(src["g"]), torch.empty_like(src["beta"])
        self.state = torch.empty_like(src["state"])
        self.out = torch.empty_like(src["v"])
        self.ref_out = self.ref_state = None

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
                gdn_prefill.prefill(*args, cu_seqlens=self.src["cu_seqlens"])
        if use_stream_arg:
            gdn_prefill.prefill(*args, cu_seqlens=self.src["cu_seqlens"], stream=self.stream)

    def check(self):
        """1 if this iteration's out or state differs from the single-stream run in any bit."""
        import torch
        return int(not (torch.equal(self.out.view(torch.int16), self.ref_out.view(torch.int16))
                        and torch.equal(self.state, self.ref_state)))


def _reference(lanes):
    """Each lane's single-stream result, on the default stream, one after the other."""
    import torch
    for lane in lanes:
        lane.issue(use_stream_arg=False)
        torch.cuda.synchronize()
        lane.ref_out, lane.ref_state = lane.out.clone(), lane.state.clone()


def worker(mode: str, iters: int, lens, hk: int, hv: int, seed: int) -> int:
    """One run; prints 'iter i mismatches m' per iteration and a final 'done' line."""
    import torch

    import gdn_prefill
    nlanes = 2 if mode == "streams2" else 4
    streams = [torch.cuda.Stream() for _ in range(nlanes)]
    lanes = [_Lane(_inputs(lens, hk, hv, seed + i), s) for i, s in enumerate(streams)]
    _reference(lanes)
    plan = gdn_prefill.explain(lanes[0].q, lanes[0].k, lanes[0].v, lanes[0].g, lanes[0].beta, lanes[0].out,
                               lanes[0].state, cu_seqlens=lanes[0].src["cu_seqlens"])
    print(f"plan kernels={[k['name'] for k in plan['kernels']]} overlap={plan['overlap'][:40]!r}", flush=True)
    bad = 0
    if mode == "streams2":
        for i in range(iters):
            for j, lane in enumerate(lanes):
                # lane 0 behind a late producer, through torch's current stream; lane 1 through
                # stream=, as engines that hold their own stream handles call it
                lane.issue(use_stream_arg=(j == 1), sleep=(j == 0))
            torch.cuda.synchronize()
            bad += sum(lane.check() for lane in lanes)
            print(f"iter {i} mismatches {bad}", flush=True)
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
                        counts[j] += lane.check()
                    with plock:
                        print(f"iter {j}:{i} mismatches {sum(counts)}", flush=True)
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
    return 0 if bad == 0 else 3


def one_run(mode: str, iters: int, shape: str, heads: str, seed: int, stall: float,
            env=None) -> dict:
    """Run one worker process under the no-progress watchdog: {'status': ok | hang | mismatch |
    error, 'seconds', 'mismatches', 'iters_done', 'tail'}."""
    cmd = [sys.executable, HERE, "--worker", mode, "--iters", str(iters), "--shape", shape, "--heads", heads,
           "--seed", str(seed)]
    return watch(cmd, stall, env)


def watch(cmd, stall: float, env=None) -> dict:
    """Run cmd, reading its 'iter ... mismatches m' heartbeats; kill it after `stall` seconds
    without one (120 s before the first: imports and inputs) and call that a hang."""
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
        if time.monotonic() - last[0] > (stall if started[0] else max(stall, 120.0)):
            proc.kill()
            status = "hang"
            break
    proc.wait()
    reader.join(timeout=5)
    done = [ln for ln in lines if ln.startswith("iter ")]
    mism = int(done[-1].split()[-1]) if done else 0
    if status is None:
        status = {0: "ok", 3: "mismatch"}.get(proc.returncode, "error")
    return dict(status=status, seconds=round(time.monotonic() - t0, 2), mismatches=mism, iters_done=len(done),
                tail=lines[-3:])


def _lens(shape: str):
    b, t = shape.lower().split("x")
    t = int(t[:-1]) * 1024 if t.endswith("k") else int(t)
    return [t] * int(b)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker", choices=("streams2", "threads4"), help=argparse.SUPPRESS)
    ap.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--modes", default="streams2,threads4")
    ap.add_argument("--shape", default="1x8192", help="BxT (the overlap plan's shape by default)")
    ap.add_argument("--heads", default="16/32")
    ap.add_argument("--stall", type=float, default=10.0, help="seconds without progress that count as a hang")
    ap.add_argument("--md")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    hk, hv = parse_heads(a.heads)
    if a.worker:
        return worker(a.worker, a.iters, _lens(a.shape), hk, hv, a.seed)
    if bench.script_cannot_time("soak_streams"):
        return 0
    import torch
    overlap = os.environ.get("GDN_PREFILL_OVERLAP", "0") == "1"
    rows = []
    for mode in a.modes.split(","):
        res = [one_run(mode, a.iters, a.shape, a.heads, 1000 * r, a.stall) for r in range(a.runs)]
        for r in res:
            if r["status"] != "ok":
                print(f"{mode}: {r['status']} after {r['iters_done']} iterations: {r['tail']}", flush=True)
        rows.append(dict(mode=mode, runs=len(res), hangs=sum(r["status"] == "hang" for r in res),
                         mismatch_runs=sum(r["status"] == "mismatch" for r in res),
                         errors=sum(r["status"] == "error" for r in res),
                         mismatched_iters=sum(r["mismatches"] for r in res),
                         median_s=sorted(r["seconds"] for r in res)[len(res) // 2]))
        print(rows[-1], flush=True)
    head = (f"prefill soak, {a.shape} at {a.heads}, {a.iters} iterations per run, plan: "
            f"{'overlap (GDN_PREFILL_OVERLAP=1)' if overlap else 'default'}; {torch.cuda.get_device_name(0)}, "
            f"{datetime.date.today()}")
    table_report(head, ["mode", "runs", "hangs", "runs with a mismatch", "failed runs", "mismatched iterations",
                        "median run (s)"],
                 [[r[k] for k in ("mode", "runs", "hangs", "mismatch_runs", "errors", "mismatched_iters", "median_s")]
                  for r in rows], dict(head=head, rows=rows), a.md, a.json)
    return 0 if all(r["hangs"] == r["mismatch_runs"] == r["errors"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
