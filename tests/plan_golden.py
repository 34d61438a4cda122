"""The planner's golden record: explain() (and the planning hooks) over a sweep of problems, as JSON.

    python tests/plan_golden.py            # print the record
    python tests/plan_golden.py --write    # rewrite tests/golden/plan_golden.json

tests/test_plan_golden.py compares a fresh record with the committed one, so no rule of the planner
(pyx/gdn_prefill/plan.pxi plan_call) changes without the golden file changing with it.  Everything
runs on CPU or "meta" tensors (no GPU: the planner then assumes GDN_SM_COUNT SMs).
"""
from __future__ import annotations

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(HERE, "golden", "plan_golden.json")

HEADS = ((2, 4), (4, 8), (8, 16), (16, 32))
BATCHES = (1, 2, 4, 16, 64)
LENGTHS = (64, 1000, 2048, 8192, 32768)


def _tensors(T, hk, hv, device="meta", unaligned=()):
    import torch

    def make(shape, dtype, name):
        if name in unaligned:      # one element past an aligned base: 2-byte aligned only
            return torch.zeros(int(torch.Size(shape).numel()) + 1, dtype=dtype, device=device)[1:].view(shape)
        return torch.empty(shape, dtype=dtype, device=device)
    q = make((T, hk, 128), torch.bfloat16, "q")
    k = make((T, hk, 128), torch.bfloat16, "k")
    v = make((T, hv, 128), torch.bfloat16, "v")
    out = make((T, hv, 128), torch.bfloat16, "out")
    g = torch.empty(T, hv, device=device)
    return q, k, v, g, out


def explain(T, hk, hv, n=1, *, device="meta", unaligned=(), pool=1, pool_dtype="fp32", beta="fp32",
            state=True, initial_state=False, indices=False, checkpoint_every=None, ckpt_cols=0, **kw):
    """explain() of one problem (or {"error": its type and message})."""
    import torch

    import gdn_prefill
    q, k, v, g, out = _tensors(T, hk, hv, device, unaligned)
    beta_t = torch.empty(T, hv, dtype=torch.bfloat16 if beta == "bf16" else torch.float32, device=device)
    sdt = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16,
           "fp8e4m3": torch.float8_e4m3fn}[pool_dtype]
    shape = (pool, hv, 128, 128)
    st = torch.empty(shape, dtype=sdt, device=device) if state else None
    init = torch.empty(shape, dtype=sdt, device=device) if initial_state else None
    cu = torch.empty(n + 1, dtype=torch.int32, device=device) if n > 1 else None
    si = torch.empty(n, dtype=torch.int32, device=device) if indices else None
    ck = torch.empty(n, ckpt_cols, dtype=torch.int32, device=device) if ckpt_cols else None
    try:
        e = gdn_prefill.explain(q, k, v, g, beta_t, out, st, cu_seqlens=cu, state_indices=si, initial_state=init,
                                checkpoint_every=checkpoint_every, checkpoints=ck, **kw)
    except Exception as x:     # noqa: BLE001  (the record keeps the error the planner raises)
        return {"error": f"{type(x).__name__}: {x}"}
    return json.loads(json.dumps(e))       # tuples -> lists, as the file holds them


