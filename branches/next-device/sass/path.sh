#!/bin/bash
# path.sh CUBIN REGS [walk.py flags]: one thread's path through the chunk loop of the warpgroup whose
# setmaxnreg sets REGS (0x68: the role / FlashInfer's auxiliary warpgroup), from walk.py.  The loop:
# the longest backward branch in that warpgroup's code.  NVDISASM: nvdisasm's path (default: on PATH).
D=$(dirname "$0"); S=$(mktemp)
${NVDISASM:-nvdisasm} -c "$1" > $S
head=$(REG="$2" python3 - $S <<'PY'
import os, re, sys
lines = open(sys.argv[1]).read().split("\n")
marks = [i for i, l in enumerate(lines) if "USETMAXREG" in l] + [len(lines)]
k = next(k for k, i in enumerate(marks[:-1]) if os.environ["REG"] in lines[i])
start, end = marks[k], marks[k + 1]
lab = {m.group(1): i for i, l in enumerate(lines) for m in [re.match(r"^(\.L_x_\d+):", l)] if m}
best = None
for i in range(start, end):
    m = re.search(r"^\s*/\*[0-9a-f]+\*/\s+(@!?U?P\w+\s+)?BRA `\((\.L_x_\d+)\)", lines[i])
    if m and start < lab[m.group(2)] < i and (best is None or i - lab[m.group(2)] > best[0]):
        best = (i - lab[m.group(2)], m.group(2))
print(best[1])
PY
)
shift 2
python3 $D/walk.py $S $head "$@"; rm -f $S
