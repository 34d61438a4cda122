"""Numerics of the state-pool types against the fp64 oracle (issue 35's table; fp16 and fp8 e4m3: issue 55).

    python benchmarks/numerics_state_dtype.py [--T 4096,65536] [--heads 16/32] [--pools fp32,bf16,fp16,fp8e4m3]
                                              [--md PATH] [--json PATH]

One sequence of T tokens, pre-normed q and k, an initial state drawn once and rounded so that a pool
of every type measured holds it exactly (rounded through the types, finest first: to bf16 when the
pools are fp32 and bf16, as issue 35's table was; to fp8 e4m3 once an fp8 pool is measured), so all
pools start from the same values and the oracle from them exactly (so with the default --pools the
fp32 and bf16 rows start from fp8-rounded states, not issue 35's bf16-rounded ones, and differ from
that table in the last digits; --pools fp32,bf16 repeats it); prefill() with a pool of each
type: the relative Frobenius error of o and of the final state against the oracle, the most the
pool's one rounding can add to the fp32 pool's state error (reference.pool_rounding_bound: u =
2^-8 bf16, 2^-11 fp16, 2^-4 fp8 e4m3 per element), whether the pool's final state is the fp32
pool's rounded once (reference.round_to_pool), bit for bit, and whether two runs give the same bits.
Needs a Hopper GPU; without one it says so and exits 0.
"""
from __future__ import annotations

import argparse
import datetime
import sys

from gdn_prefill import bench
from gdn_prefill.bench import table_report
from gdn_prefill.bench.cases import parse_heads

# significand bits of each pool type: the initial state is rounded through the measured types in
# this order (finest first), which leaves it representable in each (checked)
PRECISION = {"fp32": 24, "fp16": 11, "bf16": 8, "fp8e4m3": 4}


def common_start(x, pools: list[str]):
    """x (fp32) rounded through the pool types `pools`, finest first: values every one holds exactly."""
    from gdn_prefill import reference as ref
    for pool in sorted(pools, key=lambda p: -PRECISION[p]):
        x = ref.round_to_pool(x, ref.POOL_DTYPES[pool][0]).float()
    for pool in pools:
        dt = ref.POOL_DTYPES[pool][0]
        if not bool((ref.round_to_pool(x, dt).float() == x).all()):
            raise SystemExit(f"--pools: no common initial state for {pools} ({pool} cannot hold it exactly)")
    return x


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--T", default="4096,65536")
    ap.add_argument("--heads", default="16/32")
    ap.add_argument("--pools", default="fp32,bf16,fp16,fp8e4m3", help="state-pool types, fp32 first or not "
                    "(each its own rows; the fp32 pool is always run: the others are compared with it)")
    ap.add_argument("--md")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    pools = [p for p in a.pools.split(",") if p]
    bad = [p for p in pools if p not in PRECISION]
    if bad:
        ap.error(f"--pools: unknown pool type(s) {bad}; choose from {list(PRECISION)}")
    if bench.script_cannot_time("numerics_state_dtype"):
        return 0
    import torch

    import gdn_prefill
    from gdn_prefill import reference as ref
    hk, hv = parse_heads(a.heads)
    start_type = min(pools, key=lambda p: PRECISION[p])
    rows = []
    for T in (int(t) for t in a.T.split(",")):
        inp = ref.make_inputs([T], hk, hv, seed=T, device="cuda", state="dense", l2norm_inputs=True)
        inp["state"] = common_start(inp["state"], pools)
        with torch.device("cuda"):
            o_ref, s_ref = ref.chunked(inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], state=inp["state"])
        final32 = None
        for pool in ["fp32"] + [p for p in pools if p != "fp32"]:
            dtype = ref.POOL_DTYPES[pool][0]
            runs = []
            for _ in range(2):
                out = torch.empty_like(inp["v"])
                state = inp["state"].to(dtype, copy=True)     # a fresh pool each run: prefill writes it
                gdn_prefill.prefill(inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], out, state,
                                    cu_seqlens=inp["cu_seqlens"])
                runs.append((out, state))
            torch.cuda.synchronize()
            (o, s), (o2, s2) = runs
            same = torch.equal(o.view(torch.int16), o2.view(torch.int16)) and \
                torch.equal(s.view(torch.uint8), s2.view(torch.uint8))
            if pool == "fp32":
                final32 = s
            rounded_once = torch.equal(s.view(torch.uint8), ref.round_to_pool(final32, dtype).view(torch.uint8))
            scale = (torch.linalg.vector_norm(final32.double()) / torch.linalg.vector_norm(s_ref.double())).item()
            if pool in pools:
                rows.append(dict(T=T, pool=pool, start=start_type, err_o=ref.rel_err(o.double(), o_ref),
                                 err_state=ref.rel_err(s.double(), s_ref),
                                 rounding_bound=ref.pool_rounding_bound(final32, dtype) * scale,
                                 rounded_once=rounded_once, bitwise=same))
                print(rows[-1], flush=True)
        del inp, o_ref, s_ref, final32
        torch.cuda.empty_cache()
    head = (f"numerics against the fp64 oracle by state-pool type, one sequence, Hk/Hv {a.heads}, initial state "
            f"rounded to {start_type} (every pool holds it); {torch.cuda.get_device_name(0)}, {datetime.date.today()}")
    table_report(head, ["T", "pool", "rel err o", "rel err final state", "rounding adds at most",
                        "= fp32 pool's rounded once", "bitwise identical"],
                 [[r["T"], r["pool"], f"{r['err_o']:.3e}", f"{r['err_state']:.3e}", f"{r['rounding_bound']:.3e}",
                   "yes" if r["rounded_once"] else "NO", "yes" if r["bitwise"] else "NO"] for r in rows],
                 dict(head=head, rows=rows), a.md, a.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