def _hooks(_ext):
    """The planning hooks tests and benchmarks call, over a small grid."""
    out = {}
    for T in (64, 4096, 65536):
        for n in (1, 4, 64):
            for hk, hv in HEADS:
                for sms in (66, 132):
                    key = f"T{T} N{n} Hv{hv} sms{sms}"
                    out[key] = {
                        "rs_build": _ext._spine_rs_build(T, n, hv, sms),
                        "rs_build_serial": _ext._spine_rs_build(T, n, hv, sms, False),
                        "wgmma_warpgroups": _ext._spine_wgmma_warpgroups(n, hv),
                        "overlap_wu_ctas": _ext._overlap_rule(T, n, hv, sms),
                        "overlap_fits": _ext._overlap_fits_rule(n, hv, sms),
                        "single": _ext._single_plan_rule(T, n, hv, T // n if T % n == 0 else 0, sms),
                        "model_ns": list(_ext._model_ns(T, n, hv, -(-T // 64), 4, sms)),
                    }
    return out


def _builds(_ext):
    """_builds() (the benchmarks' forced plans) over a few problems."""
    import torch
    out = {}
    for T, n, (hk, hv) in ((8192, 1, (2, 4)), (4096, 4, (16, 32)), (1024, 64, (4, 8))):
        q, k, v, g, o = _tensors(T, hk, hv)
        beta = torch.empty(T, hv, device="meta")
        cu = torch.empty(n + 1, dtype=torch.int32, device="meta")
        st = torch.empty(n, hv, 128, 128, device="meta")
        for force in ({}, {"fused": 0}, {"fused": 0, "warpgroups": 1}, {"fused": 0, "warpgroups": 2},
                      {"fused": 1}, {"fused": 2}, {"rs_build": 0}, {"rs_build": 1}, {"rs_build": 2},
                      {"seg_chunks": 8}, {"spine": "scalar"}, {"state_layout": "vk"},
                      {"max_seqlen": T // n}):
            key = f"T{T} N{n} Hv{hv} " + " ".join(f"{a}={b}" for a, b in sorted(force.items()))
            try:
                out[key] = _ext._builds(q, k, v, g, beta, o, st, cu_seqlens=cu, **force)
            except Exception as x:     # noqa: BLE001
                out[key] = f"{type(x).__name__}: {x}"
    return out


def record():
    """The whole record: {section: {case: result}}."""
    import gdn_prefill
    from gdn_prefill import _ext
    rec = {}
    sweep = {}
    for hk, hv in HEADS:
        for n in BATCHES:
            for L in LENGTHS:
                T = n * L
                for ms in (None, L):
                    if n == 1 and ms is not None:
                        continue
                    sweep[f"{hk}/{hv} N{n} L{L} max_seqlen={ms}"] = explain(T, hk, hv, n, max_seqlen=ms, pool=n)
    # ragged: max_seqlen above the mean (not N * max_seqlen == T) and above T
    for hk, hv in HEADS:
        for n, T, ms in ((4, 4 * 8192, 4 * 8192 - 3), (8, 20000, 9000), (3, 3000, 5000), (64, 64 * 1000, 1024)):
            sweep[f"{hk}/{hv} N{n} T{T} max_seqlen={ms}"] = explain(T, hk, hv, n, max_seqlen=ms, pool=n)
    rec["sweep"] = sweep

    variants = {}
    shapes = ((8192, 1, 2, 4), (1000 * 16, 16, 8, 16), (2048 * 64, 64, 16, 32), (32768, 1, 16, 32),
              (512 * 32, 32, 4, 8))
    options = {
        "vk": dict(state_layout="vk"),
        "bf16 pool": dict(pool_dtype="bf16"),
        "bf16 pool vk": dict(pool_dtype="bf16", state_layout="vk"),
        "beta bf16": dict(beta="bf16"),
        "no state": dict(state=False),
        "initial_state": dict(initial_state=True),
        "initial_state, no state": dict(initial_state=True, state=False),
        "initial_state bf16 vk": dict(initial_state=True, pool_dtype="bf16", state_layout="vk"),
        "fp16 pool": dict(pool_dtype="fp16"),
        "fp8e4m3 pool vk": dict(pool_dtype="fp8e4m3", state_layout="vk"),
        "initial_state fp8e4m3, no state": dict(initial_state=True, state=False, pool_dtype="fp8e4m3"),
        "has_initial_state=False": dict(has_initial_state=False),
        "state_indices": dict(indices=True, pool=7),
        "checkpoints 1024": dict(indices=True, pool=9, checkpoint_every=1024, ckpt_cols=40),
        "checkpoints 192": dict(indices=True, pool=9, checkpoint_every=192, ckpt_cols=3),
        "spine scalar": dict(spine="scalar"),
        "spine wgmma": dict(spine="wgmma"),
        "qk l2norm, scale": dict(use_qk_l2norm=True, scale=0.5),
        "check_device=False": dict(check_device=False),
        "batch_invariant": dict(batch_invariant=True, use_qk_l2norm=True),
    }
    for T, n, hk, hv in shapes:
        L = T // n
        for name, opt in options.items():
            for ms in (None, L):
                opt = dict(opt)
                opt.setdefault("pool", n)
                variants[f"{hk}/{hv} N{n} T{T} max_seqlen={ms} {name}"] = explain(T, hk, hv, n, max_seqlen=ms, **opt)
    rec["options"] = variants

    # 16-byte misalignment (CPU tensors, small): the unaligned stage builds, the scalar spine, the unfused plan
    cpu = {}
    for T, n, hk, hv in ((256, 1, 2, 4), (512, 2, 4, 8), (128 * 4, 4, 8, 16)):
        for bad in ((), ("q",), ("k",), ("v",), ("out",), ("q", "k", "v", "out")):
            for spine in ("auto", "scalar", "wgmma"):
                for ms in (None, T // n):
                    cpu[f"{hk}/{hv} N{n} T{T} max_seqlen={ms} unaligned={','.join(bad)} spine={spine}"] = explain(
                        T, hk, hv, n, device="cpu", unaligned=bad, spine=spine, max_seqlen=ms, pool=n)
    rec["cpu"] = cpu

    errors = {
        "bad spine": explain(128, 2, 4, spine="fast"),
        "bad layout": explain(128, 2, 4, state_layout="xy"),
        "max_seqlen 0": explain(128, 2, 4, max_seqlen=0),
        "checkpoint_every 100": explain(128, 2, 4, indices=True, checkpoint_every=100, ckpt_cols=1),
        "heads 3/4": explain(128, 3, 4),
    }
    rec["errors"] = errors
    rec["hooks"] = _hooks(_ext)
    rec["builds"] = _builds(_ext)
    rec["workspace"] = {f"T{T} N{n} Hv{hv}": [gdn_prefill.workspace_bytes(T, n, hv),
                                              gdn_prefill.workspace_bytes(T, n, hv, True),
                                              gdn_prefill.workspace_bytes(T, n, hv, False),
                                              json.loads(json.dumps(gdn_prefill.workspace_layout(T, n, hv, True, 4)))]
                        for T in (64, 8192, 65536) for n in (1, 8) for hv in (4, 32)}
    # where the overlap plan's rule meets the segmented plan's and the serial plan's
    rec["overlap"] = {f"{hk}/{hv} N{n} L{L} max_seqlen={ms}": explain(n * L, hk, hv, n, max_seqlen=ms, pool=n)
                      for hk, hv in HEADS for n in (1, 2, 4, 16) for L in (1000, 2048, 8192, 32768)
                      for ms in (None, L)}
    return rec


def main(argv):
    rec = record()
    text = json.dumps(rec, indent=1, sort_keys=True) + "\n"
    if "--write" in argv:
        os.makedirs(os.path.dirname(GOLDEN), exist_ok=True)
        with open(GOLDEN, "w") as f:
            f.write(text)
        print(f"wrote {GOLDEN}")
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main(sys.argv[1:])
