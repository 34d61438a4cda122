"""The implementations under test and how each is called: gdn's plans by name (prefill() or the
stage hook), FLA, FlashInfer and FlashQLA with their arguments mapped as this harness passes them."""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from importlib import import_module
from typing import Any, Callable

from .cases import Case
from .env import PEERS, compiled_spines
from .inputs import pooled


def _impl_list(requested: str | None) -> tuple[list[str], list[dict]]:
    """Implementation names to run, and the skipped ones with reasons."""
    want = [s.strip() for s in requested.split(",")] if requested else None
    names, skipped = [], []
    try:
        spines = compiled_spines()
    except Exception as e:
        spines = []
        skipped.append(dict(what="gdn", reason=f"gdn_prefill extension unavailable: {e}"))
    for s in spines:
        names.append(f"gdn:{s}")
    try:
        import gdn_prefill
        if "wgmma" in spines and "spine_rs_o_kv" in gdn_prefill.compiled_variants():
            names += ["gdn:wgmma-4k", "gdn:wgmma-serial", "gdn:invariant"]
        if "wgmma" in spines and any(v.startswith("single_prefill_") for v in gdn_prefill.compiled_variants()):
            names.append("gdn:wgmma-single")
    except Exception:
        pass
    for name, (_, module) in PEERS.items():
        try:
            if not hasattr(import_module(module), "chunk_gated_delta_rule"):
                raise ImportError(f"cannot import name 'chunk_gated_delta_rule' from {module!r}")
            names.append(name)
        except Exception as e:
            skipped.append(dict(what=name, reason=f"not importable ({type(e).__name__}: {e})"))
    if want:
        keep = []
        for n in names:
            if any(n == w or (w == "gdn" and n.startswith("gdn:")) for w in want):
                keep.append(n)
        unknown = [w for w in want if w != "gdn" and w not in names and not any(s["what"] == w for s in skipped)]
        for w in unknown:
            skipped.append(dict(what=w, reason="not an available implementation"))
        # a skipped implementation is reported where it was asked for (gdn also by "gdn:<spine>")
        skipped = [s for s in skipped if any(s["what"] in (w, w.split(":")[0]) for w in want)]
        names = keep
    return names, skipped


def _filter_kwargs(fn, kw: dict) -> dict:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return kw
    if any(p.kind == p.VAR_KEYWORD for p in params.values()):
        return kw
    return {k: v for k, v in kw.items() if k in params}


def _gdn_call(impl: str, s, out, state, cu32, use_l2: bool, ws, max_seqlen=None, state_indices=None) -> str:
    """One gdn call of `impl` ("gdn:<spine>" -> prefill(spine=<spine>); "gdn:wgmma-4k" -> the
    unfused plan with the wgmma spine, "gdn:wgmma-serial" -> the fused plan's serial form (stage 1,
    then the spine: no overlap, no segments), "gdn:wgmma-single" -> the single plan, all through the stage hook;
    "gdn:invariant" -> prefill(batch_invariant=True));
    returns what ran.  max_seqlen: the longest sequence, as a serving engine passes it (the
    planner's segmented and single plans read it).  state_indices: the sequences' slots of a state
    pool (prefill() only)."""
    import gdn_prefill
    spine = impl.split(":", 1)[1]
    if spine == "wgmma-4k":
        from gdn_prefill import _ext
        _ext._launch_stages(("recompute_wu", "spine", "fwd_o"), s.q, s.k, s.v, s.g, s.beta, out,
                            state, cu_seqlens=cu32, spine="wgmma", use_qk_l2norm=use_l2, workspace=ws, fused=0)
        return spine
    if spine == "wgmma-serial":
        from gdn_prefill import _ext
        _ext._launch_stages(("recompute_wu", "spine"), s.q, s.k, s.v, s.g, s.beta, out, state, cu_seqlens=cu32,
                            spine="wgmma", use_qk_l2norm=use_l2, workspace=ws, fused=1, overlap_wu_ctas=0)
        return spine
    if spine == "wgmma-single":
        from gdn_prefill import _ext
        _ext._launch_stages(("single",), s.q, s.k, s.v, s.g, s.beta, out, state, cu_seqlens=cu32, spine="wgmma",
                            use_qk_l2norm=use_l2, workspace=ws, fused=2, max_seqlen=max_seqlen)
        return spine
    if state_indices is not None and spine.startswith("wgmma-"):
        raise ValueError(f"gdn:{spine} runs through the stage hook, which takes no state pool")
    how = dict(batch_invariant=True) if spine == "invariant" else dict(spine=spine)
    ran = gdn_prefill.prefill(s.q, s.k, s.v, s.g, s.beta, out, state, cu_seqlens=cu32, use_qk_l2norm=use_l2,
                              workspace=ws, max_seqlen=max_seqlen, state_indices=state_indices, **how)
    return spine if spine == "invariant" else ran


