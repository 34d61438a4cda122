#!/usr/bin/env bash
# Run 155 (second call; FlashInfer's part 2): the numerics table of the final build (compose v4),
# explain() at 1 x 32768, 2/4.
set -u
bash .peer2/stage.sh
source tools/device_lib.sh
python3 -c "import gdn_prefill._ext" 2>/dev/null || inst build/aot run155
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout -s KILL "$limit" "$@" >"$OUT/$name.log" 2>&1; echo "$name: rc=$? at $((SECONDS - t0)) s"; }
step numerics 150 python3 benchmarks/numerics_plans.py --T 4096,32768,65536 --heads 2/4,16/32 --md "$OUT/numerics.md" \
  --json "$OUT/numerics.json"
grep "^|" "$OUT/numerics.md" || tail -5 "$OUT/numerics.log"
python3 -c "
import json, torch, gdn_prefill
q = torch.empty(32768, 2, 128, dtype=torch.bfloat16, device='cuda'); v = torch.empty(32768, 4, 128, dtype=torch.bfloat16, device='cuda')
g = torch.empty(32768, 4, device='cuda'); st = torch.empty(1, 4, 128, 128, device='cuda')
e = gdn_prefill.explain(q, q, v, g, g, v, st)
print(json.dumps({k: e[k] for k in ('plan', 'kernels', 'workspace_bytes')}, indent=1))" > "$OUT/explain_1x32k_2_4.json" 2>&1
cat "$OUT/explain_1x32k_2_4.json"
