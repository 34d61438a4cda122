"""fp64: a segment's history cut where the summed log-decay passes tau (FlashQLA's auto-CP rule):
the error of the outputs against the exact recurrence, per gate regime, beside bf16's rounding."""
import torch, math, sys
torch.set_default_dtype(torch.float64)
T, H, K, C, SEG = 4096, 4, 128, 64, 16          # tokens, heads, dims, chunk, segment (chunks)

def run(q, k, v, g, b, t0, t1):
    S = torch.zeros(H, K, K); o = torch.empty(t1 - t0, H, K)
    for t in range(t0, t1):
        S = S * g[t].exp()[:, None, None]
        d = b[t][:, None] * (v[t] - torch.einsum("hkv,hk->hv", S, k[t]))
        S = S + k[t][:, :, None] * d[:, None, :]
        o[t - t0] = torch.einsum("hkv,hk->hv", S, q[t]) / math.sqrt(K)
    return o

def case(name, g, seed=0):
    torch.manual_seed(seed)
    q = torch.nn.functional.normalize(torch.randn(T, H, K), dim=-1)
    k = torch.nn.functional.normalize(torch.randn(T, H, K), dim=-1)
    v, b = torch.randn(T, H, K), torch.rand(T, H)
    exact = run(q, k, v, g, b, 0, T)
    dc = g.view(-1, C, H).sum(1)                 # [chunks, H] log-decay of each chunk
    for tau in (-10.0, -7.0):
        err, ws = 0.0, []
        for s in range(SEG, T // C, SEG):
            back = dc[:s].flip(0).cumsum(0)      # summed decay of the w chunks before s
            for h in range(H):
                hit = (back[:, h] < tau).nonzero()
                w = int(hit[0]) + 1 if len(hit) else s
                ws.append(w)
                t0 = (s - w) * C
                o = run(q[:, h:h+1].expand(-1, H, -1), k[:, h:h+1].expand(-1, H, -1), v[:, h:h+1].expand(-1, H, -1),
                        g[:, h:h+1].expand(-1, H), b[:, h:h+1].expand(-1, H), t0, (s + SEG) * C)[:, 0]
                e = (o[(s - (s - w)) * C:] - exact[s * C:(s + SEG) * C, h]).abs().max().item()
                err = max(err, e)
        print(f"| {name} | {g.mean().item():.4f} | {tau:g} | {sum(ws)/len(ws):.1f} / {max(ws)} | {err:.2e} | "
              f"{exact.abs().max().item():.2f} | {err / exact.abs().max().item():.1e} |", flush=True)

print("| gates | mean g a token | tau | warmup chunks mean / max | max abs error of o | max abs o | relative (bf16 rounds at 3.9e-03) |")
print("|---|---|---|---|---|---|---|")
torch.manual_seed(1)
for c in (3.0, 5.0, 6.0):
    case(f"logsigmoid({c:g} + randn)", torch.nn.functional.logsigmoid(c + torch.randn(T, H)))
# heads of mixed memory: per-head decay rates from fast to very slow
rates = torch.tensor([-0.3, -0.03, -0.003, -0.0003])
case("mixed heads (-0.3, -0.03, -0.003, -3e-4)", rates[None, :] * (1 + 0.1 * torch.randn(T, H)).clamp(min=0.5))
