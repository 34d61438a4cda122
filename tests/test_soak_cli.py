"""CPU tests of benchmarks/soak_streams.py's driver (issue 43: the soak over the peers): --impls
parsing, an implementation that is not installed reported as such, the rows built from runs
(nondeterminism alone is not a concurrency mismatch), the watchdog's parsing of a worker's lines,
and the script without a GPU.  No GPU is needed; the workers themselves run in
tests/test_gpu_concurrency.py (gdn) and on the device (the peers)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "benchmarks", "soak_streams.py")


@pytest.fixture
def soak(repo_script):
    return repo_script("benchmarks/soak_streams.py")


def _run(status="ok", iters=3, mism=0, alone="yes", alone_diff=None, maxdiff=None, route=None, seconds=1.0):
    return dict(status=status, seconds=seconds, mismatches=mism, iters_done=iters, alone=alone,
                alone_diff=alone_diff, maxdiff=maxdiff, route=route, plan=None, tail=["x"])


# ----------------------------------------------------------------------------- --impls


def test_impls_parsing(soak):
    assert soak.parse_impls("gdn, fla") == ["gdn", "fla"]
    assert soak.parse_impls("flashinfer-cp,gdn,flashinfer-cp") == ["flashinfer-cp", "gdn"]
    assert soak.parse_impls(None) == soak.parse_impls("all") == ["gdn", "fla", "flashinfer", "flashinfer-cp"]
    a = soak.build_parser().parse_args(["--impls", "fla,flashinfer"])
    assert a.impls == ["fla", "flashinfer"]
    assert soak.build_parser().parse_args([]).impls is None          # main: every implementation
    with pytest.raises(Exception):
        soak.parse_impls("gdn,cuda")


def test_unknown_impl_is_an_argument_error(soak, capsys):
    with pytest.raises(SystemExit) as e:
        soak.main(["--impls", "gdn,triton-gdn"])
    assert e.value.code == 2
    assert "unknown implementation 'triton-gdn'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        soak.main(["--modes", "streams3"])
    assert e.value.code == 2


def test_default_shapes_take_each_flashinfer_route(soak):
    """The defaults give each FlashInfer row a shape of its route by the documented rule (context
    parallel where N x max(Hk, Hv) x 2 < SMs; 132 on the H200)."""
    a = soak.build_parser().parse_args([])
    rows = {t["impl"]: t for t in soak.targets(soak.parse_impls(None), a)}
    for impl, want_cp in (("flashinfer", False), ("flashinfer-cp", True)):
        t = rows[impl]
        n = len(soak.parse_shape(t["shape"]))
        hk, hv = soak.parse_heads(t["heads"])
        assert (n * max(hk, hv) * 2 < 132) == want_cp, t
        assert t["route"] == (soak.CP if want_cp else soak.FUSED) and t["worker"] == "flashinfer"
    assert rows["gdn"]["shape"] == "1x8192" and rows["gdn"]["heads"] == "16/32"   # unchanged default
    assert rows["fla"]["route"] is None and rows["fla"]["worker"] == "fla"


# ----------------------------------------------------------------------------- not installed


def test_missing_module_is_not_installed(soak, monkeypatch):
    monkeypatch.setitem(soak.IMPLS, "ghost", ("ghost", "no_such_module_for_the_soak_test", None))
    a = soak.build_parser().parse_args([])
    t = {t["impl"]: t for t in soak.targets(["gdn", "ghost"], a)}
    assert t["gdn"]["installed"] is True and t["ghost"]["installed"] is False
    row = soak.not_installed_row(t["ghost"])
    assert row["status"] == "not installed" and "no_such_module_for_the_soak_test" in row["note"]
    assert not soak.failed(row)


def test_main_reports_a_missing_impl_and_runs_the_rest(soak, monkeypatch, tmp_path, capsys):
    """main() with the GPU parts stubbed: the missing implementation gets a 'not installed' row and
    no worker; the installed ones run each mode; a peer's mismatch is reported and leaves the exit
    status 0, a gdn mismatch makes it 1."""
    monkeypatch.setitem(soak.IMPLS, "ghost", ("ghost", "no_such_module_for_the_soak_test", None))
    monkeypatch.setattr(soak.bench, "script_cannot_time", lambda script: False)
    monkeypatch.setattr(soak, "_device_name", lambda: "stub H200")
    monkeypatch.setattr(soak, "installed", lambda module: module != "no_such_module_for_the_soak_test")
    calls = []
    bad_impl = {"which": "fla"}

    def one_run(mode, iters, shape, heads, seed, stall, env=None, impl="gdn", first_stall=120.0):
        calls.append((impl, mode, shape, heads))
        if impl == bad_impl["which"]:
            return _run(status="mismatch", iters=iters, mism=2, maxdiff=(0.5, 0.125))
        return _run(iters=iters)
    monkeypatch.setattr(soak, "one_run", one_run)
    js, md = tmp_path / "soak.json", tmp_path / "soak.md"
    rc = soak.main(["--impls", "gdn,ghost,fla", "--runs", "2", "--iters", "5", "--json", str(js), "--md", str(md)])
    assert rc == 0
    assert {c[0] for c in calls} == {"gdn", "fla"} and len(calls) == 2 * 2 * 2
    rows = json.load(open(js))["rows"]
    assert [(r["impl"], r["mode"]) for r in rows] == [("gdn", "streams2"), ("gdn", "threads4"), ("ghost", "—"),
                                                     ("fla", "streams2"), ("fla", "threads4")]
    ghost = rows[2]
    assert ghost["status"] == "not installed" and ghost["runs"] == 0
    fla = rows[3]
    assert fla["mismatch_runs"] == 2 and fla["mismatched_calls"] == 4 and fla["max_abs_diff"] == [0.5, 0.125]
    assert rows[0]["calls"] == 2 * 5 * 2 and rows[1]["calls"] == 2 * 5        # streams2: two calls a line
    text = md.read_text()
    assert "| ghost | 1x8192 | 16/32 | — | — | not installed |" in text
    assert "| fla | 1x8192 | 16/32 | — | streams2 | 2 | 10 | 20 | 0 | 0 | yes | 2 | 4 | 0.5 / 0.125 |" in text
    assert rows[1]["iterations"] == 2 * 5 and len(text.splitlines()[2].split("|")) == len(soak.COLUMNS) + 2
    bad_impl["which"] = "gdn"
    assert soak.main(["--impls", "gdn", "--runs", "1", "--iters", "5"]) == 1


# ----------------------------------------------------------------------------- rows


def test_nondeterminism_alone_is_a_column_not_a_mismatch(soak):
    t = dict(impl="flashinfer-cp", worker="flashinfer", module="flashinfer", shape="1x8192", heads="2/4",
             route=soak.CP, installed=True)
    res = [_run(status="nondeterministic", iters=10, mism=7, alone="no", alone_diff=(1e-3, 2e-3),
                maxdiff=(4e-3, 5e-3), route=soak.CP),
           _run(status="nondeterministic", iters=10, mism=0, alone="no", alone_diff=(3e-3, 1e-3), route=soak.CP)]
    row = soak.summarize(t, "threads4", res)
    assert row["deterministic_alone"] == "no" and row["mismatch_runs"] == 0 and row["mismatched_calls"] == 0
    assert row["alone_diff"] == (3e-3, 2e-3) and row["max_abs_diff"] is None
    assert "not deterministic alone" in row["note"] and "7 calls differed" in row["note"]
    assert row["route"] == soak.CP and row["calls"] == 20
    assert soak.failed(row)                      # for gdn this fails the soak (main counts gdn rows only)
    # a deterministic implementation's mismatches are counted, with their largest difference
    det = soak.summarize(t, "streams2", [_run(status="mismatch", mism=3, maxdiff=(0.25, 0.0), route=soak.CP),
                                         _run(route=soak.CP), _run(status="hang", iters=1, route=soak.CP)])
    assert (det["deterministic_alone"], det["mismatch_runs"], det["mismatched_calls"], det["hangs"]) == ("yes", 1, 3, 1)
    assert det["max_abs_diff"] == (0.25, 0.0) and det["calls"] == 2 * 7 and "hang after 1" in det["note"]
    # a shape that takes the other route is recorded as run and said so
    other = soak.summarize(t, "streams2", [_run(route=soak.FUSED)])
    assert other["route"] == soak.FUSED and "takes the fused route, not context-parallel" in other["note"]
    assert not soak.failed(other)


def test_watchdog_reads_the_worker_lines(soak, tmp_path):
    script = tmp_path / "worker.py"
    script.write_text("import sys\n"
                      "print('peer flashinfer alpha=exp(g)')\nprint('route context-parallel')\n"
                      "print('alone deterministic no 0.001 0.002')\n"
                      "print('iter 0 mismatches 0')\nprint('iter 1 mismatches 1')\nprint('maxdiff 0.5 nan')\n"
                      "print('done mismatches 1')\nsys.exit(5)\n")
    r = soak.watch([sys.executable, str(script)], stall=30.0)
    assert r["status"] == "nondeterministic" and r["iters_done"] == 2 and r["mismatches"] == 1
    assert r["alone"] == "no" and r["alone_diff"] == (0.001, 0.002) and r["route"] == "context-parallel"
    assert r["maxdiff"][0] == 0.5 and r["maxdiff"][1] != r["maxdiff"][1]        # nan: an element never written
    script.write_text("print('alone deterministic yes')\nprint('iter 0 mismatches 0')\nraise SystemExit(3)\n")
    r = soak.watch([sys.executable, str(script)], stall=30.0)
    assert r["status"] == "mismatch" and r["alone"] == "yes" and r["alone_diff"] is None and r["maxdiff"] is None


def test_worker_command_names_the_impl(soak, monkeypatch):
    seen = {}
    monkeypatch.setattr(soak, "watch", lambda cmd, stall, env=None, first_stall=120.0: seen.update(
        cmd=cmd, first_stall=first_stall) or {})
    soak.one_run("threads4", 7, "8x1024", "16/32", seed=3, stall=5.0, impl="flashinfer", first_stall=200.0)
    cmd = seen["cmd"]
    assert cmd[cmd.index("--worker") + 1] == "threads4" and cmd[cmd.index("--impl") + 1] == "flashinfer"
    assert cmd[cmd.index("--shape") + 1] == "8x1024" and seen["first_stall"] == 200.0
    soak.one_run("streams2", 7, "1x8192", "16/32", seed=3, stall=5.0)          # tests/test_gpu_concurrency's call
    assert seen["cmd"][seen["cmd"].index("--impl") + 1] == "gdn"


# ----------------------------------------------------------------------------- without a GPU


def test_without_a_gpu_the_script_exits_0_and_says_so():
    import torch
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is visible: the script would soak it")
    run = subprocess.run([sys.executable, SCRIPT, "--impls", "gdn,fla,flashinfer,flashinfer-cp", "--runs", "1"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "soak_streams: no Hopper GPU" in run.stdout and "nothing to time" in run.stdout


# ----------------------------------------------------------------------------- the worker, on the CPU
# The worker with torch.cuda's streams, sleeps and synchronizes stubbed out and the implementations
# replaced by the fp64 reference behind each one's calling convention (FLA: [1, T, H, D], final state
# returned; FlashInfer: alpha = exp(g), [N, H, V, K] states, output / output_state written in place;
# gdn: prefill() writing out and state in place).  What runs is the driver's worker and
# gdn_prefill.bench.peer_call's argument mapping, not the kernels.

LENS, HK, HV = [80], 1, 2


def _fake_fla(noise=None):
    from gdn_prefill import reference as ref

    def chunk_gated_delta_rule(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
                               cu_seqlens=None, cu_seqlens_cpu=None, use_qk_l2norm_in_kernel=False):
        assert q.dim() == 4 and q.shape[0] == 1 and cu_seqlens.dtype == cu_seqlens_cpu.dtype
        o, st = ref.chunked(q[0], k[0], v[0], g[0], beta[0], cu_seqlens=cu_seqlens_cpu, state=initial_state,
                            use_qk_l2norm=use_qk_l2norm_in_kernel)
        if noise is not None:
            st = st + noise()
        return o.to(v.dtype)[None], st.float()
    return chunk_gated_delta_rule


def _fake_flashinfer(calls=None, bad_call=None):
    import torch

    from gdn_prefill import reference as ref

    def chunk_gated_delta_rule(q, k, v, g=None, beta=None, scale=None, initial_state=None, output_final_state=False,
                               cu_seqlens=None, use_qk_l2norm_in_kernel=False, output=None, output_state=None):
        o, st = ref.chunked(q, k, v, torch.log(g), beta, cu_seqlens=cu_seqlens, state=initial_state,
                            state_layout="vk", use_qk_l2norm=use_qk_l2norm_in_kernel)
        if calls is not None:
            calls.append(1)
            if len(calls) == bad_call:
                o = o + 1.0
        output.copy_(o)
        output_state.copy_(st)
        return output, output_state
    return chunk_gated_delta_rule


class _FakeStream:
    def synchronize(self):
        pass


@pytest.fixture
def cpu_worker(soak, monkeypatch):
    """soak, its worker runnable on the CPU; install(fla=fn, flashinfer=fn) puts fake peers in place."""
    import contextlib
    import types

    import torch

    import gdn_prefill
    from gdn_prefill import reference as ref

    monkeypatch.setattr(torch.cuda, "Stream", _FakeStream)
    monkeypatch.setattr(torch.cuda, "stream", lambda s: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "_sleep", lambda cycles: None)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    monkeypatch.setattr(soak, "_inputs", lambda lens, hk, hv, seed: ref.make_inputs(
        lens, hk, hv, seed=seed, l2norm_inputs=True, state="dense"))

    def cu_cpu(case):
        cpu64 = torch.tensor([0] + list(__import__("itertools").accumulate(case.lens)), dtype=torch.int64)
        return dict(cu32=cpu64.to(torch.int32), cu64=cpu64.clone(), cu64_cpu=cpu64)
    monkeypatch.setattr(soak.bench, "_cu", cu_cpu)
    for where in (soak.bench, soak.bench.peers):          # the soak's route column; peer_call's notes
        monkeypatch.setattr(where, "flashinfer_route", lambda case: "fused")

    def prefill(q, k, v, g, beta, out, state, *, cu_seqlens, stream=None, max_seqlen=None):
        # the soak passes the longest length, as an engine does (the planner's single plan reads it)
        assert max_seqlen == int((cu_seqlens[1:] - cu_seqlens[:-1]).max())
        o, st = ref.chunked(q, k, v, g, beta, cu_seqlens=cu_seqlens, state=state)
        out.copy_(o)
        state.copy_(st)
    monkeypatch.setattr(gdn_prefill, "prefill", prefill)
    monkeypatch.setattr(gdn_prefill, "explain", lambda *a, **k: dict(plan=dict(name="fake"), kernels=[dict(name="fake")],
                                                                        overlap="none"))

    def install(fla=None, flashinfer=None):
        if fla is not None:
            for name in ("fla", "fla.ops"):
                monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
            mod = types.ModuleType("fla.ops.gated_delta_rule")
            mod.chunk_gated_delta_rule = fla
            monkeypatch.setitem(sys.modules, "fla.ops.gated_delta_rule", mod)
        if flashinfer is not None:
            monkeypatch.setitem(sys.modules, "flashinfer", types.ModuleType("flashinfer"))
            mod = types.ModuleType("flashinfer.gdn_prefill")
            mod.chunk_gated_delta_rule = flashinfer
            monkeypatch.setitem(sys.modules, "flashinfer.gdn_prefill", mod)
    soak.install = install
    return soak


def _lines(capsys, prefix):
    return [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith(prefix)] if prefix else None


def _rel(a, b) -> float:
    return float((a.double() - b.double()).abs().max() / b.double().abs().max())


def test_peer_call_passes_each_peer_its_conventions(cpu_worker):
    """bench.peer_call (the timing harness's mapping, which the soak reuses) gives FLA and FlashInfer
    the same problem in their conventions, and result() brings both back to ours: each equals the
    reference on our layout, and prepare() re-derives FlashInfer's alpha and state after new inputs."""
    import torch

    from gdn_prefill import bench
    from gdn_prefill import reference as ref
    soak = cpu_worker
    soak.install(fla=_fake_fla(), flashinfer=_fake_flashinfer())
    case = bench.Case("t", tuple(LENS), HK, HV)
    for seed in (1, 2):
        inp = ref.make_inputs(LENS, HK, HV, seed=seed, l2norm_inputs=True, state="dense")
        s = bench._Set(q=inp["q"], k=inp["k"], v=inp["v"], g=inp["g"], beta=inp["beta"], state=inp["state"],
                       out=torch.empty_like(inp["v"]))
        o_ref, st_ref = ref.chunked(**{k: inp[k] for k in ("q", "k", "v", "g", "beta", "cu_seqlens", "state")})
        for impl in ("fla", "flashinfer"):
            o, st = bench._run_once(impl, case, s, bench._cu(case), False)
            assert o.shape == inp["v"].shape and st.shape == inp["state"].shape, impl
            # FlashInfer's alpha = exp(g) comes back through log(): o equal up to bf16 rounding
            assert _rel(o, o_ref) < 1e-2 and _rel(st, st_ref) < 1e-6, impl
    # one PeerCall reused over new inputs copied into its set: prepare() is what makes it see them
    inp1, inp2 = (ref.make_inputs(LENS, HK, HV, seed=sd, l2norm_inputs=True, state="dense") for sd in (3, 4))
    s = bench._Set(**{n: inp1[n].clone() for n in ("q", "k", "v", "g", "beta", "state")},
                   out=torch.empty_like(inp1["v"]))
    pc = bench.peer_call("flashinfer", case, s, bench._cu(case), False)
    for n in ("q", "k", "v", "g", "beta", "state"):
        getattr(s, n).copy_(inp2[n])
    pc.prepare()
    o, st = pc.result(pc.call())
    o2, st2 = ref.chunked(**{k: inp2[k] for k in ("q", "k", "v", "g", "beta", "cu_seqlens", "state")})
    o1, _ = ref.chunked(**{k: inp1[k] for k in ("q", "k", "v", "g", "beta", "cu_seqlens", "state")})
    assert _rel(o, o2) < 1e-2 and _rel(st, st2) < 1e-6 and _rel(o, o1) > 0.1


@pytest.mark.parametrize("impl,mode", [("gdn", "streams2"), ("gdn", "threads4"), ("fla", "streams2"),
                                       ("fla", "threads4"), ("flashinfer", "streams2"), ("flashinfer", "threads4")])
def test_worker_runs_each_impl_and_mode(cpu_worker, capsys, impl, mode):
    soak = cpu_worker
    soak.install(fla=_fake_fla(), flashinfer=_fake_flashinfer())
    rc = soak.worker(mode, 3, LENS, HK, HV, seed=5, impl=impl)
    out = capsys.readouterr().out.splitlines()
    assert rc == 0, out
    assert "alone deterministic yes" in out and out[-1] == "done mismatches 0"
    assert len([ln for ln in out if ln.startswith("iter ")]) == (3 if mode == "streams2" else 4 * 3)
    assert ("plan fake kernels=['fake'] overlap='none'" in out) == (impl == "gdn")
    assert ("route fused" in out) == (impl == "flashinfer")


def test_worker_finds_a_wrong_call_and_a_nondeterministic_peer(cpu_worker, capsys):
    import torch
    soak = cpu_worker
    calls: list = []
    # 2 lanes x 2 single-stream runs = 4 calls first; the 8th (iteration 1, lane 1) comes out wrong
    soak.install(flashinfer=_fake_flashinfer(calls, bad_call=8))
    assert soak.worker("streams2", 3, LENS, HK, HV, seed=5, impl="flashinfer") == 3
    out = capsys.readouterr().out.splitlines()
    assert "alone deterministic yes" in out and "iter 0 mismatches 0" in out and "iter 1 mismatches 1" in out
    diff = [ln.split() for ln in out if ln.startswith("maxdiff ")]
    assert len(diff) == 1 and 0.99 < float(diff[0][1]) < 1.01 and float(diff[0][2]) == 0.0     # out +1, state right
    assert out[-1] == "done mismatches 1" and len(calls) == 4 + 3 * 2
    gen = torch.Generator().manual_seed(0)
    soak.install(fla=_fake_fla(noise=lambda: 1e-3 * torch.rand((), generator=gen, dtype=torch.float64)))
    assert soak.worker("threads4", 2, LENS, HK, HV, seed=5, impl="fla") == 5
    out = capsys.readouterr().out.splitlines()
    alone = [ln for ln in out if ln.startswith("alone deterministic ")]
    assert len(alone) == 1 and alone[0].startswith("alone deterministic no ")
    assert 0 < float(alone[0].split()[-1]) < 1e-3 and float(alone[0].split()[-2]) == 0.0


def _fake_flashinfer_pool(seen):
    """FlashInfer 0.7.2's pool convention: initial_state / output_state are pools read and written at
    rows state_indices[i]; use_qk_l2norm_in_kernel and max_seqlen taken.  Records its keywords."""
    import torch

    from gdn_prefill import reference as ref

    def chunk_gated_delta_rule(q, k, v, g=None, beta=None, scale=None, initial_state=None, output_final_state=False,
                               cu_seqlens=None, use_qk_l2norm_in_kernel=False, output=None, output_state=None,
                               state_indices=None, max_seqlen=None):
        seen.update(q=q, k=k, use_l2=use_qk_l2norm_in_kernel, max_seqlen=max_seqlen, state_indices=state_indices,
                    in_place=output_state is initial_state)
        o, st = ref.chunked(q, k, v, torch.log(g), beta, cu_seqlens=cu_seqlens, state=initial_state[state_indices],
                            state_layout="vk", use_qk_l2norm=use_qk_l2norm_in_kernel)
        output.copy_(o)
        output_state[state_indices] = st.to(output_state.dtype)
        return output, output_state
    return chunk_gated_delta_rule


def test_peer_call_with_a_state_pool(cpu_worker):
    """bench --pool --qk-l2norm: FlashInfer (slot indices, its own normalisation, max_seqlen) updates its
    pool in place; FLA (no indices) is gathered and scattered around its call.  Both match the
    reference on the sequences' slots, and every other slot keeps its bits."""
    import torch

    from gdn_prefill import bench
    from gdn_prefill import reference as ref
    seen: dict = {}
    cpu_worker.install(fla=_fake_fla(), flashinfer=_fake_flashinfer_pool(seen))
    lens = [80, 33, 100]
    case = bench.Case("t", tuple(lens), HK, HV)
    inp = ref.make_inputs(lens, HK, HV, seed=7, l2norm_inputs=False, state="dense")
    pool0 = torch.randn(bench.pool_slots(len(lens)), HV, 128, 128) * 128 ** -0.5
    slots = torch.tensor([4, 0, 6])
    o_ref, st_ref = ref.chunked(**{k: inp[k] for k in ("q", "k", "v", "g", "beta", "cu_seqlens")},
                                state=pool0[slots], use_qk_l2norm=True)
    others = [i for i in range(bench.pool_slots(len(lens))) if i not in slots.tolist()]
    for impl in ("flashinfer", "fla"):
        s = bench._Set(q=inp["q"], k=inp["k"], v=inp["v"], g=inp["g"], beta=inp["beta"], state=pool0.clone(),
                       out=torch.empty_like(inp["v"]), extra=dict(slots=slots))
        pc = bench.peer_call(impl, case, s, bench._cu(case), True)
        o, st = pc.result(pc.call())
        assert _rel(o, o_ref) < 1e-2 and _rel(st, st_ref) < 1e-6, impl
        if impl == "flashinfer":
            assert seen["in_place"] and torch.equal(seen["state_indices"], slots) and seen["use_l2"]
            assert seen["max_seqlen"] == max(lens) and seen["q"] is inp["q"] and seen["k"] is inp["k"]
            assert "state_indices" in pc.note and "normalised by FlashInfer" in pc.note
            pool = s.extra["fi"]["state"].transpose(-1, -2)
        else:
            assert "gather, call, scatter" in pc.note
            pool = s.state
        assert torch.equal(pool[others], pool0[others]), impl
        assert _rel(pool[slots], st_ref) < 1e-6, impl
