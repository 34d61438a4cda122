"""The benchmark's environment: package versions, the driver, the spines compiled into this
build, and the run's metadata that every result file carries (gdn_prefill.bench)."""
from __future__ import annotations

import datetime
import sys

from .cases import varlen_lengths

# The peers timed beside gdn: name -> (its distribution, the module whose chunk_gated_delta_rule is
# called; skipped, with the reason, where it does not import).
PEERS = {"fla": ("fla-core", "fla.ops.gated_delta_rule"),
         "flashinfer": ("flashinfer-python", "flashinfer.gdn_prefill"),
         "flashqla": ("flash-qla", "flash_qla")}


def _version(dist: str, module: str | None = None):
    try:
        from importlib.metadata import version
        return version(dist)
    except Exception:
        pass
    try:
        import importlib
        return getattr(importlib.import_module(module or dist), "__version__", "unknown")
    except Exception:
        return None


def peer_versions() -> dict:
    """Each peer's installed version (None where it is not installed), by name."""
    return {name: _version(dist, module.split(".")[0]) for name, (dist, module) in PEERS.items()}


def _driver() -> str | None:
    import subprocess
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version,clocks.max.sm", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
    except Exception:
        return None


def compiled_spines() -> list[str]:
    """Spines with a 'kv' variant in this build, from gdn_prefill.compiled_variants()."""
    import gdn_prefill
    from gdn_prefill import _ext
    out = []
    for v in gdn_prefill.compiled_variants():
        if v.startswith("spine_") and v.endswith("_kv"):
            s = v[len("spine_"):-len("_kv")]
            if s in _ext.SPINES and s not in out:   # spine_wgmma_wg2_kv is a build of "wgmma"
                out.append(s)
    return out


METHODOLOGY = ("one process, implementations timed one after another on the same inputs; inputs rotated among "
               "n_sets buffer sets (>= 3 and >= 4x L2 in all; fewer only where 3 would take over a quarter of the GPU memory and one set alone is >= 4x L2); warm-up (autotune/JIT) outside timing; each "
               "implementation runs its own calls for warm_s seconds before its timed repetitions (the card's "
               "sustained, power-limited clock, not its first boost); "
               "graph = one call per set captured in a CUDA graph, replayed round-robin; eager = the Python call "
               "round-robin; CUDA events around each repetition, median of the repetitions; FLA's cached chunk indices "
               "stay warm (one cu_seqlens object per case, as across the layers of one forward); inputs converted "
               "outside timing (FLA: [1,T,H,D] views, int64 cu_seqlens + cu_seqlens_cpu; FlashInfer: alpha=exp(g), "
               "state [N,Hv,V,K], output/output_state preallocated; gdn: out/state/workspace preallocated, "
               "max_seqlen given as an engine knows it)")


def _meta(args, cases) -> dict:
    import torch
    props = torch.cuda.get_device_properties(0)
    try:
        import gdn_prefill
        variants = gdn_prefill.compiled_variants()
    except Exception as e:  # the extension may not import; FLA can still be timed
        variants = f"unavailable: {e}"
    return dict(
        card=torch.cuda.get_device_name(0), sms=props.multi_processor_count,
        l2_bytes=getattr(props, "L2_cache_size", None), memory_bytes=getattr(props, "total_memory", None),
        driver=_driver(),
        date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        torch=torch.__version__, cuda=torch.version.cuda, python=sys.version.split()[0],
        gdn_prefill=_version("gdn-prefill", "gdn_prefill"), **peer_versions(), compiled_variants=variants,
        peak_tflops=args.peak_tflops, peak_tbps=args.peak_tbps, use_qk_l2norm=args.qk_l2norm,
        state_pool=args.pool, gates=args.gates, quick=args.quick, modes=args.modes, warm_s=getattr(args, "warm_s", None), cases=[dict(name=c.name, lens=list(c.lens) if c.N <= 32 else None,
                                                        T=c.T, N=c.N, Hk=c.Hk, Hv=c.Hv) for c in cases],
        varlen_lengths=varlen_lengths(), methodology=METHODOLOGY,
        flop_formula="FLOP/token = Hv*(6*K*V + 2*C*(3*K + 2*V) + C^2/3), C = 64",
        byte_formula="T*(2*Hk*K + Hv*V)*2 + T*Hv*(4+4) + T*Hv*V*2 + 4*(N+1) + 2*N*Hv*K*V*4",
    )
