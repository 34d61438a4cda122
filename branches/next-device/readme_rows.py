"""Scratch (CPU): the README's two performance tables refreshed from bench_prefill Markdown tables
(call 3's tables.md): each README row whose (shape, heads) the new tables hold, in the README's
setting (the pre-normed table from runs without use_qk_l2norm, the engine table from runs with it),
gets the new gdn / FlashInfer / FLA numbers (graph / eager; the fastest graph time in bold; the
engine table's gdn ÷ FI).  Rows the new tables lack keep theirs.  Prints the changed rows; with
--write also rewrites README.md.
    python lab/next/readme_rows.py tables.md [--write]"""
import re, sys

SHAPES = {"4096+2048+1024+512+256+128+64+64": "mixed 8K", "2048+2048+2048+1500+700+100": "3 × 2048 + 1500 + 700 + 100",
          "5000+3000+2000+1500+1200+1000+800+600+400+300+200+200+100+84": "mixed 16K", "varlen16": "varlen"}


def label(shape: str) -> str:
    if shape in SHAPES:
        return SHAPES[shape]
    b, t = shape.split("x")
    t = int(t[:-1]) * 1024 if t.endswith("K") else int(t)
    return f"{b} × {t}"


def parse(md: str) -> dict:
    """{(engine?, label, heads): {impl: (graph, eager)}} from bench_prefill's tables."""
    out, engine = {}, None
    for line in md.splitlines():
        if "use_qk_l2norm=" in line:
            engine = "use_qk_l2norm=True" in line
        m = re.match(r"\| (\S+) \| (\d+/\d+) \| \d+ \| (gdn:wgmma|fla|flashinfer) \| ([\d.—]+) \| ([\d.—]+) \|", line)
        if m and engine is not None:
            shape, heads, impl, g, e = m.groups()
            out.setdefault((engine, label(shape), heads), {})[impl] = (g, e)
    return out


def row(key: str, heads: str, r: dict, last: str, engine: bool) -> str:
    cells = [r.get(i, ("—", "—")) for i in ("gdn:wgmma", "flashinfer", "fla")]
    graphs = [float(g) for g, _ in cells if g != "—"]
    best = min(graphs) if graphs else None
    fmt = [(f"**{g}**" if g != "—" and float(g) == best else g) + f" / {e}" for g, e in cells]
    if engine and cells[0][0] != "—" and cells[1][0] != "—":
        last = f"{float(cells[0][0]) / float(cells[1][0]):.2f}"
    return f"| {key} | {heads} | " + " | ".join(fmt) + f" | {last} |"


def main() -> None:
    md = open(sys.argv[1]).read()
    cards = set(re.findall(r"^# GDN prefill — NVIDIA (\w+)", md, flags=re.M))
    if cards != {"H200"} and "--write" in sys.argv and "--any-card" not in sys.argv:
        sys.exit(f"readme_rows: these tables ran on {sorted(cards)}; the README's table is the H200's "
                 "(--any-card to write anyway)")
    new = parse(md)
    text = open("README.md").read()
    lines, engine, changed = text.splitlines(), False, 0
    for i, line in enumerate(lines):
        if line.startswith("As an engine calls it"):
            engine = True
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("| ") else []
        if len(cells) != 6 or cells[0] == "shape" or set(cells[0]) <= set("-"):
            continue
        shape = cells[0].split(" (")[0]             # "mixed 16K (5000 ... 84, 14 sequences)" -> "mixed 16K"
        r = new.get((engine, shape, cells[1]))
        if r:
            out = row(cells[0], cells[1], r, cells[5], engine)
            if out != line:
                print(f"- {line}\n+ {out}")
                lines[i], changed = out, changed + 1
    print(f"{changed} rows changed")
    if "--write" in sys.argv:
        open("README.md", "w").write("\n".join(lines) + ("\n" if text.endswith("\n") else ""))


if __name__ == "__main__":
    main()
