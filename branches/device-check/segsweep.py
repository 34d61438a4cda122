"""Scratch: one 32K prompt engine-style (in-kernel l2norm, a pool slot), graph mode: the rule's plan,
the serial plan and the segmented plan at several segment lengths, whole and stage by stage."""
import sys, torch, gdn_prefill
from gdn_prefill import _ext, reference as ref
from gdn_prefill.bench.timing import one_call_graph
rows = sys.argv[1].split(",") if len(sys.argv) > 1 else ["4/16", "8/24", "8/32", "16/16", "16/32", "16/64"]
T = int(sys.argv[2]) if len(sys.argv) > 2 else 32768
SEGS = [43, 64, 86, 128, 256]
def t(call):
    return min(one_call_graph(call, 25)[0] for _ in range(2))
for h in rows:
    hk, hv = map(int, h.split("/"))
    x = ref.make_inputs([T], hk, hv, seed=0, device="cuda", state="pool", beta_dtype=torch.bfloat16)
    out = torch.empty_like(x["v"]); st = x["state"].clone()
    wsb = max([gdn_prefill.workspace_bytes(T, 1, hv)] + [_ext._segmented_workspace_bytes(T, 1, hv, s) for s in SEGS])
    ws = torch.empty(wsb, dtype=torch.uint8, device="cuda")
    kw = dict(cu_seqlens=x["cu_seqlens"], state_indices=x["state_indices"], use_qk_l2norm=True, max_seqlen=T)
    args = (x["q"], x["k"], x["v"], x["g"], x["beta"], out, st)
    ex = gdn_prefill.explain(*args, **kw)["plan"]
    rule = t(lambda: gdn_prefill.prefill(*args, workspace=ws, **kw))
    line = [f"SEG {h} T={T} rule={ex['name']}/{ex.get('segment_chunks')} {rule:.1f}"]
    st_ser = ("recompute_wu", "spine")
    parts = [t(lambda s=s: _ext._launch_stages((s,), *args, workspace=ws, fused=1, overlap_wu_ctas=0, **kw)) for s in st_ser]
    full = t(lambda: _ext._launch_stages(st_ser, *args, workspace=ws, fused=1, overlap_wu_ctas=0, **kw))
    line.append(f"serial {full:.1f} (wu {parts[0]:.1f} spine {parts[1]:.1f})")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    if 4 * hv <= sms:      # the overlap plan (its workers on the SMs the spine leaves), forced
        wu = sms - 2 * hv
        ov = t(lambda: _ext._launch_stages(st_ser, *args, workspace=ws, fused=1, overlap_wu_ctas=wu, **kw))
        line.append(f"overlap{wu} {ov:.1f}")
    for sc in SEGS:
        stg = ("recompute_wu", "maps", "compose", "spine")
        try:
            full = t(lambda: _ext._launch_stages(stg, *args, workspace=ws, seg_chunks=sc, **kw))
            parts = [t(lambda s=s: _ext._launch_stages((s,), *args, workspace=ws, seg_chunks=sc, **kw)) for s in stg[1:]]
            serial_ns, seg_ns = _ext._model_ns(T, 1, hv, -(-T // 64), sc)
            line.append(f"seg{sc} {full:.1f} (maps {parts[0]:.1f} comp {parts[1]:.1f} seg {parts[2]:.1f}; model {seg_ns/1e3:.0f})")
        except Exception as e:
            line.append(f"seg{sc} {type(e).__name__}: {str(e)[:60]}")
    print(" | ".join(line), flush=True)
