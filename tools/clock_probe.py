"""SM clock and power while each form of a 1x64K prefill (16/32) runs back to back for 2 s:
recompute_wu alone, the fused spine alone, the serial plan, the overlap plan (the launcher's split).

    python tools/clock_probe.py        (Hopper GPU; nvidia-smi sampled every 20 ms)

Asked by the overlap plan: is the spine slower beside stage 1 because the SM clock drops when all
SMs are busy?  Run 45: no (1950-1980 MHz in every phase, 608-692 W), so the slowdown is memory
traffic, not the clock.  Prints one row per phase: us per call (eager), median clock and power."""
import datetime
import statistics
import subprocess
import sys
import time

import torch

if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9:
    print("clock_probe: no Hopper GPU visible; nothing to measure.")
    sys.exit(0)

import gdn_prefill  # noqa: E402
from gdn_prefill import _ext, reference as ref  # noqa: E402

B, T, hk, hv = 1, 65536, 16, 32
x = ref.make_inputs([T] * B, hk, hv, seed=0, device="cuda", state="dense", l2norm_inputs=True)
ws = torch.empty(gdn_prefill.workspace_bytes(B * T, B, hv), dtype=torch.uint8, device="cuda")
out = torch.empty(B * T, hv, 128, dtype=torch.bfloat16, device="cuda")
sms = torch.cuda.get_device_properties(0).multi_processor_count   # as the launcher queries it
def call(stages, split=0):
    _ext._launch_stages(stages, x["q"], x["k"], x["v"], x["g"], x["beta"], out, x["state"],
                        cu_seqlens=x["cu_seqlens"], spine="wgmma", workspace=ws, fused=1, overlap_split=split)
phases = [("recompute_wu alone", lambda: call(("recompute_wu",))),
          ("spine alone", lambda: call(("spine",))),
          ("serial", lambda: call(("recompute_wu", "spine"))),
          ("overlap", lambda: call(("recompute_wu", "spine"), _ext._overlap_split_rule(B * T, B, hv, sms)))]
for _, f in phases:
    f()
torch.cuda.synchronize()
smi = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,clocks.sm,power.draw", "--format=csv,noheader,nounits",
                        "-lms", "20"], stdout=subprocess.PIPE, text=True)
time.sleep(1.0)
marks = []
for name, f in phases:
    torch.cuda.synchronize(); time.sleep(0.3)
    t0 = time.time(); n = 0
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    while time.time() - t0 < 2.0:
        for _ in range(20):
            f(); n += 1
        torch.cuda.synchronize()
    e1.record(); torch.cuda.synchronize()
    marks.append((name, t0 + 0.3, time.time(), e0.elapsed_time(e1) * 1e3 / n))
time.sleep(0.5)
smi.terminate(); lines = smi.communicate()[0].strip().splitlines()
samples = []
for ln in lines:
    ts, clk, pw = [s.strip() for s in ln.split(",")]
    t = datetime.datetime.strptime(ts, "%Y/%m/%d %H:%M:%S.%f").timestamp()
    samples.append((t, float(clk), float(pw)))
# nvidia-smi stamps samples with the host's wall clock, the clock the phases are marked with
print("| phase | us/call | SM MHz (median) | W (median) | samples |\n|---|---|---|---|---|")
for name, a, b, us in marks:
    s = [(c, p) for t, c, p in samples if a <= t <= b]
    if s:
        print(f"| {name} | {us:.1f} | {statistics.median(c for c, _ in s):.0f} | {statistics.median(p for _, p in s):.0f} | {len(s)} |")
    else:
        print(f"| {name} | {us:.1f} | - | - | 0 |")
