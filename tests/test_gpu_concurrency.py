"""prefill() from several streams and host threads at once, as serving engines call it (issue 32).

Each case is one run of benchmarks/soak_streams.py's worker in its own process, watched by the
driver there: a run that makes no progress for STALL seconds is killed and fails the test, so a
hang can never block the suite.  Every iteration's out and final state must equal, bit for bit,
a single-stream run of the same inputs.  The shapes: 1 x 8192 at Hk/Hv 16/32, where the overlap plan runs (its spine, the programmatic
dependent of stage 1's workers, waits for their flags), and 2 x 4096, where the serial plan runs.
"""
from __future__ import annotations

import sys

import pytest

STALL = 20.0        # seconds without an iteration: a hang (an iteration takes ~1 ms)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", ["1x8192", "2x4096"])
@pytest.mark.parametrize("mode", ["streams2", "threads4"])
def test_concurrent_prefill_never_hangs_and_matches_one_stream(repo_script, mode, shape):
    soak = repo_script("benchmarks/soak_streams.py")
    r = soak.one_run(mode, 100, shape, "16/32", seed=7, stall=STALL)
    assert r["status"] != "hang", f"{mode}: no progress for {STALL} s after {r['iters_done']} iterations"
    assert r["status"] == "ok", f"{mode}: {r['status']}: {r['tail']}"
    assert r["iters_done"] == (100 if mode == "streams2" else 4 * 100), r     # threads4: a line per thread
    assert r["mismatches"] == 0


def test_watchdog_reports_a_stalled_worker(repo_script, tmp_path):
    """The driver's watchdog itself (no GPU needed): a worker that stops printing is killed and
    called a hang."""
    soak = repo_script("benchmarks/soak_streams.py")
    script = tmp_path / "stall.py"
    script.write_text("import time\nprint('iter 0 mismatches 0', flush=True)\ntime.sleep(600)\n")
    r = soak.watch([sys.executable, str(script)], stall=1.0)
    assert r["status"] == "hang" and r["iters_done"] == 1 and r["seconds"] < 60
