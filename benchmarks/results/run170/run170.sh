#!/usr/bin/env bash
# Run 170: issue 42's fused kernel (cute_kernels/fused.py, branch fused-kernel), its first run.
# Objects: build/aot_fk (built from the branch on the CPU machine).
# phase 1: a smoke call under a timeout (a protocol bug hangs: the timeout kills it), the GPU suite's
#   fused rows (every input form, checkpoints, initial states, bf16 pools, determinism), the hard
#   inputs against the oracle and FLA, then the timing against prefill()'s plan.
# phase 2: compute-sanitizer (memcheck, racecheck, synccheck) over the sanitizer case, fused calls
#   included.
# Prediction (benchmarks/NOTES.md, "The fused kernel's plan"): ~400 us at 8x4K 16/32 (prefill()
# 590-601), paced by the role at ~3.0-3.4 us per chunk; the chains' serialised wgmmas cost nothing
# there.  Errors within the suite's bound, bits deterministic.
set -u
phase=${1:-1}
source tools/device_lib.sh
inst build/aot_fk fk
case $phase in
1) step smoke 60 python3 - <<'PY'
import torch, gdn_prefill
from gdn_prefill import _ext, reference as ref
for lens, l2 in (([64], False), ([1, 63, 64, 65, 0, 200], False), ([300, 1000], True)):
    inp = ref.make_inputs(lens, 2, 4, seed=1, device="cuda", state="dense", l2norm_inputs=not l2,
                          beta_dtype=torch.bfloat16)
    T = sum(lens)
    out = torch.full_like(inp["v"], float("nan"))
    st = inp["state"].clone()
    ws = torch.empty(gdn_prefill.workspace_bytes(T, len(lens), 4), dtype=torch.uint8, device="cuda")
    _ext._launch_stages(("fused",), inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], out, st,
                        cu_seqlens=inp["cu_seqlens"], spine="wgmma", workspace=ws, fused=1, overlap_split=0,
                        use_qk_l2norm=l2)
    torch.cuda.synchronize()
    with torch.device("cuda"):
        o_ref, s_ref = ref.chunked(inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], cu_seqlens=inp["cu_seqlens"],
                                   state=inp["state"], use_qk_l2norm=l2)
    print(lens, "finite", bool(torch.isfinite(out).all()), "err o %.3e state %.3e"
          % (ref.rel_err(out.double(), o_ref), ref.rel_err(st.double(), s_ref)))
PY
   cat "$OUT/smoke.log" | tail -6
   grep -q "err o" "$OUT/smoke.log" || exit 0
   step suite 240 python3 -m pytest -m gpu tests/test_gpu_prefill.py -k fused -q -p no:cacheprovider -rfE -x
   grep -hE "^(FAILED|ERROR)|passed|failed" "$OUT/suite.log" | tail -6
   step bench 150 python3 benchmarks/bench_fused.py --heads 16/32,4/8
   grep -E "^\|" "$OUT/bench.log"
   step hard 120 python3 -m pytest -m gpu tests/test_numerics_hard.py -k fused -q -p no:cacheprovider -rfE
   grep -hE "^(FAILED|ERROR)|passed|failed" "$OUT/hard.log" | tail -6
   echo "total $((SECONDS - T0)) s" ;;
2) step san 500 python3 -m pytest -m gpu tests/test_gpu_sanitizer.py -q -p no:cacheprovider -rfE
   grep -hE "^(FAILED|ERROR)|passed|failed|hazard|ERROR SUMMARY" "$OUT/san.log" | tail -8
   echo "total $((SECONDS - T0)) s" ;;
esac
