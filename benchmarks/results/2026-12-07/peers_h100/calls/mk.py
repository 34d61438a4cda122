"""The session's tables from the bench JSONs: one row per case, each peer's us (graph or eager) and gdn / peer."""
import json, sys, os
D = sys.argv[1]
M16 = "5000+3000+2000+1500+1200+1000+800+600+400+300+200+200+100+84"
IM = ("gdn:wgmma", "fla", "flashinfer", "flashqla")

def load(*ps):
    rows = {}
    for p in ps:
        for x in json.load(open(os.path.join(D, p)))["rows"]:
            rows.setdefault((x["shape"], x["Hk"], x["Hv"]), {})[x["impl"]] = x
    return rows

def sh(s):
    return {"8x4K": "8 × 4096", "16x512": "16 × 512", "1x32K": "1 × 32768", "1x64K": "1 × 65536", M16: "mixed 16K"}.get(s, s)

def table(title, rows, mode, cols):
    print(f"\n### {title}\n")
    print("| shape | Hk/Hv | " + " | ".join(n for n, _ in cols) + " | " + " | ".join(f"gdn ÷ {n}" for n, _ in cols[1:]) + " |")
    print("|---|---|" + "---|" * (2 * len(cols) - 1))
    for (s, hk, hv), d in rows.items():
        us = [d.get(i, {}).get(f"{mode}_us") for _, i in cols]
        f = lambda a: "—" if a is None else f"{a:.1f}"
        r = lambda a: "—" if a is None or us[0] is None else f"{us[0] / a:.2f}"
        print(f"| {sh(s)} | {hk}/{hv} | " + " | ".join(map(f, us)) + " | " + " | ".join(r(a) for a in us[1:]) + " |")

G, FL, FI, Q = ("gdn", "gdn:wgmma"), ("FLA 0.6.0", "fla"), ("FlashInfer 0.7.2", "flashinfer"), ("FlashQLA 0.1.3", "flashqla")
table("Engine style, graph: FLA and FlashInfer in one process (e.json)", load("e.json"), "graph", [G, FL, FI])
table("Engine style, graph, the Qwen3.5 heads: FlashInfer in the same process (q.json)", load("q.json"), "graph", [G, FI])
table("Engine style, eager: FlashInfer in the same process (g.json)", load("g.json"), "eager", [G, FI])
table("Pre-normed, graph: FLA and FlashInfer in one process (p.json)", load("p.json"), "graph", [G, FL, FI])
table("Engine style, graph: FlashQLA in a process of its own, gdn beside it (qla.json)", load("qla.json"), "graph", [G, Q])
table("Pre-normed, graph: FlashQLA in a process of its own, gdn beside it (qp.json)", load("qp.json"), "graph", [G, Q])
