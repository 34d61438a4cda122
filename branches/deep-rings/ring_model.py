"""Event model of the single plan's chunk pipeline (lab only): each role a process over the chunks,
each ring an mbarrier completion time.  `main` is 79069b5's protocol, `dr` the deep-rings branch.
For each, the chains' steady chunk time given every role's durations (us), and with random
durations a check that no wait is on a later event than it can see (no deadlock: every time is
finite) and that P(i) is written only after the chains' last MMA on P(i - P_SLOTS)."""
import random, sys

def run(proto, n, d):
    KQ = 3 if proto == "main" else 4
    PS = 3
    VT = 2
    INF = float("inf")
    # event times
    kq_full = [INF] * n; kq_empty = [INF] * n       # empty[i]: all consumers released chunk i
    vt_full = [INF] * n; vt_empty = [INF] * n
    gates_full = [INF] * n; gates_empty = [INF] * n
    rel = {r: [INF] * n for r in ("role", "norms", "chains")}
    vland = [INF] * n; role_tu = [INF] * n; tab = [INF] * n
    p_write = [INF] * n; p_last_read = [INF] * n
    chains_end = [INF] * n
    at = lambda arr, j: 0.0 if j < 0 else arr[j]
    # iterate to a fixed point (each role's loop is sequential; events only move later)
    for _ in range(6 * n + 10):
        # loads
        t = 0.0
        order = ([("kq", 0)] + [x for i in range(n) for x in ((("kq", i + 1),) if i + 1 < n else ()) + (("v", i),)]
                 if proto == "dr" else [x for i in range(n) for x in (("kq", i), ("v", i))])
        for kind, i in order:
            if kind == "kq":
                t = max(t, at(kq_empty, i - KQ)) + d["issue"]
                kq_full[i] = t + d["tma_kq"]
            else:
                t = max(t, at(vt_empty, i - VT)) + d["issue"]
                vland[i] = t + d["tma_v"]
        # norms
        t = 0.0
        for i in range(n):
            t = max(t, kq_full[i], at(gates_empty, i - VT)) + d["gates"] + d["sums"]
            rel["norms"][i] = t
            t += d["vote"]
            gates_full[i] = t
            if proto == "main":
                t = max(t, at(vt_empty, i - VT)) + d["table"]
                tab[i] = t
            elif i > 0:
                t = max(t, at(vt_empty, i - 1 - VT)) + d["table"]
                tab[i - 1] = t
        if proto == "dr" and n:
            t = max(t, at(vt_empty, n - 1 - VT)) + d["table"]
            tab[n - 1] = t
        # role
        t = 0.0
        for i in range(n):
            t = max(t, kq_full[i]) + d["products"]
            rel["role"][i] = t
            t = max(t, gates_full[i]) + d["folds"]
            if proto == "main":
                pass                              # P in KQ slot i: free since kq_empty[i - KQ]
            p_write[i] = t
            gates_empty[i] = t
            t += d["inverse"]
            t = max(t, at(vt_empty, i - VT)) + d["stage"]
            role_tu[i] = t
        # chains
        t = 0.0
        for i in range(n):
            kq_ready = kq_full[i]
            vt_full[i] = max(vland[i], role_tu[i], tab[i])
            t = max(t, kq_ready, vt_full[i]) + d["chain"]
            p_last_read[i] = t - d["chain_tail"]
            chains_end[i] = t
            rel["chains"][i] = t
        for i in range(n):
            kq_empty[i] = max(rel["role"][i], rel["norms"][i], rel["chains"][i])
            vt_empty[i] = chains_end[i] + d["store"]
    ok_p = all(p_write[i] >= p_last_read[i - PS] for i in range(PS, n)) if proto == "dr" else \
        all(p_write[i] >= kq_empty[i - KQ] for i in range(KQ, n))
    finite = all(x < INF for x in chains_end)
    steady = (chains_end[n - 1] - chains_end[n // 2]) / (n - 1 - n // 2)
    return steady, finite, ok_p

BASE = dict(issue=0.05, tma_kq=1.2, tma_v=1.0, gates=0.3, sums=1.2, vote=0.1, table=0.2, products=0.4,
            folds=0.5, inverse=0.9, stage=0.3, chain=2.9, chain_tail=0.6, store=0.4)

if __name__ == "__main__":
    for name, over in (("engine (sums 1.2)", {}), ("pre-normed main (sums 1.2)", {}),
                       ("pre-normed split (sums 0.6)", dict(sums=0.6)), ("no sums (draft)", dict(sums=0.0))):
        d = dict(BASE, **over)
        r = {p: run(p, 64, d) for p in ("main", "dr")}
        print(f"{name:30s} main {r['main'][0]:.2f} us/chunk  dr {r['dr'][0]:.2f}")
    rng = random.Random(1)
    bad = 0
    for trial in range(2000):
        d = {k: v * rng.uniform(0.2, 3.0) for k, v in BASE.items()}
        d["chain_tail"] = min(d["chain_tail"], d["chain"])
        n = rng.randint(1, 12)
        for p in ("main", "dr"):
            s, fin, okp = run(p, max(n, 3), d)
            if not (fin and okp):
                bad += 1
                print("FAIL", p, n, fin, okp)
    print("random trials failing:", bad)