def flashinfer_route(case: Case) -> str:
    """The route FlashInfer's chunk_gated_delta_rule takes for a case with use_cp="auto": its own
    rule (flashinfer.gdn_kernels.delta_rule_dsl.varlen_helper.should_use_cp_host, on N x max(Hq,
    Hv) parallel work items), or, where that helper is not importable, the rule its docs state
    (context parallel where N x H x 2 < SMs)."""
    import torch
    props = torch.cuda.get_device_properties(0)
    work = case.N * max(case.Hk, case.Hv)
    try:
        from flashinfer.gdn_kernels.delta_rule_dsl.varlen_helper import should_use_cp_host
        cp = should_use_cp_host(work, props.multi_processor_count, props.name, (props.major, props.minor))
    except Exception:
        cp = work * 2 < props.multi_processor_count
    return "context-parallel" if cp else "fused"


def _calls(impl: str, case: Case, sets: list, cu: dict, use_l2: bool) -> tuple[list, str]:
    """One zero-argument callable per buffer set, and a note (what was passed)."""
    import torch
    if impl.startswith("gdn:"):
        import gdn_prefill
        spine = impl.split(":", 1)[1]
        ws = torch.empty(max(gdn_prefill.workspace_bytes(case.T, case.N, case.Hv), 1), dtype=torch.uint8,
                         device="cuda")

        def mk(s):
            slots = s.extra.get("slots")
            idx = None if slots is None else slots.to(torch.int32)

            def call():
                return _gdn_call(impl, s, s.out, s.state, cu["cu32"], use_l2, ws, max(case.lens), idx)
            return call
        calls = [mk(s) for s in sets]
        ran = calls[0]()
        if ran != spine:
            raise RuntimeError(f"asked for spine {spine!r}, prefill ran {ran!r}")
        return calls, ""
    if impl in PEERS:
        peers = [peer_call(impl, case, s, cu, use_l2) for s in sets]
        return [p.call for p in peers], peers[0].note
    raise ValueError(f"unknown implementation {impl!r}")


@dataclass
class PeerCall:
    """One peer's call on one buffer set, its arguments mapped as this harness passes them (FLA:
    [1, T, H, D] views of the set, int64 cu_seqlens and, where its signature takes it,
    cu_seqlens_cpu; FlashInfer: alpha = exp(g), the state transposed to [N, Hv, V, K], output and
    output_state preallocated).
      call()       one call on torch's current stream; returns what the implementation returns
                   (what the timing harness times)
      result(ret)  call()'s return -> (o [T, Hv, V], final state [N, Hv, K, V]) in our conventions
                   (views where the layouts allow)
      prepare()    on the current stream: derive the converted inputs again from the set's tensors
                   (after new values were copied into them) and fill preallocated outputs with NaN
      note         what was passed (FlashInfer: and the route it takes)"""
    call: Callable[[], Any]
    result: Callable[[Any], tuple]
    prepare: Callable[[], None]
    note: str = ""


