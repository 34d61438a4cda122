"""The benchmark's reports: derived columns, the Markdown tables, JSON / text files and the plot
(gdn_prefill.bench runs the measurements).  Pure Python: importable without torch or a GPU."""
from __future__ import annotations

import json
import os

from .cases import (HOST_OVERHEAD_CALLS, HOST_OVERHEAD_SAMPLES, NUMERICS_REPEATS, PEAK_TBPS, PEAK_TFLOPS,
                          VARLEN_SEED, floors_us, flops, flops_per_token, hbm_bytes)
from .env import PEERS

# ===================================================================================== reports

def _save(fig, path: str, dpi: int) -> str:
    """Lay out a figure, write it to path (its folder made), close it; returns path."""
    import matplotlib.pyplot as plt
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path

def derive(result: dict) -> dict:
    """Fill the derived columns of every row (tokens/s, % of floors, ratios to FLA) in place."""
    meta = result.setdefault("meta", {})
    pt = float(meta.get("peak_tflops", PEAK_TFLOPS))
    pb = float(meta.get("peak_tbps", PEAK_TBPS))
    rows = result.get("rows", [])
    fla = {r["case"]: r for r in rows if r.get("impl") == "fla"}
    for r in rows:
        r["flops"] = flops(r["T"], r["Hv"], r.get("K", 128), r.get("V", 128))
        r["hbm_bytes"] = hbm_bytes(r["T"], r["N"], r["Hk"], r["Hv"], r.get("K", 128), r.get("V", 128))
        fc, fh = floors_us(r["T"], r["N"], r["Hk"], r["Hv"], r.get("K", 128), r.get("V", 128),
                           peak_tflops=pt, peak_tbps=pb)
        r["compute_floor_us"], r["hbm_floor_us"] = fc, fh
        g = r.get("graph_us")
        best = g if g else r.get("eager_us")
        r["tokens_per_s"] = r["T"] / (best * 1e-6) if best else None
        r["pct_compute_floor"] = 100.0 * fc / best if best else None
        r["pct_hbm_floor"] = 100.0 * fh / best if best else None
        ref = fla.get(r["case"])
        for mode in ("graph", "eager"):
            mine = r.get(f"{mode}_us")
            theirs = ref.get(f"{mode}_us") if ref else None
            r[f"vs_fla_{mode}"] = theirs / mine if (mine and theirs) else None
    return result


def _fmt(x, spec: str, none: str = "—") -> str:
    return none if x is None else format(x, spec)


def _ratio(x) -> str:
    return "—" if x is None else f"{x:.2f}×"


def _note(r: dict) -> str:
    parts = [r.get("note") or ""]
    if r.get("graph_error"):
        parts.append(f"graph capture failed: {str(r['graph_error'])[:120]}")
    return "; ".join(p for p in parts if p).replace("|", "/").replace("\n", " ")


