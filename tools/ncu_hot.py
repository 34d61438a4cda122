"""Where a kernel's warps stall, per SASS instruction, from an ncu report's source page.

    ncu --clock-control none --set full --import-source no -k regex:SinglePrefill -c 1 -o rep python3 benchmarks/bench_single.py --profile
    ncu -i rep.ncu-rep --page source --csv --print-source sass > src.csv
    python3 tools/ncu_hot.py src.csv [--top 40] [--cubin build/aot/cubin/VARIANT/*.cubin] [--sections]

Prints the instructions with the most warp-stall samples, each with its share of all samples
and the stall reason columns that are non-zero for it, then the totals per reason.  With the
profiled kernel's cubin (nvdisasm needed), each hot instruction that waits on a scoreboard also
names the nearest instructions that may run before it (back to its loop's head, then the
previous iteration from the back edge, then the loop's entry) and set that scoreboard: a
long-scoreboard stall then points at the load it waits for (e.g. a loop's first instruction
waiting on the previous iteration's row-data LDGs).
"""
import argparse
import csv
import io
import sys


def _num(s: str) -> float:
    try:
        return float(s.replace(",", ""))
    except ValueError:
        return 0.0


def _opcode(text: str) -> str:
    """The opcode of a SASS line, past its predicate (`@!P0 BRA ...` -> `BRA`)."""
    t = text.split()
    return t[1] if t and t[0].startswith("@") and len(t) > 1 else (t or [""])[0]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--cubin", help="the profiled kernel's cubin: name what each hot instruction waits for")
    ap.add_argument("--phases", action="store_true",
                    help="also sum the samples between consecutive CTA barriers (BAR.SYNC), in SASS order")
    ap.add_argument("--sections", action="store_true",
                    help="also sum the samples per warpgroup role: the code between setmaxnreg instructions "
                         "(USETMAXREG), each named by its register count, in SASS order")
    ap.add_argument("--ctas", type=int, default=1,
                    help="with --phases: divide executed instructions and wavefronts by this many CTAs")
    a = ap.parse_args()
    text = open(a.csv, errors="replace").read()
    start = text.find('"#"') if '"#"' in text else text.find('"Address"')
    rows = list(csv.reader(io.StringIO(text[max(start, 0):])))
    head, body = rows[0], [r for r in rows[1:] if len(r) == len(rows[0])]
    col = {h: i for i, h in enumerate(head)}
    samp = next((h for h in head if h.startswith("Warp Stall Sampling (All")), None)
    if samp is None:
        print("no stall-sampling column; columns:", head)
        sys.exit(1)
    src = next(h for h in head if h == "Source")
    reasons = [h for h in head if h.startswith("stall_") or h.lower().startswith("stall ")]
    total = sum(_num(r[col[samp]]) for r in body) or 1.0
    print(f"{len(body)} SASS lines, {total:.0f} stall samples; reason columns: {len(reasons)}")
    hot = sorted(body, key=lambda r: -_num(r[col[samp]]))[: a.top]
    waits = _wait_sources(a.cubin, body, col) if a.cubin else {}
    for r in hot:
        n = _num(r[col[samp]])
        why = sorted(((_num(r[col[h]]), h) for h in reasons), reverse=True)
        why_s = " ".join(f"{h}={v:.0f}" for v, h in why[:3] if v > 0)
        addr = r[col["Address"]] if "Address" in col else r[0]
        print(f"{100 * n / total:5.1f}%  {addr:>6}  {r[col[src]][:60]:<60}  {why_s}")
        if addr in waits:
            print(f"{'':15}{waits[addr]}")
    if a.phases:
        _phases(body, col, samp, src, total, a.ctas)
    if a.sections:
        _sections(body, col, samp, src, reasons, total)
    if reasons:
        print("\nper reason:")
        tot = sorted(((sum(_num(r[col[h]]) for r in body), h) for h in reasons), reverse=True)
        for v, h in tot[:12]:
            print(f"  {h:<40} {100 * v / total:5.1f}%")


