"""gdn:wgmma (the default plan) against gdn:wgmma-serial, graph us, one process."""
import json
import sys

r = json.load(open(sys.argv[1]))
rows = {}
for x in r["rows"]:
    rows.setdefault((x["shape"], x["Hk"], x["Hv"]), {})[x["impl"]] = x.get("graph_us")
print("| shape | heads | default | serial | default / serial |")
print("|---|---|---|---|---|")
for (s, hk, hv), d in rows.items():
    a, b = d.get("gdn:wgmma"), d.get("gdn:wgmma-serial")
    print(f"| {s} | {hk}/{hv} | {a} | {b} | {'-' if not a or not b else f'{a / b:.3f}'} |")
for s in r.get("skipped", []):
    print("skipped:", s)
