"""Microbenchmark: the isolated state spine (stage 2), tensor-core `wgmma` against `scalar`.

    python benchmarks/bench_spine.py [--quick] [--json PATH] [--md PATH]
    python benchmarks/bench_spine.py --crossover | --rs-crossover        (where the build rules switch)
    python benchmarks/bench_spine.py --rs-skew                           (solo vs dual, one long sequence)

Stage 1 (recompute_wu) runs once to fill the workspace; then only the
spine is captured in a CUDA graph and replayed, timed with CUDA events, median of many replays,
two ways: "µs" / "µs/chunk" time one replay on an idle GPU (start event, replay, end event,
synchronize: the host's submission of the graph is inside each sample, as for a lone call);
"µs/chunk, queued" times replays queued behind a sleep kernel (bench_prefill's graph method:
the launch is already queued when the start event passes, as for a spine inside a layer's
graph).  The per-call part (launch, prologue, drain) weighs most at small T.
Shapes: T in {1K, 4K, 16K, 64K}, B in {1, 8},
Hv = 32 (Hk = 16), K = V = 128, bf16 operands, fp32 state.

The spine is the one of the unfused plan (it writes h and vnew for fwd_o), for both
spines.  Row "wgmma-o" is the spine with the chunk output fused (it also computes and writes O,
and writes no h / vnew), the kernel the fused plan runs instead of spine + fwd_o: spine_rs_o_*
(the state in the registers of one warpgroup per 64 state columns, a TMA warp and a store warp)
at every B, in the build the launcher's rule picks for the whole prefill (column "build"): its
dual build (one CTA per head, two chains per SM) at B=8, and at B=1 the pair build (a cluster of
a head's two CTAs that multicasts the shared tiles) wherever the prefill runs the overlap plan
(from 24 chunk slots), although alone, without stage 1 beside it, the solo build is a little
faster there (`--rs-crossover` times all three at B = 1..8).

FLOPs counted per chunk and head: W.S (2*64*128*128) + K^T.Vnew (2*128*64*128)
= 4.19 MFLOP, i.e. 65.5 KFLOP per token and value head (wgmma-o computes K.S in place of W.S and
adds Y.Tu^T 2*64*64*128, Q.S 2*64*128*128 and P.Vnew 2*64*64*128: 8.39 MFLOP); % of peak uses 989
TFLOP/s (H200 dense bf16, datasheet).
DRAM bytes counted per chunk and head (spine_bytes): what the spine must read and write at least,
a key head's tiles once for its Hv/Hk value heads; "% copy BW" is their rate against the card's
measured copy bandwidth (gdn_prefill.bench.PEAK_TBPS).  At B=1 the wgmma spine runs near that rate
(ncu: 88.7 kB of DRAM traffic per chunk and head, the model's 90.6), so its time there
is bound by bytes, not by its chain.
"""
from __future__ import annotations

import argparse
import datetime
import statistics
import sys

from gdn_prefill import bench
from gdn_prefill.bench import PEAK_TBPS, one_call_graph, queued_graph_times, write_json, write_text

PEAK_TFLOPS = 989.0
CHUNK = 64
K = V = 128


def spine_flops(T_total: int, Hv: int, fused: bool = False) -> float:
    chunks = T_total / CHUNK
    per_chunk = 2 * 64 * 128 * 128 * 2 + (2 * 64 * 128 * 128 + 2 * 2 * 64 * 64 * 128 if fused else 0)
    return chunks * Hv * per_chunk


def spine_bytes(T_total: int, Hv: int, Hk: int, fused: bool = False) -> float:
    """DRAM bytes of the spine over T_total tokens (whole chunks), per chunk and value head:
    unfused (scalar, wgmma): W and U read (bf16, 64 x 128 each), K read once per key head, gcum and
    rk (fp32 rows), h written (bf16 128 x 128, every chunk's state for fwd_o) and vnew written
    (bf16 64 x 128): 90,624 B at Hv/Hk = 2;  fused output (wgmma-o): Tu and P (bf16 64 x 64 each),
    V, K and q (K, q once per key head), gcum / rk / rq rows read, O written (bf16 64 x 128):
    66,304 B."""
    share = Hv // Hk
    tile = CHUNK * K * 2
    if fused:
        per = tile + 2 * tile / share + 2 * CHUNK * CHUNK * 2 + 3 * CHUNK * 4 + CHUNK * V * 2
    else:
        per = 2 * tile + tile / share + 2 * CHUNK * 4 + K * V * 2 + CHUNK * V * 2
    return T_total / CHUNK * Hv * per


