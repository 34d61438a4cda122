"""Run one prefill from an installed wheel (not the source tree) and check it against the oracle.

    python -m build --wheel --no-isolation --skip-dependency-check --outdir /tmp/dist .
    pip install --no-deps --target /tmp/wheelsite /tmp/dist/*.whl
    cd /tmp && PYTHONPATH=/tmp/wheelsite python /path/to/tools/wheel_smoke.py
"""
import sys

import torch

import gdn_prefill
from gdn_prefill import reference as ref

print("gdn_prefill from", gdn_prefill.__file__)
inp = ref.make_inputs([300, 65, 1], 2, 4, seed=42, device="cuda", state="pool", pad_every=0, l2norm_inputs=True)
out = torch.full_like(inp["v"], float("nan"))
state = inp["state"].clone()
spine = gdn_prefill.prefill(inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], out, state,
                            cu_seqlens=inp["cu_seqlens"], state_indices=inp["state_indices"])
torch.cuda.synchronize()
with torch.device("cuda"):
    o_ref, s_ref = ref.chunked(inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], cu_seqlens=inp["cu_seqlens"],
                               state=inp["state"], state_indices=inp["state_indices"])
e_o, e_s = ref.rel_err(out.double(), o_ref), ref.rel_err(state.double(), s_ref)
print(f"wheel prefill: spine={spine} rel err o {e_o:.3e} state {e_s:.3e}")
sys.exit(0 if (e_o <= 1e-2 and e_s <= 1e-2) else 1)