def _wait_sources(cubin: str, body, col) -> dict[str, str]:
    """address -> 'waits SBn on: OP@offset, ...' for every CSV row whose instruction waits on a
    scoreboard (the CSV's first row is the kernel's first instruction, offset 0)."""
    import os
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from gdn_prefill import sass

    ins = sass.instructions(cubin)
    at = {x["addr"]: k for k, x in enumerate(ins)}
    spans = sass.loops(ins)

    def order(k):
        """Instructions that may run just before k: back to its innermost loop's head, then from
        the loop's back edge (the previous iteration), then before the loop (its entry)."""
        inner = min((ab for ab in spans if ab[0] <= k <= ab[1]), key=lambda ab: ab[1] - ab[0], default=None)
        if inner is None:
            return list(range(k - 1, -1, -1))
        a, b = inner
        return list(range(k - 1, a - 1, -1)) + list(range(b, k, -1)) + list(range(a - 1, -1, -1))
    key = "Address" if "Address" in col else None
    base = int(body[0][col[key]] if key else body[0][0], 16)
    out = {}
    for r in body:
        addr = r[col[key]] if key else r[0]
        k = at.get(int(addr, 16) - base)
        if k is None or not ins[k]["wait"]:
            continue
        parts = []
        for sb in range(6):
            if not (ins[k]["wait"] >> sb) & 1:
                continue
            setters = [f"{_opcode(ins[j]['text'])}@{ins[j]['addr']:04x}" for j in order(k) if sb in (ins[j]["wb"], ins[j]["rb"])][:3]
            parts.append(f"SB{sb} <- {', '.join(setters)}")
        out[addr] = "waits " + "; ".join(parts)
    return out


def _sections(body, col, samp, src, reasons, total) -> None:
    """A kernel whose warpgroups take their roles after a setmaxnreg each (the single kernel): the
    stall samples of each role's code, the code from one USETMAXREG to the next (the prologue
    before the first), with its top stall reasons.  Shares are of all samples: a role with more
    warps has more samples; compare a role's reasons with its own total."""
    sec, rows = "prologue", {}
    for r in body:
        text = r[col[src]].strip()
        if "USETMAXREG" in text:
            sec = f"{len(rows)}: {text.split()[-1]} registers ({_opcode(text).split('.')[1].lower()})"
        rows.setdefault(sec, []).append(r)
    print("\nper setmaxnreg section (a warpgroup role's code):")
    for name, rs in rows.items():
        n = sum(_num(r[col[samp]]) for r in rs)
        why = sorted(((sum(_num(r[col[h]]) for r in rs), h) for h in reasons), reverse=True)
        why_s = ", ".join(f"{h} {100 * v / max(n, 1):.0f}%" for v, h in why[:5] if v > 0)
        print(f"  {name:<40} {len(rs):5d} instr  {100 * n / total:5.1f}% of samples  [{why_s}]")


def _phases(body, col, samp, src, total, ctas: int = 1) -> None:
    """A kernel written as phases separated by CTA barriers: where its warps stall, per phase.
    A segment ends at a BAR.SYNC (the barrier's own wait counts to the segment it closes)."""
    marks = ("HGMMA", "UTMALDG", "UTMASTG", "LDGSTS", "LDG", "STG", "MUFU", "LDSM", "STSM", "SYNCS")
    # executed warp instructions and shared-memory wavefronts per segment, when the report has
    # the SourceCounters columns (divided by --ctas: per CTA)
    execd = next((h for h in col if h == "Warp Instructions Executed" or h == "Instructions Executed"), None)
    wavef = next((h for h in col if "Wavefronts Shared" in h and "Ideal" not in h), None)
    print(f"\nper barrier-delimited segment (SASS order; executed: {execd}, wavefronts: {wavef}, per {ctas} CTA(s)):")
    seg, n, ex, wf, kinds, start = 0.0, 0, 0.0, 0.0, {}, None
    idx = 0
    for r in body:
        text = r[col[src]].strip()
        op = _opcode(text)
        start = start or (r[col["Address"]] if "Address" in col else r[0])
        seg += _num(r[col[samp]])
        ex += _num(r[col[execd]]) if execd else 0.0
        wf += _num(r[col[wavef]]) if wavef else 0.0
        n += 1
        for m in marks:
            if op.startswith(m):
                kinds[m] = kinds.get(m, 0) + 1
                break
        if op.startswith("BAR.SYNC") or r is body[-1]:
            k = " ".join(f"{m}x{c}" for m, c in kinds.items())
            print(f"  seg {idx:2d} @{start:>14}  {n:4d} instr  {ex / ctas:8.0f} exec  {wf / ctas:6.0f} wf  "
                  f"{100 * seg / total:5.1f}%  {k}")
            seg, n, ex, wf, kinds, start = 0.0, 0, 0.0, 0.0, {}, None
            idx += 1


if __name__ == "__main__":
    main()
