"""Short table of a bench JSON: per case, gdn / invariant / FLA / FlashInfer graph us and ratios."""
import json
import sys

r = json.load(open(sys.argv[1]))
rows = {}
for x in r["rows"]:
    rows.setdefault((x["shape"], x["Hk"], x["Hv"]), {})[x["impl"]] = x.get("graph_us")


def f(a):
    return "-" if a is None else f"{a:.1f}"


def q(a, b):
    return "-" if a is None or b is None else f"{a / b:.2f}"


print("| shape | heads | gdn | invariant | FLA | FI | QLA | gdn/FI | gdn/QLA |")
print("|---|---|---|---|---|---|---|---|---|")
for (s, hk, hv), d in rows.items():
    g, i, fl, fi, ql = (d.get(k) for k in ("gdn:wgmma", "gdn:invariant", "fla", "flashinfer", "flashqla"))
    print(f"| {s} | {hk}/{hv} | {f(g)} | {f(i)} | {f(fl)} | {f(fi)} | {f(ql)} | {q(g, fi)} | {q(g, ql)} |")
for s in r.get("skipped", []):
    print("skipped:", s)
