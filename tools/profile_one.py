"""One prefill for a profiler to look at (Hk/Hv = 16/32 unless given, wgmma spine), run twice:
    ncu -k regex:... python tools/profile_one.py [BxT] [rule|fused|unfused|single|flashinfer] [Hk/Hv] [l2norm]
(default 1x8192, the rule's plan; "unfused" runs spine_wgmma + fwd_o, the spine of issue 4's
microbenchmark; "fused" the fused plan serially with the spine_rs_o build the prefill runs at that
shape: pair at B=1, dual at B=8; "single" the single plan's one kernel, forced; "flashinfer"
FlashInfer's chunk_gated_delta_rule on the same inputs, as the benchmarks call it: alpha = exp(g),
its [N, Hv, V, K] state).  q and k are unit-normed and no norm runs in a kernel; with "l2norm" they
are not, and every kernel normalises them itself (use_qk_l2norm; FlashInfer's
use_qk_l2norm_in_kernel): the engine setting.  The second call
runs between cudaProfilerStart and cudaProfilerStop, so `ncu --profile-from-start off` sees it
alone (FlashInfer's own JIT and caches are warm by then)."""
import sys

import torch

import gdn_prefill
from gdn_prefill import _ext
from gdn_prefill import reference as ref

b, t = (int(x) for x in (sys.argv[1] if len(sys.argv) > 1 else "1x8192").split("x"))
mode = sys.argv[2] if len(sys.argv) > 2 else "rule"
if mode not in ("rule", "fused", "unfused", "single", "flashinfer"):
    sys.exit(f"profile_one: unknown plan {mode!r} (rule, fused, unfused, single or flashinfer)")
hk, hv = (int(x) for x in (sys.argv[3] if len(sys.argv) > 3 else "16/32").split("/"))
l2 = len(sys.argv) > 4 and sys.argv[4] == "l2norm"
if len(sys.argv) > 4 and not l2:
    sys.exit(f"profile_one: unknown setting {sys.argv[4]!r} (l2norm, or nothing for pre-normed q, k)")
inp = ref.make_inputs([t] * b, hk, hv, seed=0, device="cuda", state="dense", l2norm_inputs=not l2)
out = torch.empty_like(inp["v"])
args = (inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], out, inp["state"])
ws = None if mode in ("rule", "flashinfer") else \
    torch.empty(gdn_prefill.workspace_bytes(b * t, b, hv), dtype=torch.uint8, device="cuda")   # the stage hook's
if mode == "flashinfer":
    from flashinfer.gdn_prefill import chunk_gated_delta_rule as fi
    alpha = inp["g"].exp()
    state = inp["state"].transpose(-1, -2).contiguous()
    final = torch.empty_like(state)
    cu64 = inp["cu_seqlens"].long()


def call():
    if mode == "rule":
        gdn_prefill.prefill(*args, cu_seqlens=inp["cu_seqlens"], spine="wgmma", use_qk_l2norm=l2)
    elif mode == "single":
        _ext._launch_stages(("fused",), *args, cu_seqlens=inp["cu_seqlens"], spine="wgmma", workspace=ws,
                            fused=2, max_seqlen=t, use_qk_l2norm=l2)
    elif mode == "flashinfer":
        fi(inp["q"], inp["k"], inp["v"], alpha, inp["beta"], scale=None, initial_state=state,
           output_final_state=True, cu_seqlens=cu64, output=out, output_state=final,
           use_qk_l2norm_in_kernel=l2)
    else:   # the stage hook (bench_spine's): one plan forced; the fused one serial (stage 1 wholly
        # first: ncu runs kernels one at a time, and the overlap plan's spine waits for stage 1's flags)
        fused = mode == "fused"
        _ext._launch_stages(("recompute_wu", "spine") + (() if fused else ("fwd_o",)), *args,
                            cu_seqlens=inp["cu_seqlens"], spine="wgmma", workspace=ws, fused=int(fused), use_qk_l2norm=l2,
                            overlap_split=0 if fused else -1, rs_build=-1)   # the rule's build (B=1: pair)


call()
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStart()
call()
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStop()
print("done")
