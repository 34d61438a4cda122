"""The A/B table of c2.sh: per (shape, heads), the gdn graph µs of each pass, base and new, and the change."""
import glob, os, re, statistics, sys
out = sys.argv[1]
rows = {}
for path in sorted(glob.glob(os.path.join(out, "*_[ab]_[12]", "prefill.md"))):
    side = os.path.basename(os.path.dirname(path)).split("_")[0]
    for line in open(path):
        m = re.match(r"\| (\S[^|]*?) \| (\d+/\d+) \| \d+ \| gdn:wgmma \| ([\d.]+) \|", line)
        if m:
            rows.setdefault((m.group(1), m.group(2)), {}).setdefault(side, []).append(float(m.group(3)))
print("| shape | Hk/Hv | base µs | new µs | new / base |")
print("|---|---|---|---|---|")
for (shape, heads), d in rows.items():
    b, n = d.get("base", []), d.get("new", [])
    ratio = f"{statistics.median(n) / statistics.median(b):.3f}" if b and n else "-"
    print(f"| {shape} | {heads} | {' / '.join(f'{x:.1f}' for x in b)} | {' / '.join(f'{x:.1f}' for x in n)} | {ratio} |")
