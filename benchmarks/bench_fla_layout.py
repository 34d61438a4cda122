"""The cost of the FLA layer's layout copies (issue 55): gdn_prefill.chunk_gated_delta_rule with q, k
and v as transformers' Qwen3-Next / Qwen3.5 layers pass them, against the same call on tensors the
kernels read in place.

    python benchmarks/bench_fla_layout.py [--tokens 1K,3000,8K,32K] [--batch 1] [--heads 16/32]
                                          [--reps 20] [--graph] [--md PATH] [--json PATH]

Layouts (values equal in each, bf16, K = V = 128, l2norm in the kernel, no initial state, the
final state written, as a model's prefill with the cache):
  contiguous   q, k, v each its own contiguous tensor;
  projection   slices of one [B, T, (2 Hk + Hv) 128] projection (read in place: the serving layout);
  conv         views of a convolution output [B, C, T] transposed to [B, T, C] and split (the
               models' layout: every last dim has stride T, so the layer copies q, k and v once each).
Each row: the layer's median time (CUDA events around one eager call after two warm-ups; --graph:
one call captured in a CUDA graph, each replay timed alone), its difference from the contiguous
row, and for the conv layout the three copies alone (q, k, v .contiguous()).  Needs a Hopper GPU;
without one it says so and exits 0.
"""
from __future__ import annotations

import argparse
import datetime
import sys

from gdn_prefill import bench
from gdn_prefill.bench import table_report
from gdn_prefill.bench.cases import parse_count, parse_heads

LAYOUTS = ("contiguous", "projection", "conv")


def make_inputs(B: int, T: int, hk: int, hv: int, layout: str, device: str = "cuda", seed: int = 0) -> dict:
    """The layer's arguments in `layout`, the same values whatever the layout."""
    import torch
    gen = torch.Generator().manual_seed(seed)
    D = 128
    cols = [hk * D, hk * D, hv * D]
    qkv = torch.randn(B, T, sum(cols), generator=gen).bfloat16()
    g = torch.nn.functional.logsigmoid(3 + torch.randn(B, T, hv, generator=gen))
    beta = torch.rand(B, T, hv, generator=gen).bfloat16()
    if layout == "conv":
        qkv = qkv.transpose(1, 2).contiguous().to(device).transpose(1, 2)      # [B, C, T] storage
    elif layout in ("projection", "contiguous"):
        qkv = qkv.to(device)
    else:
        raise ValueError(f"layout {layout!r}: expected one of {LAYOUTS}")
    q, k, v = (x.unflatten(2, (x.shape[2] // D, D)) for x in qkv.split(cols, dim=-1))
    if layout == "contiguous":
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    return dict(q=q, k=k, v=v, g=g.to(device), beta=beta.to(device), use_qk_l2norm_in_kernel=True,
                output_final_state=True)


def time_us(call, reps: int, graph: bool) -> float:
    if graph:
        return bench.one_call_graph(call, reps)[0]
    return bench.eager_median_us(call, reps)


def measure(B: int, T: int, hk: int, hv: int, reps: int, graph: bool) -> list[dict]:
    """The rows of one shape: each layout, and the conv layout's three copies alone."""
    import torch

    from gdn_prefill import fla
    rows = []
    base = None
    for layout in LAYOUTS:
        a = make_inputs(B, T, hk, hv, layout)
        copies = sorted(fla.explain_copies(**a))
        o, s = fla.chunk_gated_delta_rule(**a)
        if base is None:
            base = (o, s)
        else:                       # the same bits whatever the layout
            assert torch.equal(o.view(torch.int16), base[0].view(torch.int16)) and torch.equal(s, base[1]), layout
        us = time_us(lambda: fla.chunk_gated_delta_rule(**a), reps, graph)
        rows.append(dict(B=B, T=T, layout=layout, copies=copies, us=round(us, 1)))
        if layout == "conv":
            copy_us = time_us(lambda: [a[n].contiguous() for n in ("q", "k", "v")], reps, graph)
            rows.append(dict(B=B, T=T, layout="conv: the 3 copies alone", copies=copies, us=round(copy_us, 1)))
        del a
        torch.cuda.empty_cache()
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", default="1K,3000,8K,32K")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--heads", default="16/32")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--graph", action="store_true", help="time one call captured in a CUDA graph instead of eager")
    ap.add_argument("--md")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    try:
        hk, hv = parse_heads(a.heads)
        tokens = [parse_count(x) for x in a.tokens.split(",")]
    except ValueError as e:
        ap.error(str(e))
    if bench.script_cannot_time("bench_fla_layout"):
        return 0
    import torch
    rows = []
    for T in tokens:
        for r in measure(a.batch, T, hk, hv, a.reps, a.graph):
            rows.append(r)
            print(r, flush=True)
    contiguous = {(r["B"], r["T"]): r["us"] for r in rows if r["layout"] == "contiguous"}
    mode = "one call in a CUDA graph" if a.graph else "eager"
    head = (f"chunk_gated_delta_rule by the layout of q, k, v; Hk/Hv {a.heads}, bf16, {mode}, median of {a.reps}; "
            f"{torch.cuda.get_device_name(0)}, {datetime.date.today()}")
    lines = []
    for r in rows:
        base = contiguous[(r["B"], r["T"])]
        extra = "" if r["layout"] == "contiguous" or r["layout"].endswith("alone") else \
            f"{r['us'] - base:+,.1f} ({100 * (r['us'] - base) / base:+.1f} %)"
        lines.append([f"{r['B']} x {r['T']:,}", r["layout"], ", ".join(r["copies"]) or "-", f"{r['us']:,.1f}", extra])
    table_report(head, ["shape", "layout", "copied", "us", "vs contiguous"], lines, dict(head=head, rows=rows),
                 a.md, a.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
