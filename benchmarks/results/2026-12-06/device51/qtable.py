"""The Qwen3.5 rows of session 51's H100 run: engine graph / eager, pre-normed graph, gdn / FI / FLA."""
import json
D = "benchmarks/results/2026-12-06/qwen35/"    # session 51 read them from its device folders
src = {"eg": (D + "qwen35_engine.json", "graph_us"), "eg16": (D + "qwen35_engine_1616.json", "graph_us"),
       "ee": (D + "qwen35_engine_eager.json", "eager_us"), "pg": (D + "qwen35_prenormed.json", "graph_us")}
t = {}
for k, (f, key) in src.items():
    for x in json.load(open(f))["rows"]:
        kk = "eg" if k == "eg16" else k
        t.setdefault((x["Hk"], x["Hv"], x["shape"]), {}).setdefault(kk, {})[x["impl"]] = x.get(key)
order = ["16/64", "8/32", "4/16", "2/8", "16/48", "8/24", "16/16"]
shapes = ["16x512", "8x4K", "1x8K", "1x32768", "varlen16"]
def cell(d):
    if not d or not d.get("gdn:wgmma") or not d.get("flashinfer"): return "| - | - | - "
    g, fi, fl = d["gdn:wgmma"], d["flashinfer"], d.get("fla")
    return f"| {g:.1f} | {fi:.1f} | **{g / fi:.2f}** "
print("| heads | shape | engine graph: gdn µs | FlashInfer µs | gdn ÷ FI | engine eager: gdn | FI | gdn ÷ FI | pre-normed graph: gdn | FI | gdn ÷ FI | FLA engine graph µs |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for h in order:
    hk, hv = map(int, h.split("/"))
    for s in shapes:
        d = t.get((hk, hv, s))
        if not d: continue
        fla = (d.get("eg") or {}).get("fla")
        print(f"| {h} | {s} " + cell(d.get("eg")) + cell(d.get("ee")) + cell(d.get("pg")) + f"| {fla:.0f} |" if fla else "| - |")
