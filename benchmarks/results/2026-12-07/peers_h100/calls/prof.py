"""Kernel list of one long prompt, pre-normed: FlashQLA's auto-CP route and ours (torch.profiler)."""
import sys, torch, collections
import gdn_prefill
from torch.profiler import profile, ProfilerActivity
from flash_qla import chunk_gated_delta_rule as qla

def inputs(T, hk, hv):
    torch.manual_seed(0); d, bf = "cuda", torch.bfloat16
    q = torch.nn.functional.normalize(torch.randn(T, hk, 128, device=d), dim=-1).to(bf)
    k = torch.nn.functional.normalize(torch.randn(T, hk, 128, device=d), dim=-1).to(bf)
    v = torch.randn(T, hv, 128, device=d, dtype=bf)
    g = torch.nn.functional.logsigmoid(3 + torch.randn(T, hv, device=d))
    beta = torch.rand(T, hv, device=d)
    return q, k, v, g, beta

def table(name, fn):
    for _ in range(3): fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        for _ in range(5): fn()
        torch.cuda.synchronize()
    acc = collections.defaultdict(lambda: [0, 0.0])
    for e in p.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            a = acc[e.name[:90]]; a[0] += 1; a[1] += e.device_time
    tot = sum(v[1] for v in acc.values()) / 5
    print(f"## {name}: {tot:.1f} us of kernels a call")
    for n, (c, t) in sorted(acc.items(), key=lambda x: -x[1][1]):
        print(f"  {t/5:8.1f} us  x{c//5:<3} {n}")

for T, hk, hv in [(32768, 8, 16), (65536, 8, 16), (32768, 16, 32)]:
    q, k, v, g, beta = inputs(T, hk, hv)
    cu = torch.tensor([0, T], device="cuda", dtype=torch.int32)
    out = torch.empty_like(v); st = torch.zeros(1, hv, 128, 128, device="cuda")
    table(f"flashqla {T} {hk}/{hv}", lambda: qla(q[None], k[None], v[None], g[None], beta[None],
          output_final_state=True, cu_seqlens=cu.long()))
    table(f"gdn {T} {hk}/{hv}", lambda: gdn_prefill.prefill(q, k, v, g, beta, out, st, cu_seqlens=cu,
          state_layout="vk", max_seqlen=T))