def markdown_report(result: dict) -> str:
    """The timing report as markdown (result must have been through derive())."""
    meta = result.get("meta", {})
    pt = meta.get("peak_tflops", PEAK_TFLOPS)
    pb = meta.get("peak_tbps", PEAK_TBPS)
    vers = ", ".join(f"{k} {meta[k]}" for k in ("gdn_prefill", "torch", "cuda", *PEERS) if meta.get(k))
    lines = [
        f"# GDN prefill — {meta.get('card', '?')}, {meta.get('date', '?')}",
        "",
        f"{vers + '; ' if vers else ''}driver {meta.get('driver') or '?'}.  "
        f"bf16 q/k/v, fp32 g/beta and state (read and written), K = V = 128, "
        f"use_qk_l2norm={meta.get('use_qk_l2norm', False)}"
        + (", the state a pool updated through slot indices" if meta.get("state_pool") else "")
        + (f", gates {meta['gates']}" if meta.get("gates", "fast") != "fast" else "") + ".",
        "",
        f"Method: {meta.get('methodology', '')}",
        "",
        f"Floors: FLOP/token = Hv·(6KV + 2C(3K+2V) + C²/3) (5.81 M for Hv=32) at {pt:g} TFLOP/s; "
        f"HBM bytes = inputs once + outputs once + state read/written at {pb:g} TB/s.  "
        "×FLA = FLA time / this time (> 1: faster than FLA).",
        "",
        "| shape | Hk/Hv | tokens | impl | graph µs | eager µs | ×FLA graph | ×FLA eager | Mtok/s "
        "| % compute floor | % HBM floor | sets | note |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result.get("rows", []):
        if r.get("error"):
            lines.append(f"| {r['shape']} | {r['Hk']}/{r['Hv']} | {r['T']} | {r['impl']} | "
                         f"error: {str(r['error'])[:160]} | | | | | | | | |")
            continue
        tps = r.get("tokens_per_s")
        lines.append(
            f"| {r['shape']} | {r['Hk']}/{r['Hv']} | {r['T']} | {r['impl']} | {_fmt(r.get('graph_us'), '.1f')} | "
            f"{_fmt(r.get('eager_us'), '.1f')} | {_ratio(r.get('vs_fla_graph'))} | {_ratio(r.get('vs_fla_eager'))} | "
            f"{_fmt(tps / 1e6 if tps else None, '.1f')} | {_fmt(r.get('pct_compute_floor'), '.1f')} | "
            f"{_fmt(r.get('pct_hbm_floor'), '.1f')} | {r.get('n_sets', '')} | {_note(r)} |")
    host = result.get("host_overhead") or []
    if host:
        lines += ["", f"Host overhead of one Python call (tiny problem: {host[0].get('problem', '')}; host "
                      f"time per call while a sleep kernel keeps the GPU busy, median of {HOST_OVERHEAD_SAMPLES} "
                      f"samples of {HOST_OVERHEAD_CALLS} calls; GPU time of the same call in a graph beside it):",
                  "", "| impl | host µs per call | GPU µs (graph) | note |", "|---|---|---|---|"]
        for h in host:
            lines.append(f"| {h['impl']} | {_fmt(h.get('us_per_call'), '.1f')} | {_fmt(h.get('gpu_us'), '.1f')} | "
                         f"{h.get('error') or h.get('note') or ''} |")
    skipped = result.get("skipped") or []
    if skipped:
        lines += ["", "Skipped:"] + [f"- {s.get('what')}: {s.get('reason')}" for s in skipped]
    varlen = meta.get("varlen_lengths")
    if varlen:
        lines += ["", f"varlen16 lengths (seed {VARLEN_SEED}): {varlen}"]
    return "\n".join(lines) + "\n"


def numerics_markdown(num: dict) -> str:
    meta = num.get("meta", {})
    lines = [f"# GDN prefill numerics — {meta.get('card', '?')}, {meta.get('date', '?')}", "",
             "Relative Frobenius error against the fp64 oracle (gdn_prefill.reference.chunked, run on the GPU) "
             "on fresh random inputs with a dense initial state; 'bitwise' = the output and final state of "
             f"{meta.get('repeats', NUMERICS_REPEATS)} repeated runs on the same inputs are bit-identical.", "",
             "| T | Hk/Hv | impl | rel err o | rel err final state | bitwise identical | note |",
             "|---|---|---|---|---|---|---|"]
    for r in num.get("rows", []):
        if r.get("error"):
            lines.append(f"| {r['T']} | {r['Hk']}/{r['Hv']} | {r['impl']} | error: {str(r['error'])[:120]} | | | |")
            continue
        bit = {True: "yes", False: "**no**"}.get(r.get("bitwise_identical"), "—")
        lines.append(f"| {r['T']} | {r['Hk']}/{r['Hv']} | {r['impl']} | {_fmt(r.get('err_o'), '.3e')} | "
                     f"{_fmt(r.get('err_state'), '.3e')} | {bit} | {r.get('note', '')} |")
    for n in num.get("notes", []):
        lines += ["", n]
    return "\n".join(lines) + "\n"


def write_json(obj: dict, path: str) -> str:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1, default=str)
    os.replace(tmp, path)
    return path


