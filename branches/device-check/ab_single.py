"""Scratch A/B: prefill() graph time on single-plan rows, flag off and on, for the build on PYTHONPATH;
engine style (l2norm, pool) and pre-normed (dense).  One line per (row, setting, flag)."""
import sys, torch, gdn_prefill
from gdn_prefill import reference as ref
from gdn_prefill.bench.timing import one_call_graph
from gdn_prefill.bench import cases
tag = sys.argv[1]
rows = ["8x4K:16/32", "16x512:16/32", "varlen16:16/32", "32x2K:16/32", "8x4K:16/64", "16x512:8/24", "8x4K:8/16"]
for eng in (True, False):
    for row in rows:
        s, heads = row.split(":"); hk, hv = (int(x) for x in heads.split("/"))
        lens = cases.parse_shape(s)
        t = ref.make_inputs(lens, hk, hv, seed=0, device="cuda", state="pool" if eng else "dense",
                            l2norm_inputs=not eng, beta_dtype=torch.bfloat16)
        out = torch.empty_like(t["v"]); st = t["state"].clone()
        T, N = sum(lens), len(lens)
        ws = torch.empty(gdn_prefill.workspace_bytes(T, N, hv), dtype=torch.uint8, device="cuda")
        res = []
        for inv in (False, True):
            kw = dict(cu_seqlens=t["cu_seqlens"], state_indices=t.get("state_indices"), use_qk_l2norm=eng,
                      max_seqlen=max(lens), workspace=ws)
            if inv:
                kw["batch_invariant"] = True
            ex = gdn_prefill.explain(*(t[n] for n in ("q", "k", "v", "g", "beta")), out, st,
                                     **{k: v for k, v in kw.items() if k != "workspace"})["plan"]["name"]
            call = lambda: gdn_prefill.prefill(t["q"], t["k"], t["v"], t["g"], t["beta"], out, st, **kw)
            us = min(one_call_graph(call, 30)[0] for _ in range(3))
            res.append(f"{'inv' if inv else 'off'} {ex} {us:.1f}")
        print(f"AB {tag} {'engine' if eng else 'prenormed'} {row} | " + " | ".join(res), flush=True)
