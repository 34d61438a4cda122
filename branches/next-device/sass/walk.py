"""walk.py SASS START_LABEL [--take N,N] [--phases]: follow one path through nvdisasm -c output from
a label.  Conditional branches fall through unless their ordinal (printed) is in --take, or they
branch back to START_LABEL (the loop's back edge, which ends the path); unconditional branches are
followed; BRA.DIV falls through (the converged warp).  Stops at START_LABEL, EXIT or --max steps.
Prints the branches met, the path's length and opcode histogram, and with --phases the
instructions between consecutive barriers and mbarrier operations."""
import re, argparse, collections
ap = argparse.ArgumentParser()
ap.add_argument("sass"); ap.add_argument("start")
ap.add_argument("--take", default=""); ap.add_argument("--max", type=int, default=5000)
ap.add_argument("--quiet", action="store_true"); ap.add_argument("--phases", action="store_true")
a = ap.parse_args()
take = {int(x) for x in a.take.split(",") if x}
ins, labels = [], {}
for l in open(a.sass):
    m = re.match(r"^(\.L_x_\d+):", l)
    if m: labels[m.group(1)] = len(ins); continue
    m = re.match(r"\s*/\*([0-9a-f]+)\*/\s+(@!?U?P\w+\s+)?([A-Z0-9_]+)(\S*)\s*(.*?);", l)
    if m: ins.append((m.group(1), m.group(2), m.group(3), m.group(3) + m.group(4), m.group(5)))
pc = labels[a.start]; n = 0; path = []; k = 0; full_path = []
while n < a.max:
    addr, pred, op, full, args = ins[pc]
    path.append(op); n += 1
    full_path.append((addr, full))
    if op == "EXIT" and not pred: break
    if full.startswith("BRA.DIV"):
        pc += 1; continue
    if op == "BRA":
        t = re.search(r"\(?(\.L_x_\d+)\)?", args).group(1)
        if pred:
            k += 1
            tk = k in take or t == a.start
            if not a.quiet: print(f"  branch {k}: {addr} {pred.strip()} BRA {t} -> {'TAKEN' if tk else 'fall'}")
            if tk: pc = labels[t]
            else: pc += 1
        else:
            pc = labels[t]
        if pc == labels[a.start]: break
        continue
    if full.startswith("BRA.DIV"):
        pc += 1; continue
    pc += 1
c = collections.Counter(path)
INT = {"IMAD","PRMT","LEA","SHF","VIADD","ISETP","SEL","IADD3","LOP3","MOV","IABS","I2F","F2I"}
print(f"path {len(path)} instructions; integer {sum(v for o, v in c.items() if o in INT)}; PRMT {c['PRMT']}")
print(" ".join(f"{o}:{v}" for o, v in c.most_common(24)))

if a.phases:
    seg = 0; start = full_path[0][0]
    for addr, f in full_path:
        seg += 1
        if f.startswith(("BAR.SYNC", "BAR.RED", "SYNCS.PHASECHK", "SYNCS.ARRIVE", "WARPGROUP.DEPBAR")):
            print(f"  {start}-{addr} {seg:4d}  ends at {f}")
            seg = 0; start = addr
    print(f"  {start}-end {seg:4d}")
