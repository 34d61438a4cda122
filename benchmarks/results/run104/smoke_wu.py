"""smoke: the prefill against the fp64 oracle on a mixed varlen batch (partial chunks, in-kernel l2norm)."""
import torch, gdn_prefill
from gdn_prefill import reference as ref
for lens, l2 in (([300, 64, 1, 2100, 130], True), ([4096], False)):
    x = ref.make_inputs(lens, 2, 4, seed=1, device="cuda", state="dense", l2norm_inputs=not l2)
    out = torch.empty_like(x["v"]); st = x["state"].clone()
    gdn_prefill.prefill(x["q"], x["k"], x["v"], x["g"], x["beta"], out, st, cu_seqlens=x["cu_seqlens"],
                        use_qk_l2norm=l2, spine="wgmma")
    torch.cuda.synchronize()
    cpu = {k: (v.cpu() if torch.is_tensor(v) else v) for k, v in x.items()}
    o_ref, s_ref = ref.chunked(cpu["q"], cpu["k"], cpu["v"], cpu["g"], cpu["beta"], cu_seqlens=cpu["cu_seqlens"],
                               state=cpu["state"], use_qk_l2norm=l2)
    print(f"smoke {lens} l2norm={l2}: rel err o {ref.rel_err(out.cpu(), o_ref):.3e} state {ref.rel_err(st.cpu(), s_ref):.3e}")