def table_report(head: str, columns: list, lines: list, data: dict, md=None, json_path=None) -> str:
    """A benchmark script's result: `head`, then a Markdown table of `columns` and `lines` (lists of
    cells), printed and written to `md`; `data` written to `json_path` (each when given)."""
    text = "\n".join([head, "", "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
                     + ["| " + " | ".join(str(c) for c in cells) + " |" for cells in lines]) + "\n"
    print(text, end="")
    if md:
        write_text(text, md)
    if json_path:
        write_json(data, json_path)
    return text


def write_text(text: str, path: str) -> str:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    return path


def plot(result: dict, path: str) -> str | None:
    """tokens/s against total tokens per implementation, one panel per head config (log x, log y).

    Single sequences are joined by lines; batched and varlen shapes are separate markers.
    Returns the path, or None when matplotlib is absent or there is nothing to plot.
    """
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    rows = [r for r in result.get("rows", []) if r.get("tokens_per_s")]
    if not rows:
        return None
    meta = result.get("meta", {})
    heads = []
    for r in rows:
        if (r["Hk"], r["Hv"]) not in heads:
            heads.append((r["Hk"], r["Hv"]))
    impls = []
    for r in rows:
        if r["impl"] not in impls:
            impls.append(r["impl"])
    colors = {name: f"C{i}" for i, name in enumerate(impls)}
    markers = {"1": "o", "multi": "s", "varlen": "^"}
    fig, axes = plt.subplots(1, len(heads), figsize=(5.6 * len(heads), 4.4), squeeze=False)
    for ax, (hk, hv) in zip(axes[0], heads):
        for impl in impls:
            pts = [r for r in rows if r["impl"] == impl and (r["Hk"], r["Hv"]) == (hk, hv)]
            single = sorted((r["T"], r["tokens_per_s"]) for r in pts if r["N"] == 1)
            if single:
                ax.plot([p[0] for p in single], [p[1] for p in single], marker=markers["1"], color=colors[impl],
                        label=impl)
            for r in pts:
                if r["N"] == 1:
                    continue
                kind = "varlen" if r["shape"].startswith("varlen") else "multi"
                ax.scatter([r["T"]], [r["tokens_per_s"]], marker=markers[kind], color=colors[impl],
                           label=None if single else impl)
                ax.annotate(r["shape"], (r["T"], r["tokens_per_s"]), fontsize=6,
                            xytext=(4, -9) if kind == "varlen" else (4, 3), textcoords="offset points")
        ceil_c = meta.get("peak_tflops", PEAK_TFLOPS) * 1e12 / flops_per_token(hv)
        ax.axhline(ceil_c, color="k", ls="--", lw=0.8, label="compute floor")
        per_tok = hbm_bytes(1, 0, hk, hv, state=False) - 4
        ax.axhline(meta.get("peak_tbps", PEAK_TBPS) * 1e12 / per_tok, color="gray", ls=":", lw=0.8,
                   label="HBM floor (no state)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("tokens per call (T; ■ batched, ▲ varlen)")
        ax.set_ylabel("tokens / s (CUDA graph)")
        ax.set_title(f"Hk/Hv = {hk}/{hv}, K = V = 128")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"GDN prefill — {meta.get('card', '?')} {meta.get('date', '')}", fontsize=10)
    return _save(fig, path, 130)


def short_shape(shape: str) -> str:
    """A mixed batch's lengths with each run of equal lengths as N x L (2048+2048+2048+700 ->
    3x2K+700), so that runs that spelled one batch two ways draw it as one group."""
    if "+" not in shape:
        return shape
    out: list[list] = []
    for part in shape.split("+"):
        if out and part == out[-1][0] and part.isdigit():
            out[-1][1] += 1
        else:
            out.append([part, 1])

    def length(p: str) -> str:
        return f"{int(p) // 1024}K" if p.isdigit() and int(p) % 1024 == 0 else p
    return "+".join(f"{n}x{length(p)}" if n > 1 else p for p, n in out)


def plot_shapes(results: list[dict], path: str, mode: str = "graph") -> str | None:
    """The README's picture: one group of bars per (shape, Hk/Hv) of the runs' rows, one bar per
    implementation, its time in `mode` ("graph" or "eager") on a log scale, the fastest bar of
    each group marked.  `results` are bench_prefill JSON results (several runs' rows are drawn in
    the order given).  Returns the path, or None when matplotlib is absent or nothing has a time."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    key = f"{mode}_us"
    rows = [r for res in results for r in res.get("rows", []) if r.get(key)]
    if not rows:
        return None
    groups, impls = [], []
    for r in rows:
        g = (short_shape(r["shape"]), r["Hk"], r["Hv"])
        if g not in groups:
            groups.append(g)
        if r["impl"] not in impls:
            impls.append(r["impl"])
    t = {(short_shape(r["shape"]), r["Hk"], r["Hv"], r["impl"]): r[key] for r in rows}
    width = 0.8 / len(impls)
    fig, ax = plt.subplots(figsize=(max(8.0, 0.26 * len(groups) * len(impls)), 4.8))
    for i, impl in enumerate(impls):
        xs = [j + (i - (len(impls) - 1) / 2) * width for j, g in enumerate(groups) if (*g, impl) in t]
        ys = [t[(*g, impl)] for g in groups if (*g, impl) in t]
        ax.bar(xs, ys, width=width, color=f"C{i}", label=impl)
    for j, g in enumerate(groups):
        times = {impl: t[(*g, impl)] for impl in impls if (*g, impl) in t}
        best = min(times, key=times.get)
        i = impls.index(best)
        ax.annotate("★", (j + (i - (len(impls) - 1) / 2) * width, times[best]), ha="center", va="bottom", fontsize=8)
    ax.set_yscale("log")
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([f"{s}\n{hk}/{hv}" for s, hk, hv in groups], fontsize=7)
    ax.set_ylabel(f"µs per call (CUDA {mode}; log)" if mode == "graph" else f"µs per call ({mode}; log)")
    ax.grid(True, axis="y", which="both", alpha=0.3)
    ax.legend(fontsize=8)
    days = sorted({res.get("meta", {}).get("date", "")[:10] for res in results} - {""})
    when = f"{days[0]} to {days[-1]}" if len(days) > 1 else "".join(days)
    card = results[0].get("meta", {}).get("card", "?")
    ax.set_title(f"GDN prefill, shape and Hk/Hv — {card} {when} (★ fastest)", fontsize=10)
    return _save(fig, path, 120)


class Progress:
    """tqdm when importable, else a printed counter."""

    def __init__(self, total: int, desc: str, enable: bool = True):
        self.total, self.n, self.enable = total, 0, enable
        self._bar = None
        if enable:
            try:
                from tqdm import tqdm
                self._bar = tqdm(total=total, desc=desc, dynamic_ncols=True)
            except ImportError:
                print(f"{desc}: {total} cases", flush=True)

    def step(self, what: str) -> None:
        """Announce the case about to run."""
        if not self.enable:
            return
        if self._bar is not None:
            self._bar.set_postfix_str(what)
        else:
            print(f"[{self.n + 1}/{self.total}] {what}", flush=True)

    def write(self, msg: str) -> None:
        if self._bar is not None:
            self._bar.write(msg)
        else:
            print(msg, flush=True)

    def done(self) -> None:
        self.n += 1
        if self._bar is not None:
            self._bar.update(1)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