def peer_call(impl: str, case: Case, s, cu: dict, use_l2: bool) -> PeerCall:
    """PeerCall of a peer (PEERS) on set `s` (FlashInfer's converted inputs are kept in
    s.extra["fi"], made on the first call for a set and reused after).  Where the set holds a state
    pool (s.extra["slots"]), a peer that takes slot indices (FlashInfer's state_indices) updates its
    own pool in place; one that does not (FLA, FlashQLA) is called as engines call it: gather, call,
    scatter (pooled).  FlashQLA is called as FLA is (its signature is FLA's), with its defaults:
    auto_cp=True, its intra-card context parallelism where its own rule picks it."""
    import torch
    slots = s.extra.get("slots")
    if impl in ("fla", "flashqla"):
        fn = import_module(PEERS[impl][1]).chunk_gated_delta_rule
        kw = _filter_kwargs(fn, dict(output_final_state=True, cu_seqlens=cu["cu64"],
                                     cu_seqlens_cpu=cu["cu64_cpu"], use_qk_l2norm_in_kernel=use_l2))
        note = ("cu_seqlens_cpu not accepted by this FLA" if impl == "fla" and "cu_seqlens_cpu" not in kw else
                "its defaults (auto_cp)" if impl == "flashqla" else "")
        q, k, v, g, b = s.q[None], s.k[None], s.v[None], s.g[None], s.beta[None]
        if slots is None:
            return PeerCall(call=lambda: fn(q, k, v, g, b, initial_state=s.state, **kw),
                            result=lambda ret: (ret[0][0], ret[1]), prepare=lambda: None, note=note)
        last = {}

        def fla_once(init):
            last["o"], final = fn(q, k, v, g, b, initial_state=init, **kw)
            return final
        call = pooled(fla_once, s.state, slots)
        return PeerCall(call=call, result=lambda ret: (last["o"][0], ret), prepare=lambda: None,
                        note=(note + "; " if note else "") + "state pool: gather, call, scatter")
    if impl == "flashinfer":
        from flashinfer.gdn_prefill import chunk_gated_delta_rule as fn
        from ..reference import _l2norm_inv
        honours_l2 = "use_qk_l2norm_in_kernel" in _filter_kwargs(fn, dict(use_qk_l2norm_in_kernel=use_l2))
        in_place = slots is not None and "state_indices" in _filter_kwargs(fn, dict(state_indices=slots))
        note = f"alpha=exp(g), state [N,Hv,V,K], route: {flashinfer_route(case)}"
        if use_l2:
            note += ("; q/k normalised by FlashInfer (use_qk_l2norm_in_kernel)" if honours_l2 else
                     "; q/k pre-normed (this FlashInfer takes no use_qk_l2norm_in_kernel)")
        if slots is not None:
            note += "; state pool in place (state_indices)" if in_place else "; state pool: gather, call, scatter"

        def converted() -> dict:
            q, k = s.q, s.k
            if use_l2 and not honours_l2:       # the kernels' (and the oracle's) rsqrt(|x|^2 + eps)
                q = (q.float() * _l2norm_inv(q.float())[..., None]).to(q.dtype)
                k = (k.float() * _l2norm_inv(k.float())[..., None]).to(k.dtype)
            return dict(q=q, k=k, alpha=s.g.exp().contiguous(), state=s.state.transpose(-1, -2).contiguous())
        if "fi" not in s.extra:
            c = converted()
            st = c["state"]         # in place: the pool is its own output; else one state per sequence
            out_state = st if in_place else st.new_empty((case.N,) + tuple(st.shape[1:]))
            s.extra["fi"] = dict(c, out=torch.empty_like(s.out), out_state=out_state)
        f = s.extra["fi"]
        kw = _filter_kwargs(fn, dict(scale=None, output_final_state=True, cu_seqlens=cu["cu64"],
                                     use_qk_l2norm_in_kernel=use_l2, output=f["out"], max_seqlen=max(case.lens)))
        if in_place:
            kw.update(initial_state=f["state"], output_state=f["state"], state_indices=slots)
        elif slots is None:
            kw.update(initial_state=f["state"], output_state=f["out_state"])

        def prepare() -> None:
            for name, t in converted().items():
                if t is not f[name]:            # q, k are the set's own tensors unless pre-normed
                    f[name].copy_(t)
            f["out"].fill_(float("nan"))
            if f["out_state"] is not f["state"]:
                f["out_state"].fill_(float("nan"))

        def result(ret) -> tuple:
            o, st = ret if isinstance(ret, tuple) else (ret, f["out_state"])
            if in_place:
                st = st.index_select(0, slots)
            return o, st.transpose(-1, -2)
        if slots is not None and not in_place:
            def fi_once(init):
                fn(f["q"], f["k"], s.v, f["alpha"], s.beta, initial_state=init, output_state=f["out_state"], **kw)
                return f["out_state"]
            call = pooled(fi_once, f["state"], slots)
            return PeerCall(call=lambda: (f["out"], call()), result=result, prepare=prepare, note=note)
        return PeerCall(call=lambda: fn(f["q"], f["k"], s.v, f["alpha"], s.beta, **kw), result=result,
                        prepare=prepare, note=note)
    raise ValueError(f"not a peer implementation: {impl!r}")
