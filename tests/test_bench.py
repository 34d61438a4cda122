"""CPU tests of the benchmark harness (gdn_prefill/bench/): formulas, case selection,
report writers on synthetic rows, and `python -m gdn_prefill` without a GPU."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import types

import pytest

from gdn_prefill import bench

# ----------------------------------------------------------------------------- formulas


def _chunk_matmul_flops(C, K, V):
    """Per chunk and value head, every product of docs/DESIGN.md §1 written out (2 FLOP per multiply-add)."""
    mm = lambda m, n, k: 2 * m * n * k  # noqa: E731
    stage1 = mm(C, C, K) + C ** 3 / 3 + mm(C, K, C) + mm(C, V, C)       # KK^T, (I+A)^-1, W, U
    stage2 = mm(C, V, K) + mm(K, V, C)                                  # W S, K^T Vnew
    stage3 = mm(C, V, K) + mm(C, C, K) + mm(C, V, C)                    # Q S, Q K^T, (.) Vnew
    return stage1 + stage2 + stage3


@pytest.mark.parametrize("Hv", [8, 32, 64])
def test_flops_per_token_matches_the_stages(Hv):
    assert bench.flops_per_token(Hv) == pytest.approx(Hv * _chunk_matmul_flops(64, 128, 128) / 64, rel=1e-12)


def test_flops_known_values():
    # docs/DESIGN.md §4: ~5.8 MFLOP per token for Hk=16, Hv=32, K=V=128 (Hk does not enter)
    assert bench.flops_per_token(32) == pytest.approx(32 * (98304 + 81920 + 4096 / 3))
    assert bench.flops_per_token(32) == pytest.approx(5.81e6, rel=1e-3)
    assert bench.flops_per_token(64) == pytest.approx(2 * bench.flops_per_token(32))
    assert bench.flops_per_token(8) == pytest.approx(bench.flops_per_token(32) / 4)
    assert bench.flops(8192, 32) == pytest.approx(8192 * bench.flops_per_token(32))
    # compute floor of 1x8K at 790 TFLOP/s: ~60 µs (docs/DESIGN.md §4)
    fc, fh = bench.floors_us(8192, 1, 16, 32)
    assert fc == pytest.approx(8192 * 5810858.67 / 790e12 * 1e6, rel=1e-6)
    assert 60.0 < fc < 60.5


def test_hbm_bytes_known_values():
    # Hk=16, Hv=32: q,k 2*16*128*2 + v 32*128*2 + g,beta 32*8 + o 32*128*2 = 24,832 B/token (docs/DESIGN.md §4: ~24.8 KB)
    per_tok = 2 * 16 * 128 * 2 + 32 * 128 * 2 + 32 * 8 + 32 * 128 * 2
    assert per_tok == 24832
    state = 2 * 1 * 32 * 128 * 128 * 4
    assert bench.hbm_bytes(8192, 1, 16, 32) == 8192 * per_tok + 4 * 2 + state
    assert bench.hbm_bytes(8192, 1, 16, 32, state=False) == 8192 * per_tok + 8
    # Hv=64: 8192 + 16384 + 512 + 16384
    assert bench.hbm_bytes(1, 0, 16, 64, state=False) - 4 == 41472
    # 32 sequences: the state of every one is read and written
    assert bench.hbm_bytes(65536, 32, 8, 8) == 65536 * (2 * 8 * 128 * 2 + 8 * 128 * 2 + 8 * 8 + 8 * 128 * 2) \
        + 4 * 33 + 2 * 32 * 8 * 128 * 128 * 4
    fc, fh = bench.floors_us(8192, 1, 16, 32, peak_tbps=4.3)
    assert fh == pytest.approx(bench.hbm_bytes(8192, 1, 16, 32) / 4.3e12 * 1e6)


def test_rotation_sets():
    l2 = 60 << 20
    assert bench.rotation_sets(10 << 30, l2) == 3                  # huge sets: the minimum of 3
    assert bench.rotation_sets(24 << 20, l2) == 10                 # 4 x 60 MB / 24 MB
    assert bench.rotation_sets(1 << 10, l2) == 32                  # tiny sets: capped
    for b in (1 << 20, 9 << 20, 80 << 20, 1 << 30):
        n = bench.rotation_sets(b, l2)
        assert n >= 3 and (n * b >= 4 * l2 or n == 32)
    # a memory share: the minimum of 3 yields to what fits, never below the L2 rule's need
    assert bench.rotation_sets(32 << 30, l2, memory_bytes=35 << 30) == 1        # 128K x 4 states at 2/4
    assert bench.rotation_sets(10 << 30, l2, memory_bytes=35 << 30) == 3
    assert bench.rotation_sets(24 << 20, l2, memory_bytes=30 << 20) == 10       # the L2 rule wins
    assert bench.rotation_sets(1 << 10, l2, memory_bytes=1 << 40) == 32


# ----------------------------------------------------------------------------- cases


def test_varlen_lengths_fixed_by_seed():
    a = bench.varlen_lengths()
    assert a == bench.varlen_lengths() and len(a) == 16 and sum(a) == 32768 and min(a) >= 1
    assert any(n % 64 for n in a)                                  # partial chunks are exercised
    assert bench.varlen_lengths(seed=1) != a


def test_case_selection():
    full = bench.select_cases()
    assert len(full) == 18 and len({c.name for c in full}) == 18
    assert {(c.Hk, c.Hv) for c in full} == {(16, 32), (16, 64), (8, 8)}
    assert full[0].heads == "16/32"                                # heads-major: 16/32 first
    shapes = {c.shape: c for c in full if c.heads == "16/32"}
    assert shapes["1x64K"].lens == (65536,) and shapes["8x4K"].lens == (4096,) * 8
    assert shapes["32x2K"].T == 65536 and shapes["32x2K"].N == 32 and shapes["varlen16"].N == 16
    quick = bench.select_cases(quick=True)
    assert 2 <= len(quick) <= 6 and all(c.heads == "16/32" for c in quick)
    sel = bench.select_cases(shapes="1x*,4x1000", heads="8/8")
    assert [c.shape for c in sel] == ["1x1K", "1x8K", "1x64K", "4x1000"] and sel[-1].lens == (1000,) * 4
    with pytest.raises(ValueError):
        bench.select_cases(shapes="nonsense")
    with pytest.raises(ValueError):
        bench.select_cases(heads="16/24")


def test_the_qwen35_head_group():
    """--heads qwen3.5: the family's seven GDN head counts (ratios 4, 3, 1), in order, each once, and
    mixable with Hk/Hv pairs."""
    sel = bench.select_cases(shapes="8x4K", heads="qwen3.5")
    assert [c.heads for c in sel] == ["16/64", "8/32", "4/16", "2/8", "16/48", "8/24", "16/16"]
    assert {c.Hv // c.Hk for c in sel} == {4, 3, 1}
    sel = bench.select_cases(shapes="8x4K", heads="16/32,Qwen3.5,16/64")
    assert [c.heads for c in sel][:3] == ["16/32", "16/64", "8/32"] and len(sel) == 8


def test_impl_list_reports_what_is_missing():
    names, skipped = bench._impl_list(None)
    assert "gdn:scalar" in names and "gdn:wgmma" in names          # from compiled_variants()
    for other in ("fla", "flashinfer", "flashqla"):
        assert other in names or any(s["what"] == other for s in skipped)
    names, _ = bench._impl_list("gdn:wgmma")
    assert names == ["gdn:wgmma"]
    _, skipped = bench._impl_list("gdn,nothing")
    assert any(s["what"] == "nothing" for s in skipped)


# ----------------------------------------------------------------------------- writers


def _synthetic():
    rows = [
        dict(case="1x8K@16/32", shape="1x8K", N=1, T=8192, Hk=16, Hv=32, K=128, V=128, impl="gdn:wgmma", n_sets=3,
             graph_us=100.0, eager_us=150.0),
        dict(case="1x8K@16/32", shape="1x8K", N=1, T=8192, Hk=16, Hv=32, K=128, V=128, impl="gdn:scalar", n_sets=3,
             error="GdnSpineError: spine 'scalar' cannot run"),
        dict(case="1x8K@16/32", shape="1x8K", N=1, T=8192, Hk=16, Hv=32, K=128, V=128, impl="fla", n_sets=3,
             graph_us=200.0, eager_us=600.0, note="cu_seqlens_cpu passed"),
        dict(case="8x4K@16/32", shape="8x4K", N=8, T=32768, Hk=16, Hv=32, K=128, V=128, impl="gdn:wgmma", n_sets=3,
             eager_us=400.0, graph_error="RuntimeError: capture failed"),
    ]
    meta = dict(card="NVIDIA H200", date="2026-11-30 12:00 UTC", driver="580.1", torch="2.11.0+cu130", fla="0.6.0",
                peak_tflops=790.0, peak_tbps=4.3, methodology="synthetic")
    host = [dict(impl="gdn.prefill", problem="1x64 @ 16/32", us_per_call=21.5, gpu_us=12.0),
            dict(impl="fla", problem="1x64 @ 16/32", us_per_call=180.2, gpu_us=30.0)]
    return dict(meta=meta, rows=rows, host_overhead=host,
                skipped=[dict(what="flashinfer", reason="not importable (ImportError)")])


def test_derive_and_markdown():
    res = bench.derive(_synthetic())
    ours, scalar, fla, batched = res["rows"]
    assert ours["vs_fla_graph"] == pytest.approx(2.0) and ours["vs_fla_eager"] == pytest.approx(4.0)
    assert fla["vs_fla_graph"] == pytest.approx(1.0)
    assert ours["tokens_per_s"] == pytest.approx(8192 / 100e-6)
    assert ours["pct_compute_floor"] == pytest.approx(100 * bench.floors_us(8192, 1, 16, 32)[0] / 100.0)
    assert ours["pct_hbm_floor"] == pytest.approx(100 * bench.floors_us(8192, 1, 16, 32)[1] / 100.0)
    assert scalar["tokens_per_s"] is None and scalar["vs_fla_graph"] is None
    assert batched["vs_fla_eager"] is None                         # no FLA row for that case
    assert batched["tokens_per_s"] == pytest.approx(32768 / 400e-6)  # eager when the graph failed
    md = bench.markdown_report(res)
    assert "NVIDIA H200" in md and "2.00×" in md and "4.00×" in md
    assert "error: GdnSpineError" in md and "graph capture failed" in md
    assert "| gdn.prefill | 21.5 | 12.0 |" in md and "flashinfer: not importable" in md
    assert "Hv·(6KV + 2C(3K+2V) + C²/3)" in md
    header = [ln for ln in md.splitlines() if ln.startswith("| shape |")][0]
    body = [ln for ln in md.splitlines() if ln.startswith("| 1x8K |")]
    assert len(body) == 3 and all(ln.count("|") == header.count("|") for ln in body)


def test_json_and_numerics_writers(tmp_path):
    res = bench.derive(_synthetic())
    p = bench.write_json(res, str(tmp_path / "sub" / "r.json"))
    back = json.load(open(p))
    assert back["meta"]["card"] == "NVIDIA H200" and len(back["rows"]) == 4
    assert back["rows"][0]["vs_fla_graph"] == pytest.approx(2.0)
    num = dict(meta=dict(card="H200", date="d", repeats=5),
               rows=[dict(T=4096, Hk=16, Hv=32, impl="gdn:wgmma", err_o=2.5e-3, err_state=1.4e-3,
                          bitwise_identical=True),
                     dict(T=65536, Hk=16, Hv=32, impl="fla", err_o=3.6e-3, err_state=2.8e-3,
                          bitwise_identical=False),
                     dict(T=65536, Hk=2, Hv=4, impl="gdn:scalar", error="boom")],
               notes=["T=65536 was checked at Hk/Hv=2/4"])
    md = bench.numerics_markdown(num)
    assert "2.500e-03" in md and "| yes |" in md and "**no**" in md and "error: boom" in md
    assert "T=65536 was checked at Hk/Hv=2/4" in md
    bench.write_text(md, str(tmp_path / "n.md"))
    assert (tmp_path / "n.md").read_text() == md


def test_plot(tmp_path):
    pytest.importorskip("matplotlib")
    res = bench.derive(_synthetic())
    p = bench.plot(res, str(tmp_path / "p.png"))
    assert p and os.path.getsize(p) > 1000


def test_progress_without_tqdm(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "tqdm", None)                 # `from tqdm import tqdm` -> ImportError
    bar = bench.Progress(2, "cases")
    bar.step("a")
    bar.done()
    bar.step("b")
    bar.done()
    bar.close()
    out = capsys.readouterr().out
    assert "[1/2] a" in out and "[2/2] b" in out


# ----------------------------------------------------------------------------- entry points


def test_bench_imports_nothing_heavy():
    code = ("import sys, gdn_prefill.bench; "
            "print(sorted(m for m in ('torch', 'cutlass', 'fla', 'flashinfer', 'gdn_prefill._ext') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_main_job_without_gpu(monkeypatch, capsys):
    monkeypatch.setattr(bench, "hopper_status", lambda: (False, "CUDA is not available (test)"))
    rc = bench.main_job()
    out = capsys.readouterr().out
    assert rc == 0
    assert "no Hopper GPU" in out and "CUDA is not available (test)" in out
    # the plan: spine verdicts, kernels with grids and smem, workspace bytes
    assert "spines: scalar: runs; wgmma: runs" in out and "auto runs 'wgmma'" in out
    import gdn_prefill
    from gdn_prefill import grids
    assert gdn_prefill._ext._spine_rs_build(8192, 1, 32) == "pair"     # the overlap plan
    assert "spine_rs_o_pair_kv" in out and str(grids.grid_spine_rs(8192, 1, 32)) in out
    assert f"workspace: {gdn_prefill.workspace_bytes(8192, 1, 32, fused=True):,} bytes" in out   # the plan's
    assert "stage 1 overlapped with the spine: runs: recompute_wu_workers on 68 CTAs" in out
    # the oracle check, with its error printed
    assert "reference.recurrent vs reference.chunked" in out and "-> OK" in out and "rel err o = " in out


def test_cli_list_and_no_gpu(monkeypatch, capsys):
    assert bench.main(["--list", "--quick"]) == 0
    out = capsys.readouterr().out
    assert "| 1x8K@16/32 | 1 | 8192 | 5.81 | 24.8 | 60.3 |" in out
    monkeypatch.setattr(bench, "hopper_status", lambda: (False, "no device (test)"))
    assert bench.main(["--quick"]) == 1
    assert "no Hopper GPU" in capsys.readouterr().out
    assert bench.main(["--shapes", "bogus"]) == 2


def test_orchestration_with_stub_gpu(monkeypatch, tmp_path, capsys):
    """run_timing / run_numerics / main end to end with the GPU parts stubbed out: rows, errors, skips, files."""
    from gdn_prefill import reference

    monkeypatch.setattr(bench, "hopper_status", lambda: (True, "stub H200"))
    monkeypatch.setattr(bench, "_impl_list", lambda req: (["gdn:wgmma", "fla"],
                                                          [dict(what="flashinfer", reason="not importable")]))
    monkeypatch.setattr(bench, "_meta", lambda args, cases: dict(card="stub", date="today", peak_tflops=args.peak_tflops,
                                                                 peak_tbps=args.peak_tbps, l2_bytes=None))
    stub_set = types.SimpleNamespace(q=None, k=None, v=None, g=None, beta=None, state=None, out=None)
    monkeypatch.setattr(bench, "_make_set", lambda case, seed, normed, pool=False, gates="fast": stub_set)
    monkeypatch.setattr(bench, "_cu", lambda case: dict(cu32=None, cu64=None, cu64_cpu=None))
    seen = []

    def calls(impl, case, sets, cu, use_l2):
        seen.append((impl, case.name, len(sets)))
        if impl == "fla" and case.shape == "8x4K":
            raise RuntimeError("stub failure\nsecond line")
        return [lambda: None] * len(sets), ""
    monkeypatch.setattr(bench, "_calls", calls)
    monkeypatch.setattr(bench, "_time_impl", lambda c, modes, b, lo, hi, warm=0.0: dict(
        graph_us=100.0 if "graph" in modes else None, eager_us=120.0))
    monkeypatch.setattr(bench, "host_overhead", lambda impls, hk, hv, use_l2=False: [
        dict(impl="gdn.prefill", problem="1x64", us_per_call=20.0, gpu_us=9.0)])
    monkeypatch.setattr(bench, "_numerics_impl", lambda impl, case, s, cu, l2, o, st: dict(
        err_o=1e-3, err_state=2e-3, bitwise_identical=True, nonfinite_o=0))
    monkeypatch.setattr(reference, "chunked", lambda *a, **k: (None, None))

    out = tmp_path / "res"
    rc = bench.main(["--quick", "--out", str(out), "--tag", "t", "--no-progress", "--numerics",
                     "--numerics-T", "256", "--no-plot"])
    assert rc == 0
    res = json.load(open(out / "t.json"))
    cases = [c.name for c in bench.select_cases(quick=True)]
    assert [r["case"] for r in res["rows"]] == [c for c in cases for _ in range(2)]
    bad = [r for r in res["rows"] if r.get("error")]
    assert len(bad) == 1 and bad[0]["error"] == "RuntimeError: stub failure"
    good = [r for r in res["rows"] if r["impl"] == "gdn:wgmma"]
    assert all(r["n_sets"] >= 3 and r["graph_us"] == 100.0 for r in good)
    assert res["skipped"][0]["what"] == "flashinfer" and res["host_overhead"][0]["us_per_call"] == 20.0
    md = (out / "t.md").read_text()
    assert "| 1x8K | 16/32 | 8192 | gdn:wgmma | 100.0 | 120.0 | 1.00× |" in md
    num = json.load(open(out / "t_numerics.json"))
    assert [(r["T"], r["impl"], r["bitwise_identical"]) for r in num["rows"]] == [(256, "gdn:wgmma", True),
                                                                                 (256, "fla", True)]
    assert "1.000e-03" in (out / "t_numerics.md").read_text()
    # a time budget that is already spent: every case is listed as skipped, nothing timed -> rc 1
    rc = bench.main(["--quick", "--out", str(out), "--tag", "b", "--no-progress", "--budget-s", "1e-12",
                     "--no-plot", "--no-host-overhead"])
    res = json.load(open(out / "b.json"))
    assert rc == 1 and not res["rows"]
    assert [s["what"] for s in res["skipped"][1:]] == cases


def test_main_job_on_gpu_path_with_stubs(monkeypatch, capsys):
    """The Hopper branch of main_job: --quick timing table, then the oracle check at T = 4096; exit code."""
    monkeypatch.setattr(bench, "hopper_status", lambda: (True, "stub H200"))
    seen = {}

    def timing(cases, args, log=print):
        seen["cases"], seen["quick"] = [c.name for c in cases], args.quick
        return bench.derive(_synthetic())
    monkeypatch.setattr(bench, "run_timing", timing)

    def numerics(args, log=print, err=1e-3):
        seen["T"] = args.numerics_T
        return dict(meta={}, rows=[dict(T=4096, Hk=16, Hv=32, impl="gdn:wgmma", err_o=err, err_state=err,
                                        bitwise_identical=True)], notes=[])
    monkeypatch.setattr(bench, "run_numerics", numerics)
    assert bench.main_job() == 1                                   # the synthetic rows hold a gdn:scalar error
    out = capsys.readouterr().out
    assert "stub H200" in out and "| 1x8K | 16/32 | 8192 | gdn:wgmma |" in out and "1.000e-03" in out
    assert seen["quick"] and seen["T"] == "4096" and seen["cases"] == [c.name for c in bench.select_cases(True)]
    good = _synthetic()
    good["rows"] = [r for r in good["rows"] if not r.get("error")]
    monkeypatch.setattr(bench, "run_timing", lambda cases, args, log=print: bench.derive(good))
    assert bench.main_job() == 0
    monkeypatch.setattr(bench, "run_numerics", lambda args, log=print: numerics(args, err=0.5))
    assert bench.main_job() == 1
    assert "an error above 0.01" in capsys.readouterr().out


def test_microbenchmark_scripts_without_gpu():
    """The benchmark scripts: on a machine without a Hopper GPU they say so and exit 0; a bad
    --spines value is an argument error (exit 2) naming the flag."""
    import torch
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is visible: the scripts would time it")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for script in ("bench_spine.py", "bench_overlap.py", "bench_many_seqs.py", "bench_checkpoints.py",
                   "bench_context_parallel.py", "numerics_state_dtype.py"):
        run = subprocess.run([sys.executable, os.path.join(root, "benchmarks", script)], capture_output=True,
                             text=True, timeout=120)
        assert run.returncode == 0 and "no Hopper GPU" in run.stdout, script + run.stdout + run.stderr
    run = subprocess.run([sys.executable, os.path.join(root, "benchmarks", "bench_spine.py"), "--spines", "fast"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "--spines: unknown spine(s) ['fast']" in run.stderr, run.stderr


def test_numerics_state_dtype_start_and_pools(repo_script):
    """numerics_state_dtype's common initial state: held exactly by every pool type measured
    (rounded to bf16 for fp32 and bf16 pools, as issue 35's table; to fp8 e4m3 with an fp8 pool);
    an unknown --pools type is an argument error naming the flag, before any GPU check."""
    import torch

    from gdn_prefill import reference as ref
    mod = repo_script("benchmarks/numerics_state_dtype.py")
    x = torch.randn(2, 4, 128, 128, generator=torch.Generator().manual_seed(1)) * 128 ** -0.5
    assert torch.equal(mod.common_start(x, ["fp32", "bf16"]), x.to(torch.bfloat16).float())
    for pools in (["fp32", "bf16", "fp16", "fp8e4m3"], ["bf16", "fp16"], ["fp16"]):
        start = mod.common_start(x, pools)
        for p in pools:
            assert torch.equal(ref.round_to_pool(start, ref.POOL_DTYPES[p][0]).float(), start), (pools, p)
    assert torch.equal(mod.common_start(x, ["fp32", "fp8e4m3"]), ref.round_to_pool(x, torch.float8_e4m3fn).float())
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    run = subprocess.run([sys.executable, os.path.join(root, "benchmarks", "numerics_state_dtype.py"), "--pools",
                          "fp32,fp4"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "--pools: unknown pool type(s) ['fp4']" in run.stderr, run.stderr


def test_spine_table_has_both_timings(repo_script):
    """bench_spine's markdown: the one-call and the queued µs/chunk, the rates, and the wgmma
    speed-up over the scalar row of the same shape (from the one-call times), one cell each."""
    mod = repo_script("benchmarks/bench_spine.py")

    def row(spine, us, us_q):
        return dict(spine=spine, build=f"spine_{spine}_kv", B=1, T=4096, us=us, us_per_chunk=us / 64,
                    us_queued=us_q, us_per_chunk_queued=us_q / 64, tflops=1.0, pct_peak=0.1, tbps=2.15,
                    pct_copy=50.0)

    meta = dict(card="H200", date="2026-11-30", shapes="Hk/Hv=16/32", method="m")
    lines = mod.markdown([row("scalar", 448.0, 440.0), row("wgmma", 64.0, 57.6)], meta).splitlines()
    head, rows = lines[2], lines[4:]
    assert head.count("|") == 13 and head.endswith("% copy BW | wgmma speed-up |")
    assert [r.count("|") for r in rows] == [13, 13]
    cells = [c.strip() for c in rows[1].split("|")[1:-1]]
    assert cells[5] == "1.000" and cells[6] == "0.900" and cells[9:] == ["2.15", "50.0", "7.0x"], cells
    assert [c.strip() for c in rows[0].split("|")[1:-1]][11] == ""


def test_spine_bytes_per_chunk_and_head(repo_script):
    """The DRAM bytes bench_spine's rates count, per chunk of 64 tokens and value head at Hv/Hk = 2
    (a key head's tiles are read once for its two value heads): the unfused spine reads W, U
    (bf16 64 x 128), half a K tile, gcum and rk (fp32 x 64) and writes h (bf16 128 x 128) and vnew;
    the fused one reads Tu and P (bf16 64 x 64 each), V, half a K and half a q tile, three fp32
    rows and writes O.  Whole-chunk T scales it linearly, in tokens and in heads."""
    mod = repo_script("benchmarks/bench_spine.py")
    tile, p, o, h = 64 * 128 * 2, 64 * 64 * 2, 64 * 128 * 2, 128 * 128 * 2
    assert mod.spine_bytes(64, 32, 16) == 32 * (2 * tile + tile // 2 + 2 * 64 * 4 + h + o) == 32 * 90624
    assert mod.spine_bytes(64, 32, 16, fused=True) == 32 * (2 * p + tile + tile + 3 * 64 * 4 + o) == 32 * 66304
    assert mod.spine_bytes(4096, 32, 16) == 64 * mod.spine_bytes(64, 32, 16)
    assert mod.spine_bytes(64, 32, 32) == mod.spine_bytes(64, 32, 16) + 32 * tile // 2     # no sharing


def test_keep_busy_runs_every_set_for_the_warm_time(monkeypatch):
    """The sustained-clock warm-up (bench.WARM_S) runs the calls round-robin until its
    wall time is spent, synchronizing as it goes (a bounded queue); zero seconds runs nothing."""
    import time

    import torch
    syncs = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: syncs.append(1))
    seen = []
    bench._keep_busy(seen.append, 3, 0.0)
    assert seen == [] and syncs == []
    t0 = time.time()
    bench._keep_busy(lambda i: (seen.append(i), time.sleep(0.002)), 3, 0.05)
    assert time.time() - t0 >= 0.05
    assert seen[:6] == [0, 1, 2, 0, 1, 2] and set(seen) == {0, 1, 2}
    assert len(syncs) == len(seen) // 8 and len(seen) % 8 == 0
    p = bench.build_parser().parse_args([])
    assert p.warm_s == bench.WARM_S > 1.0      # past the power limiter's ~1 s response


def test_table_report_prints_and_writes(tmp_path, capsys):
    """The benchmark scripts' shared table writer: the same text printed and in the .md, the data
    in the .json."""
    import json
    md, js = tmp_path / "t.md", tmp_path / "t.json"
    text = bench.table_report("head line", ["mode", "runs"], [["streams2", 20], ["threads4", 20]],
                              dict(rows=[1, 2]), str(md), str(js))
    assert text == "head line\n\n| mode | runs |\n|---|---|\n| streams2 | 20 |\n| threads4 | 20 |\n"
    assert capsys.readouterr().out == text and md.read_text() == text
    assert json.loads(js.read_text()) == {"rows": [1, 2]}


def test_plot_shapes_draws_every_row_or_says_why(tmp_path):
    """bench_prefill --plot-from: one bar per implementation and shape from results' JSON (no GPU);
    None, and no file, when nothing has a time in the mode asked for."""
    pytest.importorskip("matplotlib")
    from gdn_prefill.bench.report import plot_shapes
    rows = [dict(shape=s, Hk=2, Hv=4, impl=i, graph_us=t, eager_us=None)
            for s, i, t in (("1x8K", "gdn:wgmma", 76.9), ("1x8K", "flashinfer", 100.3), ("1x32K", "gdn:wgmma", 167.8))]
    out = tmp_path / "p.png"
    assert plot_shapes([dict(meta=dict(card="H200", date="d"), rows=rows)], str(out)) == str(out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert plot_shapes([dict(rows=rows)], str(tmp_path / "e.png"), mode="eager") is None
    assert not (tmp_path / "e.png").exists()


def test_plot_shapes_names_one_batch_once():
    """The picture's groups: a mixed batch spelled with its lengths or with N x L runs is one group
    (the later run's bar wins), and uniform shapes keep their names."""
    from gdn_prefill.bench.report import short_shape
    assert short_shape("2048+2048+2048+1500+700+100") == "3x2K+1500+700+100"
    assert short_shape("3x2K+1500+700+100") == "3x2K+1500+700+100"
    assert short_shape("4096+2048+1024+512+256+128+64+64") == "4096+2048+1024+512+256+128+2x64"
    assert short_shape("8x4K") == "8x4K" and short_shape("100+100") == "2x100"


def test_shapes_take_counts_with_suffixes():
    """B and T of a BxT shape take the K / M suffixes (16Kx4: 16,384 sequences of 4 tokens, the
    many-sequence rows bench_prefill times beside the peers); anything else is named in the error."""
    from gdn_prefill.bench.cases import parse_shape
    assert parse_shape("16Kx4") == [4] * 16384 and parse_shape("8x4K") == [4096] * 8
    assert parse_shape("1x1000") == [1000] and parse_shape("2x1M") == [1 << 20] * 2
    assert parse_shape("3x2K+1500+700+100") == [2048] * 3 + [1500, 700, 100]
    for bad in ("8xq", "0x4", "4", "x4"):
        with pytest.raises(ValueError, match="shape"):
            parse_shape(bad)


def test_pooled_gathers_calls_and_scatters_only_the_batch_slots():
    """--pool's peer call (bench.pooled): the sequences' slots are gathered in order, the peer's final
    states land in exactly those slots, and every other slot of the pool keeps its bits."""
    import torch
    n = 3
    pool = torch.randn(bench.pool_slots(n), 2, 4, 5)
    before = pool.clone()
    slots = torch.tensor([5, 0, 3])
    seen = {}

    def peer(init):
        seen["init"] = init.clone()
        return init * 2 + 1
    out = bench.pooled(peer, pool, slots)()
    assert bench.pool_slots(n) == 2 * n + 1
    assert torch.equal(seen["init"], before[slots])
    assert torch.equal(out, before[slots] * 2 + 1)
    assert torch.equal(pool[slots], before[slots] * 2 + 1)
    others = [i for i in range(bench.pool_slots(n)) if i not in slots.tolist()]
    assert torch.equal(pool[others], before[others])


def test_flashqla_is_called_as_fla_with_its_defaults(monkeypatch):
    """FlashQLA's door (FLA's signature): [1, T, H, D] views, int64 cu_seqlens, no cu_seqlens_cpu (it
    takes none), the flag as asked, auto_cp left at its default; with --pool, gathered and scattered
    around the call.  A stub module stands in for flash_qla; the set's tensors are CPU tensors."""
    import torch
    from gdn_prefill.bench import peers
    from gdn_prefill.bench.cases import Case
    seen = []

    def chunk_gated_delta_rule(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
                               use_qk_l2norm_in_kernel=False, cu_seqlens=None, head_first=False, auto_cp=True):
        seen.append(dict(shapes=(q.shape, v.shape, g.shape), init=initial_state.clone(), final=output_final_state,
                         l2=use_qk_l2norm_in_kernel, cu=cu_seqlens, auto_cp=auto_cp))
        return torch.zeros_like(v), initial_state + 1
    monkeypatch.setitem(sys.modules, "flash_qla", types.SimpleNamespace(chunk_gated_delta_rule=chunk_gated_delta_rule))
    names, skipped = bench._impl_list("flashqla")
    assert names == ["flashqla"] and not skipped
    T, N, Hk, Hv = 8, 2, 1, 2
    cu = dict(cu64=torch.tensor([0, 3, 8]), cu64_cpu=torch.tensor([0, 3, 8]))
    case = Case(shape="t", lens=(3, 5), Hk=Hk, Hv=Hv)
    state = torch.randn(N, Hv, 4, 4)
    s = types.SimpleNamespace(q=torch.randn(T, Hk, 4), k=torch.randn(T, Hk, 4), v=torch.randn(T, Hv, 4),
                              g=torch.randn(T, Hv), beta=torch.rand(T, Hv), state=state, extra={})
    p = peers.peer_call("flashqla", case, s, cu, True)
    o, final = p.result(p.call())
    assert seen[0]["shapes"] == ((1, T, Hk, 4), (1, T, Hv, 4), (1, T, Hv))
    assert seen[0]["final"] and seen[0]["l2"] and seen[0]["auto_cp"] and seen[0]["cu"] is cu["cu64"]
    assert torch.equal(seen[0]["init"], state) and torch.equal(final, state + 1) and o.shape == (T, Hv, 4)
    assert "auto_cp" in p.note
    pool = torch.randn(bench.pool_slots(N), Hv, 4, 4)
    before, slots = pool.clone(), torch.tensor([4, 1])
    s.state, s.extra = pool, dict(slots=slots)
    p = peers.peer_call("flashqla", case, s, cu, False)
    p.result(p.call())
    assert torch.equal(seen[1]["init"], before[slots]) and not seen[1]["l2"]
    assert torch.equal(pool[slots], before[slots] + 1) and "gather, call, scatter" in p.note


def test_pool_flag_reaches_the_report():
    """--pool is parsed (default off), recorded in the meta, and said in the report's header."""
    from gdn_prefill.bench import report
    assert not bench.build_parser().parse_args([]).pool
    assert bench.build_parser().parse_args(["--pool"]).pool
    meta = dict(card="H200", date="today", use_qk_l2norm=True, methodology="m")
    plain = report.markdown_report(dict(meta=meta, rows=[], host_overhead=[], skipped=[]))
    pooled = report.markdown_report(dict(meta=dict(meta, state_pool=True), rows=[], host_overhead=[], skipped=[]))
    assert "slot indices" not in plain
    assert "the state a pool updated through slot indices" in pooled


def test_gates_fast_are_the_old_draw_mixed_span_long_memory_slow_never_forget():
    """draw_gates: 'fast' is logsigmoid(3 + 1.5 randn) from the same draws (the default inputs do
    not move); 'mixed' gives each head its own rate, from forgetting within a chunk past the
    segmented plan's cut (GDN_MAP_CUT_LOG_DECAY) to remembering a 32K prompt above it; 'slow' leaves
    every head above it over a 32K prompt (no map is cut); an unknown kind names the argument."""
    import torch
    import torch.nn.functional as F
    from gdn_prefill import grids
    from gdn_prefill.bench.inputs import draw_gates
    cut = grids.MAP_CUT_LOG_DECAY

    def rn_from(seed):
        gen = torch.Generator().manual_seed(seed)
        return lambda *shape: torch.randn(*shape, generator=gen)
    T, Hv = 32768, 16
    assert torch.equal(draw_gates("fast", T, Hv, rn_from(3)), F.logsigmoid(3.0 + 1.5 * rn_from(3)(T, Hv)))
    g = draw_gates("mixed", T, Hv, rn_from(3))
    assert g.shape == (T, Hv) and torch.isfinite(g).all() and (g < 0).all()
    per_head = g.mean(0)
    assert torch.all(per_head[1:] > per_head[:-1])                  # slower heads to the right
    assert abs(per_head[0].item() + 0.3) < 0.01 and abs(per_head[-1].item() + 1e-4) < 5e-6
    total = g.sum(0)                                                 # the prompt's summed log-decay
    assert total[-1].item() > cut > g[:64, 0].sum().item()          # one head never passes the cut, one in a chunk
    slow = draw_gates("slow", T, Hv, rn_from(3))
    assert (slow < 0).all() and (slow.sum(0) > cut).all()
    with pytest.raises(ValueError, match="gates: expected one of fast, mixed, slow"):
        draw_gates("none", T, Hv, rn_from(3))


def test_gates_flag_reaches_the_inputs_and_the_report(monkeypatch, tmp_path):
    """--gates is parsed (default fast), handed to every timed buffer set, and said in the report."""
    from gdn_prefill.bench import report
    assert bench.build_parser().parse_args([]).gates == "fast"
    with pytest.raises(SystemExit):
        bench.build_parser().parse_args(["--gates", "none"])
    monkeypatch.setattr(bench, "hopper_status", lambda: (True, "stub H200"))
    monkeypatch.setattr(bench, "_impl_list", lambda req: (["gdn:wgmma"], []))
    monkeypatch.setattr(bench, "_meta", lambda args, cases: dict(card="stub", date="today", peak_tflops=args.peak_tflops,
                                                                 peak_tbps=args.peak_tbps, l2_bytes=None))
    seen = set()

    def make_set(case, seed, normed, pool=False, gates="fast"):
        seen.add(gates)
        return types.SimpleNamespace(q=None, k=None, v=None, g=None, beta=None, state=None, out=None)
    monkeypatch.setattr(bench, "_make_set", make_set)
    monkeypatch.setattr(bench, "_cu", lambda case: dict(cu32=None, cu64=None, cu64_cpu=None))
    monkeypatch.setattr(bench, "_calls", lambda impl, case, sets, cu, use_l2: ([lambda: None] * len(sets), ""))
    monkeypatch.setattr(bench, "_time_impl", lambda c, modes, b, lo, hi, warm=0.0: dict(graph_us=1.0, eager_us=1.0))
    assert bench.main(["--shapes", "8x4K", "--heads", "16/32", "--gates", "mixed", "--out", str(tmp_path),
                       "--tag", "t", "--no-progress", "--no-plot", "--no-host-overhead"]) == 0
    assert seen == {"mixed"}
    meta = dict(card="H200", date="today", methodology="m")
    assert ", gates mixed" in report.markdown_report(dict(meta=dict(meta, gates="mixed"), rows=[], host_overhead=[],
                                                          skipped=[]))
    assert "gates" not in report.markdown_report(dict(meta=dict(meta, gates="fast"), rows=[], host_overhead=[],
                                                      skipped=[])).split("Method")[0]


def test_bench_segments_writes_its_table_and_the_model(repo_script, monkeypatch, tmp_path):
    """bench_segments' main past the timing (stubbed): the rows in its markdown table and JSON, with
    the cost model's constants the rows are compared against (gdn_abi.h GDN_MODEL_*) in the meta."""
    import torch

    from gdn_prefill import _abi
    mod = repo_script("benchmarks/bench_segments.py")
    monkeypatch.setattr(bench, "script_cannot_time", lambda name: False)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "stub H100")
    seen = []

    def time_shape(B, T, hk, hv, counts, passes, gates, seg_builds):
        seen.append((B, T, hk, hv, tuple(counts), passes, gates, seg_builds))
        return [dict(shape=f"{B}x{T // 1024}K", heads=f"{hk}/{hv}", plan="segmented", seg_chunks=64, segments=8,
                     us=123.4, predicted_us=120.0, maps_us=40.0)]
    monkeypatch.setattr(mod, "time_shape", time_shape)
    j, m = tmp_path / "s.json", tmp_path / "s.md"
    assert mod.main(["--shapes", "1x32K", "--heads", "4/8", "--segments", "8", "--gates", "mixed",
                     "--seg-builds", "solo,dual", "--json", str(j), "--md", str(m)]) == 0
    assert seen == [(1, 32768, 4, 8, (8,), True, "mixed", ("solo", "dual"))]
    with pytest.raises(SystemExit):
        mod.main(["--seg-builds", "pair"])         # the SEGMENT pass has no pair build: refused by name
    meta = json.load(open(j))["meta"]
    assert meta["gates"] == "mixed" and "mixed gates" in m.read_text()
    assert meta["model"] == {k: v for k, v in _abi.CONSTANTS.items() if k.startswith("GDN_MODEL_")} and meta["model"]
    assert "| 1x32K | 4/8 | segmented | 8 x 64 | 123.4 | 120.0 |  | 40.0 |" in m.read_text()
