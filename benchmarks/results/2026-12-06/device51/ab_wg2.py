"""Scratch A/B: the unfused plan's two-warpgroup wgmma spine (q one element off 16 B), graph mode,
for whichever build is on PYTHONPATH.  One line per row, tagged; also a digest of out and state."""
import sys, hashlib, torch, gdn_prefill
from gdn_prefill import reference as ref
from gdn_prefill.bench.timing import one_call_graph
from gdn_prefill.bench import cases
tag = sys.argv[1]
rows = sys.argv[2].split(",") if len(sys.argv) > 2 else ["16x512:16/32", "8x4K:16/32", "64x256:8/16", "4x2K:16/64", "32x2K:16/32"]
for row in rows:
    s, heads = row.split(":"); hk, hv = (int(x) for x in heads.split("/"))
    lens = cases.parse_shape(s)
    t = ref.make_inputs(lens, hk, hv, seed=0, device="cuda", state="pool", beta_dtype=torch.bfloat16)
    buf = torch.zeros(t["q"].numel() + 1, dtype=t["q"].dtype, device="cuda"); q = buf[1:].view(t["q"].shape); q.copy_(t["q"])
    out = torch.empty_like(t["v"]); st = t["state"].clone()
    kw = dict(cu_seqlens=t["cu_seqlens"], state_indices=t["state_indices"], use_qk_l2norm=True, max_seqlen=max(lens))
    ex = gdn_prefill.explain(q, t["k"], t["v"], t["g"], t["beta"], out, st, **kw)
    kern = [k for k in str(ex).split("'") if "wg2" in k][:1]
    def call():
        gdn_prefill.prefill(q, t["k"], t["v"], t["g"], t["beta"], out, st, **kw)
    call(); torch.cuda.synchronize()
    st.copy_(t["state"]); call(); torch.cuda.synchronize()
    h = hashlib.sha1(out.cpu().view(torch.int16).numpy().tobytes() + st.cpu().view(torch.int32).numpy().tobytes()).hexdigest()[:10]
    us = min(one_call_graph(call, 40)[0] for _ in range(3))
    print(f"AB {tag} {row} plan={ex['plan']['name']} {kern} {us:.1f} us digest={h}", flush=True)
