"""Numerics of the two state-pool types against the fp64 oracle (issue 35's table).

    python benchmarks/numerics_state_dtype.py [--T 4096,65536] [--heads 16/32] [--md PATH] [--json PATH]

One sequence of T tokens, pre-normed q and k, an initial state drawn once and rounded to bf16
(so both pools start from the same values and the oracle from them exactly), prefill() with an
fp32 pool and with a bf16 pool: the relative Frobenius error of o and of the final state against
the oracle, and whether two runs give the same bits.  The bf16 pool's final state carries one
more rounding (its store) than the fp32 pool's.  Needs a Hopper GPU; without one it says so and
exits 0.
"""
from __future__ import annotations

import argparse
import datetime
import sys

from gdn_prefill import bench
from gdn_prefill.bench import table_report
from gdn_prefill.bench.cases import parse_heads


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--T", default="4096,65536")
    ap.add_argument("--heads", default="16/32")
    ap.add_argument("--md")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    if bench.script_cannot_time("numerics_state_dtype"):
        return 0
    import torch

    import gdn_prefill
    from gdn_prefill import reference as ref
    hk, hv = parse_heads(a.heads)
    rows = []
    for T in (int(t) for t in a.T.split(",")):
        inp = ref.make_inputs([T], hk, hv, seed=T, device="cuda", state="dense", l2norm_inputs=True)
        inp["state"] = inp["state"].to(torch.bfloat16).float()
        with torch.device("cuda"):
            o_ref, s_ref = ref.chunked(inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], state=inp["state"])
        for dtype in (torch.float32, torch.bfloat16):
            runs = []
            for _ in range(2):
                out = torch.empty_like(inp["v"])
                state = inp["state"].to(dtype, copy=True)     # a fresh pool each run: prefill writes it
                gdn_prefill.prefill(inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], out, state,
                                    cu_seqlens=inp["cu_seqlens"])
                runs.append((out, state))
            torch.cuda.synchronize()
            (o, s), (o2, s2) = runs
            same = torch.equal(o.view(torch.int16), o2.view(torch.int16)) and torch.equal(s, s2)
            rows.append(dict(T=T, pool=str(dtype).replace("torch.", ""), err_o=ref.rel_err(o.double(), o_ref),
                             err_state=ref.rel_err(s.double(), s_ref), bitwise=same))
            print(rows[-1], flush=True)
        del inp, o_ref, s_ref
        torch.cuda.empty_cache()
    head = (f"numerics against the fp64 oracle by state-pool type, one sequence, Hk/Hv {a.heads}; "
            f"{torch.cuda.get_device_name(0)}, {datetime.date.today()}")
    table_report(head, ["T", "pool", "rel err o", "rel err final state", "bitwise identical"],
                 [[r["T"], r["pool"], f"{r['err_o']:.3e}", f"{r['err_state']:.3e}", "yes" if r["bitwise"] else "NO"]
                  for r in rows], dict(head=head, rows=rows), a.md, a.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
