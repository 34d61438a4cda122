"""Host cost of one prefill() call, and where it goes: a tiny problem (64 tokens, 16/32 heads).

The host cost is measured while the GPU is held busy by a long sleep kernel queued first, so
every launch only enters the queue and the loop never waits for the GPU; after the loop the
sleep must still be running (checked), else the sample is thrown away.  (Timing bursts of
calls on an idle GPU that measured how fast the GPU drains 4 tiny kernels per call, not the host.)

Rows: prefill() reading its tensors through torch's DLPack exchange table (the default where
torch exports one) and through Python attributes (_ext._use_dlpack(False)); the _launch_stages
hook with 0..3 stages (the same validation, then only the named launches: the difference between
rows is the cost of one DSL launch wrapper); and the pieces of the attribute path on their own.
"""
import statistics
import time

import torch

import gdn_prefill
from gdn_prefill import _ext, bench
from gdn_prefill import reference as ref

inp = ref.make_inputs([64], 16, 32, seed=0, device="cuda", state="dense", l2norm_inputs=True)
out = torch.empty_like(inp["v"])
ws = torch.empty(gdn_prefill.workspace_bytes(64, 1, 32), dtype=torch.uint8, device="cuda")
args = (inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], out, inp["state"])
kw = dict(cu_seqlens=inp["cu_seqlens"], workspace=ws)
dev = inp["q"].device
named = (("q", inp["q"]), ("k", inp["k"]), ("v", inp["v"]), ("g", inp["g"]), ("beta", inp["beta"]),
         ("out", out), ("state", inp["state"]), ("cu_seqlens", inp["cu_seqlens"]), ("workspace", ws))
STAGES = ("recompute_wu", "spine", "fwd_o")
host_us = bench.host_cost_us   # median host us per call, the GPU kept busy


def gpu_us_idle_burst() -> float:
    """The idle-GPU measure: wall time per call of 100 back-to-back calls on an idle GPU."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(100):
        gdn_prefill.prefill(*args, **kw)
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / 100 * 1e6


def _ctx():
    with torch.cuda.device(dev):
        pass


def _tensor_reads():
    for _, x in named:
        x.dim(), x.dtype, x.data_ptr(), x.shape, x.stride()


nplan = len(gdn_prefill.explain(*args, **kw)["kernels"])
dl = _ext._use_dlpack(True)
rows = [(f"prefill() ({nplan} launches), {'DLPack table' if dl else 'no DLPack table: attribute'} reads",
         host_us(lambda: gdn_prefill.prefill(*args, **kw)))]
_ext._use_dlpack(False)
rows.append((f"prefill() ({nplan} launches), attribute reads", host_us(lambda: gdn_prefill.prefill(*args, **kw))))
_ext._use_dlpack(True)
_ext._host_dry_run(True)
dry = host_us(lambda: gdn_prefill.prefill(*args, **kw))
_ext._host_dry_run(False)
for n in range(4):   # the unfused plan's stages, 0..3 of them
    st = STAGES[:n]
    rows.append((f"_launch_stages, {n} launches",
                 host_us(lambda st=st: _ext._launch_stages(st, *args, fused=0, **kw))))
for st in (("recompute_wu",), ("recompute_wu", "spine")):   # the fused plan's two builds
    rows.append((f"_launch_stages, fused plan, {len(st)} launches",
                 host_us(lambda st=st: _ext._launch_stages(st, *args, fused=1, overlap_split=0, **kw))))
rows += [
    ("prefill(), launches skipped (_ext._host_dry_run): Python + validation + planning", dry),
    ("  torch.cuda.current_stream(dev)", host_us(lambda: torch.cuda.current_stream(dev))),
    ("  with torch.cuda.device(dev)", host_us(_ctx)),
    ("  dim/dtype/data_ptr/shape/stride x9", host_us(_tensor_reads)),
]
# the FLA-shaped layer (issue 35: what model code calls) and its steps on their own
q4, k4, v4, g4, b4 = (inp[n][None] for n in ("q", "k", "v", "g", "beta"))
cu = inp["cu_seqlens"]
st0 = inp["state"]
rows += [
    ("chunk_gated_delta_rule(initial_state, output_final_state, cu_seqlens)",
     host_us(lambda: gdn_prefill.chunk_gated_delta_rule(q4, k4, v4, g4, b4, initial_state=st0,
                                                        output_final_state=True, cu_seqlens=cu))),
    ("chunk_gated_delta_rule(no state, cu_seqlens)",
     host_us(lambda: gdn_prefill.chunk_gated_delta_rule(q4, k4, v4, g4, b4, cu_seqlens=cu))),
    ("chunk_gated_delta_rule(no state, no cu_seqlens)",
     host_us(lambda: gdn_prefill.chunk_gated_delta_rule(q4, k4, v4, g4, b4))),
    ("  prefill(), workspace=None (allocated per call)",
     host_us(lambda: gdn_prefill.prefill(*args, cu_seqlens=cu))),
    ("  _check_tensor x7", host_us(lambda: [_ext._check_tensor(x, "q") for x in (q4, k4, v4, g4, b4, st0, cu)])),
    ("  torch.empty_like(v4)", host_us(lambda: torch.empty_like(v4, memory_format=torch.contiguous_format))),
    ("  initial_state.to(float32, copy=True)", host_us(lambda: st0.to(torch.float32, copy=True))),
    ("  torch.zeros(state shape)", host_us(lambda: torch.zeros(st0.shape, dtype=torch.float32, device=dev))),
    ("  flatten(0, 1) x6", host_us(lambda: [x.flatten(0, 1) for x in (q4, k4, v4, g4, b4, v4)])),
    ("  torch.arange (cu_seqlens)", host_us(lambda: torch.arange(0, 128, 64, dtype=torch.int32, device=dev))),
]
idle = statistics.median(gpu_us_idle_burst() for _ in range(11))
print(f"| host cost, GPU kept busy ({bench.HOST_OVERHEAD_CALLS} calls x {bench.HOST_OVERHEAD_SAMPLES} samples, median) | us/call |")
print("|---|---|")
for name, us in rows:
    print(f"| {name} | {us:.1f} |")
per_launch = (rows[5][1] - rows[2][1]) / 3
print(f"| one DSL launch wrapper (3 launches - 0 launches) / 3 | {per_launch:.1f} |")
print(f"| (idle GPU, 100-call bursts: GPU-bound, not the host cost) | {idle:.1f} |")
