#!/usr/bin/env bash
# Run 173q: run173.sh phase 1 cut to the session's last 340 s of device time (inst, smoke, the
# timing with its output / state differences against prefill(), then the suite's fused rows if
# time is left).  Same predictions as run173.sh.
set -u
source tools/device_lib.sh
inst build/aot_ffi ffi
step smoke 45 python3 - <<'PY'
import torch, gdn_prefill
from gdn_prefill import _ext, reference as ref
for lens, l2 in (([1, 63, 64, 65, 0, 200], False), ([300, 1000], True)):
    inp = ref.make_inputs(lens, 2, 4, seed=1, device="cuda", state="dense", l2norm_inputs=not l2,
                          beta_dtype=torch.bfloat16)
    T = sum(lens)
    for b in ("fused", "fused_prefill_r176_betabf16_kv"):
        out = torch.full_like(inp["v"], float("nan"))
        st = inp["state"].clone()
        ws = torch.empty(gdn_prefill.workspace_bytes(T, len(lens), 4), dtype=torch.uint8, device="cuda")
        _ext._launch_stages((b,), inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], out, st,
                            cu_seqlens=inp["cu_seqlens"], spine="wgmma", workspace=ws, fused=1, overlap_split=0,
                            use_qk_l2norm=l2)
        torch.cuda.synchronize()
        with torch.device("cuda"):
            o_ref, s_ref = ref.chunked(inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"],
                                       cu_seqlens=inp["cu_seqlens"], state=inp["state"], use_qk_l2norm=l2)
        print(b, lens, "finite", bool(torch.isfinite(out).all()), "err o %.3e state %.3e"
              % (ref.rel_err(out.double(), o_ref), ref.rel_err(st.double(), s_ref)))
PY
tail -4 "$OUT/smoke.log"
grep -q "err o" "$OUT/smoke.log" || exit 0
step bench 100 python3 benchmarks/bench_fused.py --heads 16/32,4/8 --reps 15 --shapes 8x4K,4x2K,1x8K \
  --extra fused_prefill_r176_betabf16_kv
grep -E "^\|" "$OUT/bench.log"
step suite 60 python3 -m pytest -m gpu tests/test_gpu_prefill.py -k "fused and (form or checkpoints)" -q \
  -p no:cacheprovider -rfE -x
grep -hE "^(FAILED|ERROR)|passed|failed" "$OUT/suite.log" | tail -4
echo "total $((SECONDS - T0)) s"