def time_spine(B: int, T: int, Hv: int, Hk: int, spine: str, reps: int, warpgroups: int = 0,
               rs_build: int = -1, lengths: list[int] | None = None) -> dict:
    """spine: "scalar", "wgmma" (both as in the unfused plan) or "wgmma-o" (output fused);
    warpgroups 1 / 2 force a "wgmma" build, rs_build 0 / 1 / 2 (solo, pair, dual) a "wgmma-o" build
    (0 / -1: the rules).  lengths: the sequences' lengths instead of B of T tokens each (B, T are
    then their count and the longest)."""
    import torch

    import gdn_prefill
    from gdn_prefill import _ext
    from gdn_prefill import reference as ref

    lens = list(lengths) if lengths else [T] * B
    B, T = len(lens), max(lens)
    inp = ref.make_inputs(lens, Hk, Hv, seed=0, device="cuda", state="dense", l2norm_inputs=True)
    Tt, N = sum(lens), B
    out = torch.empty(Tt, Hv, 128, dtype=torch.bfloat16, device="cuda")
    ws = torch.empty(gdn_prefill.workspace_bytes(Tt, N, Hv), dtype=torch.uint8, device="cuda")
    state = inp["state"].clone()
    args = (inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], out, state)
    fused = 1 if spine == "wgmma-o" else 0       # both spines of the unfused plan: 0
    kw = dict(cu_seqlens=inp["cu_seqlens"], spine=spine.split("-")[0], workspace=ws, fused=fused)
    _ext._launch_stages(("recompute_wu",), *args, **kw)
    if warpgroups:
        kw["warpgroups"] = warpgroups  # force one wgmma build (0: the launcher's rule)
    if rs_build >= 0:
        kw["rs_build"] = rs_build      # force spine_rs_o's solo (0), pair (1) or dual (2) build
    build = _ext._builds(*args, cu_seqlens=inp["cu_seqlens"], spine=kw["spine"], warpgroups=warpgroups,
                         fused=kw["fused"], rs_build=rs_build)[1]
    us, graph = one_call_graph(lambda: _ext._launch_stages(("spine",), *args, **kw), reps)
    us_queued = statistics.median(queued_graph_times(lambda i: graph.replay(), 1, reps))
    chunks_per_seq = -(-T // CHUNK)
    tflops = spine_flops(Tt, Hv, fused=bool(fused)) / (us * 1e-6) / 1e12
    tbps = spine_bytes(Tt, Hv, Hk, fused=bool(fused)) / (us * 1e-6) / 1e12
    return dict(spine=spine, build=build, warpgroups=warpgroups, rs_build=rs_build, B=B, T=T, Hv=Hv, Hk=Hk, us=us,
                us_per_chunk=us / chunks_per_seq, us_queued=us_queued,
                us_per_chunk_queued=us_queued / chunks_per_seq,
                tflops=tflops, pct_peak=100 * tflops / PEAK_TFLOPS, tbps=tbps, pct_copy=100 * tbps / PEAK_TBPS,
                reps=reps)


def markdown(rows: list[dict], meta: dict) -> str:
    """The table of a run: one row per (spine, B, T); the wgmma rows' speed-up over the scalar
    spine of the same shape; rates (TFLOP/s, TB/s of spine_bytes) from the one-call times."""
    lines = [f"Spine microbenchmark — {meta['card']}, {meta['date']}, {meta['shapes']}, {meta['method']}", "",
             "| spine | build | B | T | µs | µs/chunk | µs/chunk, queued | TFLOP/s | % bf16 peak | TB/s | % copy BW "
             "| wgmma speed-up |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    by = {(r["spine"], r["B"], r["T"]): r for r in rows}
    for r in rows:
        sc = by.get(("scalar", r["B"], r["T"]))
        speed = f"{sc['us'] / r['us']:.1f}x" if (r["spine"] == "wgmma" and sc) else ""
        lines.append(f"| {r['spine']} | {r['build']} | {r['B']} | {r['T']} | {r['us']:.1f} | {r['us_per_chunk']:.3f} | "
                     f"{r['us_per_chunk_queued']:.3f} | {r['tflops']:.2f} | {r['pct_peak']:.2f} | {r['tbps']:.2f} | "
                     f"{r['pct_copy']:.1f} | {speed} |")
    return "\n".join(lines)


def crossover(spine: str, ctas_label: str, ctas_per_head: int, builds, json_path=None, md_path=None) -> None:
    """Builds of one spine side by side at B = 1..8 (T = 4096, Hv = 32), µs per chunk (one call,
    queued in brackets): where the launcher's rule between them should switch.  builds: ((column
    label, time_spine keywords), ...)."""
    rows = [time_spine(B, 4096, 32, 16, spine, 20, **kw) for B in (1, 2, 3, 4, 6, 8) for _, kw in builds]
    nb = len(builds)
    lines = ["| B | " + ctas_label + "".join(f" | {label} us/chunk" for label, _ in builds) + " |",
             "|---" * (nb + 2) + "|"]
    for i in range(0, len(rows), nb):
        group = rows[i:i + nb]
        lines.append(f"| {group[0]['B']} | {group[0]['B'] * 32 * ctas_per_head} | "
                     + " | ".join(f"{r['us_per_chunk']:.3f} ({r['us_per_chunk_queued']:.3f})" for r in group) + " |")
    _emit(lines, rows, json_path, md_path)


def _emit(lines: list[str], rows: list[dict], json_path=None, md_path=None) -> None:
    """A side-by-side table: printed, its rows as JSON and its lines as markdown where asked."""
    print("\n".join(lines))
    if json_path:
        write_json(rows, json_path)
    if md_path:
        write_text("\n".join(lines) + "\n", md_path)


# Batches where one sequence holds most of the tokens: the dual build's chain is ~1.6x slower per
# chunk than solo's, so where that sequence's chain is the critical path the dual loses although
# the heads fill the SMs; varlen16 and an even batch beside them.  The dual build then runs
# the longest solo-style where its own model says so (grids.dual_lead_solo); the last three rows sit
# near that model's boundary (docs/PERFORMANCE.md, the lead rule).
SKEW_CASES = {"8x4K": [4096] * 8, "varlen16": None, "8K+31x512": [8192] + [512] * 31,
              "16K+15x1K": [16384] + [1024] * 15, "32K+15x2K": [32768] + [2048] * 15,
              "8K+15x1K": [8192] + [1024] * 15, "8K+63x256": [8192] + [256] * 63,
              "16K+63x512": [16384] + [512] * 63,
              # where the order of more than 32 sequences matters (stage 1's ranking): long
              # sequences late in the batch, and 96 log-uniform lengths (128 to 11.6K) in scrambled order
              "64x512+8x8K": [512] * 64 + [8192] * 8,
              "mixed96": [int(128 * 90.5 ** (((61 * i) % 96) / 95)) for i in range(96)]}


def rs_skew(json_path=None, md_path=None, cases=None) -> None:
    """The register-state spine's solo and dual builds (and the rule's pick) on SKEW_CASES (or the named
    ones), µs per call."""
    import torch

    from gdn_prefill import grids
    from gdn_prefill.bench import varlen_lengths
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows = []
    lines = ["| batch | N | tokens | rule's build | dual's longest | solo µs | dual µs | dual / solo |",
             "|---|---|---|---|---|---|---|---|"]
    for name, lens in SKEW_CASES.items():
        if cases and name not in cases:
            continue
        lens = lens or varlen_lengths()
        solo, dual = (time_spine(len(lens), max(lens), 32, 16, "wgmma-o", 15, rs_build=b, lengths=lens)
                      for b in (0, 2))
        from gdn_prefill import _ext
        rule = _ext._spine_rs_build(sum(lens), len(lens), 32, sms)    # the launcher's rule
        lead = "solo-style" if grids.dual_lead_solo(lens, 32, sms) else "dual"  # the kernel's own pick
        rows += [dict(solo, case=name), dict(dual, case=name, dual_longest=lead)]
        lines.append(f"| {name} | {len(lens)} | {sum(lens)} | {rule} | {lead} | {solo['us']:.1f} | {dual['us']:.1f} | "
                     f"{dual['us'] / solo['us']:.2f} |")
        print(lines[-1], flush=True)
    _emit(lines, rows, json_path, md_path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="T in {1K, 4K} only, fewer repetitions")
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--md", help="write a markdown table here")
    ap.add_argument("--crossover", action="store_true",
                    help="time the wgmma spine's WG=1 and WG=2 builds at B = 1..8 (T = 4096) to place the "
                         "launcher's switch")
    ap.add_argument("--rs-crossover", action="store_true",
                    help="time the register-state spine's solo, pair and dual builds (wgmma-o) at B = 1..8 (T = 4096) to "
                         "place the launcher's switch (gdn_abi.h GDN_RS_SOLO_WAVE_NS, GDN_RS_DUAL_WAVE_NS)")
    ap.add_argument("--rs-skew", action="store_true",
                    help="time the register-state spine's solo and dual builds on batches with one long sequence")
    ap.add_argument("--cases", help=f"with --rs-skew: comma list of batches to time (of {', '.join(SKEW_CASES)})")
    ap.add_argument("--spines", help="comma-separated subset of scalar,wgmma,wgmma-o (default: every compiled one)")
    a = ap.parse_args(argv)
    cases = a.cases.split(",") if a.cases else None
    if cases and not set(cases) <= set(SKEW_CASES):
        ap.error(f"--cases: unknown batch(es) {sorted(set(cases) - set(SKEW_CASES))}; choose from {', '.join(SKEW_CASES)}")
    wanted = a.spines.split(",") if a.spines else []
    unknown = [s for s in wanted if s not in ("scalar", "wgmma", "wgmma-o")]
    if unknown:
        ap.error(f"--spines: unknown spine(s) {unknown}; choose from scalar, wgmma, wgmma-o")
    if bench.script_cannot_time("bench_spine"):
        return 0
    import torch

    import gdn_prefill
    from gdn_prefill import grids
    spines = [s for s in ("scalar", "wgmma") if any(v.startswith(f"spine_{s}_") for v in gdn_prefill.compiled_variants())]
    if "spine_rs_o_kv" in gdn_prefill.compiled_variants():
        spines.append("wgmma-o")
    if a.spines:
        missing = [s for s in wanted if s not in spines]
        if missing:
            ap.error(f"--spines: {missing} not compiled into this build (compiled: {spines})")
        spines = [s for s in spines if s in wanted]
    if a.rs_crossover:
        names = ("spine_rs_o_kv", "spine_rs_o_pair_kv", "spine_rs_o_dual_kv")
        if any(n not in gdn_prefill.compiled_variants() for n in names):
            ap.error(f"--rs-crossover: {names} must all be compiled into this build")
        crossover("wgmma-o", "N*Hv*2 (solo CTAs)", 2,
                  tuple((label, dict(rs_build=i)) for i, label in enumerate(grids.RS_BUILDS)), a.json, a.md)
        return 0
    if a.rs_skew:
        rs_skew(a.json, a.md, cases)
        return 0
    if a.crossover:
        crossover("wgmma", "N*Hv*4 (WG=1 CTAs)", 4, (("WG=1", dict(warpgroups=1)), ("WG=2", dict(warpgroups=2))),
                  a.json, a.md)
        return 0
    Ts = (1024, 4096) if a.quick else (1024, 4096, 16384, 65536)
    rows = []
    for B in (1, 8):
        for T in Ts:
            for spine in spines:
                reps = 20 if (a.quick or T * B >= 65536) else 50
                r = time_spine(B, T, 32, 16, spine, reps)
                rows.append(r)
                print(f"{spine:7s} B={B} T={T:6d}: {r['us']:9.1f} us  {r['us_per_chunk']:7.3f} us/chunk "
                      f"{r['tflops']:7.2f} TFLOP/s ({r['pct_peak']:.2f}% peak) {r['tbps']:5.2f} TB/s", flush=True)
    meta = dict(card=torch.cuda.get_device_name(), date=datetime.date.today().isoformat(),
                torch=torch.__version__, shapes="Hk/Hv=16/32, K=V=128", method="CUDA graph of the spine alone, "
                "median of replays timed with CUDA events (µs: one replay on an idle GPU; queued: replays "
                "queued behind a sleep kernel)")
    if a.json:
        write_json(dict(meta=meta, rows=rows), a.json)
    table = markdown(rows, meta)
    print(table)
    if a.md:
        write_text(table + "\n", a.md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
