"""Run 98: is the full harness's slower median (run 93: 8x4K p10 669, median 721) a clock that drops
under sustained load?  Per-replay time series of gdn:wgmma graphs (3 rotated sets, queued as the
harness does) with nvidia-smi sampling SM clock / power / temperature every 25 ms.
Segments: cold (after 3 s idle), right after 1.5 s of gdn:scalar, and a second cold one."""
import statistics, subprocess, sys, time
import torch
from gdn_prefill import bench as B

def graphs_for(impl, case, sets, cu):
    calls, _ = B._calls(impl, case, sets, cu, False)
    for c in calls: c()
    torch.cuda.synchronize()
    pool = torch.cuda.graph_pool_handle(); gs = []
    for c in calls:
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, pool=pool): c()
        gs.append(g)
    for g in gs: g.replay()
    torch.cuda.synchronize()
    return gs

def series(gs, reps):
    t0 = time.time()
    ts = B.queued_graph_times(lambda i: gs[i].replay(), len(gs), reps)
    return t0, time.time(), ts

def heat(gs, seconds):
    t_end = time.time() + seconds
    while time.time() < t_end:
        for i in range(30): gs[i % len(gs)].replay()
        torch.cuda.synchronize()

smi = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu",
                        "--format=csv,noheader,nounits", "-lms", "25"], stdout=subprocess.PIPE, text=True)
segs = []
for shape in sys.argv[1:] or ["8x4K"]:
    case = B.Case(shape, tuple(B.parse_shape(shape)), 16, 32)
    n_sets = B.rotation_sets(B.hbm_bytes(case.T, case.N, case.Hk, case.Hv))
    sets = [B._make_set(case, i, normed=True) for i in range(n_sets)]
    cu = B._cu(case)
    gw = graphs_for("gdn:wgmma", case, sets, cu)
    gsc = graphs_for("gdn:scalar", case, sets, cu)
    for tag in ("cold", "after-scalar", "cold2"):
        time.sleep(3.0)
        if tag == "after-scalar":
            heat(gsc, 1.5)
        a, b, ts = series(gw, 1500)
        segs.append((shape, tag, a, b, ts))
    del gw, gsc, sets
    torch.cuda.empty_cache()
time.sleep(0.2)
smi.terminate()
samples = []
for line in smi.stdout.read().splitlines():
    try:
        stamp, clk, pw, temp = [x.strip() for x in line.split(",")]
        t = time.mktime(time.strptime(stamp.split(".")[0], "%Y/%m/%d %H:%M:%S")) + float("0." + stamp.split(".")[1])
        samples.append((t, int(clk), float(pw), int(temp)))
    except Exception:
        pass
print("| shape | segment | p10 | median | p90 | medians of 10 blocks of 150 replays | SM MHz min/med | W max | °C |")
print("|---|---|---|---|---|---|---|---|---|")
for shape, tag, a, b, ts in segs:
    q = statistics.quantiles(ts, n=10)
    blocks = [statistics.median(ts[i:i + 150]) for i in range(0, len(ts), 150)]
    win = [s for s in samples if a - 0.05 <= s[0] <= b + 0.05]
    clk = f"{min(s[1] for s in win)}/{statistics.median(s[1] for s in win):.0f}" if win else "-"
    pw = f"{max(s[2] for s in win):.0f}" if win else "-"
    tc = f"{max(s[3] for s in win)}" if win else "-"
    print(f"| {shape} | {tag} | {q[0]:.1f} | {statistics.median(ts):.1f} | {q[-1]:.1f} | "
          + " ".join(f"{x:.0f}" for x in blocks) + f" | {clk} | {pw} | {tc} |")
import json, os
json.dump(dict(segments=[dict(shape=s, seg=t, t0=a, t1=b, us=ts) for s, t, a, b, ts in segs], smi=samples),
          open(os.path.join(os.environ.get("OUT", "/tmp"), "series.json"), "w"))
