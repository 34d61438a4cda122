"""Numerics of the serial and the segmented plan against the fp64 oracle (issue 41's table).

    python benchmarks/numerics_plans.py [--T 4096,32768,65536] [--heads 2/4,16/32] [--segments 16]
                                        [--md PATH] [--json PATH]

One sequence of T tokens, pre-normed q and k, an initial state: the serial fused plan and the
segmented plan (the longest sequence in --segments segments; the planner's own count where it
picks the segmented plan) through the stage hook, each run twice: the relative Frobenius error of o
and of the final state against the oracle, the segmented plan's errors over the serial plan's, and
whether the two runs of each plan give the same bits.  Needs a Hopper GPU; without one it says so
and exits 0.
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
    ap.add_argument("--T", default="4096,32768,65536")
    ap.add_argument("--heads", default="2/4,16/32")
    ap.add_argument("--segments", type=int, default=16, help="segments where the planner picks the serial plan")
    ap.add_argument("--md")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    if bench.script_cannot_time("numerics_plans"):
        return 0
    import torch

    import gdn_prefill
    from gdn_prefill import _ext, grids, reference as ref
    rows = []
    for hk, hv in (parse_heads(h) for h in a.heads.split(",")):
        for T in (int(t) for t in a.T.split(",")):
            inp = ref.make_inputs([T], hk, hv, seed=T + hv, device="cuda", state="dense", l2norm_inputs=True)
            with torch.device("cuda"):
                o_ref, s_ref = ref.chunked(inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], state=inp["state"])
            args = (inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"])
            info = gdn_prefill.explain(*args, torch.empty_like(inp["v"]), inp["state"])["plan"]
            chunks = -(-T // grids.CHUNK)
            sc = info.get("segment_chunks") or -(-chunks // a.segments)
            ws = torch.empty(max(gdn_prefill.workspace_bytes(T, 1, hv), _ext._segmented_workspace_bytes(T, 1, hv, sc)),
                             dtype=torch.uint8, device="cuda")
            errs = {}
            for name, stages, kw in (("serial", ("recompute_wu", "spine"), dict(fused=1, overlap_wu_ctas=0)),
                                     ("segmented", ("recompute_wu", "maps", "compose", "spine"), dict(seg_chunks=sc))):
                runs = []
                for _ in range(2):
                    out, state = torch.empty_like(inp["v"]), inp["state"].clone()
                    _ext._launch_stages(stages, *args, out, state, cu_seqlens=inp["cu_seqlens"], spine="wgmma",
                                        workspace=ws, **kw)
                    runs.append((out, state))
                torch.cuda.synchronize()
                (o, s), (o2, s2) = runs
                same = torch.equal(o.view(torch.int16), o2.view(torch.int16)) and torch.equal(s, s2)
                errs[name] = (ref.rel_err(o.double(), o_ref), ref.rel_err(s.double(), s_ref))
                rows.append(dict(T=T, heads=f"{hk}/{hv}", plan=name,
                                 segments=(f"{-(-chunks // sc)} x {sc}" if name == "segmented" else "1"),
                                 planner=info["name"], err_o=errs[name][0], err_state=errs[name][1], bitwise=same))
                if name == "segmented":
                    rows[-1]["ratio_o"] = errs[name][0] / errs["serial"][0]
                    rows[-1]["ratio_state"] = errs[name][1] / errs["serial"][1]
                print(rows[-1], flush=True)
            del inp, o_ref, s_ref, ws
            torch.cuda.empty_cache()
    head = (f"numerics of the serial and the segmented plan against the fp64 oracle, one sequence with an initial "
            f"state; {torch.cuda.get_device_name(0)}, {datetime.date.today()}")
    table_report(head, ["T", "Hk/Hv", "plan", "segments x chunks", "planner", "rel err o", "rel err final state",
                        "o / serial", "state / serial", "bitwise identical"],
                 [[r["T"], r["heads"], r["plan"], r["segments"], r["planner"], f"{r['err_o']:.3e}",
                   f"{r['err_state']:.3e}", f"{r['ratio_o']:.3f}" if "ratio_o" in r else "",
                   f"{r['ratio_state']:.3f}" if "ratio_state" in r else "", "yes" if r["bitwise"] else "NO"]
                  for r in rows], dict(head=head, rows=rows), a.md, a.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
