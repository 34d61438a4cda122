"""Type stubs for the Cython extension gdn_prefill._ext (source: pyx/gdn_prefill/_ext.pyx).

Keep in step with the .pyx: `python -m mypy.stubtest gdn_prefill._ext` compares the two.
The TypedDicts below describe explain()'s result; they exist for type checkers only.
"""
from typing import Literal, Protocol, TypeAlias, TypedDict, type_check_only

from torch import Tensor

# spine and state_layout are typed `str` (callers pass configuration strings through); an
# unknown value raises GdnArgumentError naming the argument.  The spine that ran is one of:
_RanSpineName: TypeAlias = Literal["scalar", "wgmma"]

SPINES: dict[str, int]
SPINE_NAMES: dict[int, str]
STATE_LAYOUTS: dict[str, int]
PLAN_NAMES: tuple[str, ...]
"""explain()["plan"]["name"] by the planner's code"""
# C-API capsules for cimport callers (see _ext.pxd): "gdn_prefill_raw", "gdn_workspace_bytes"
__pyx_capi__: dict[str, object]
__test__: dict[str, str]

@type_check_only
class _CudaStreamLike(Protocol):
    @property
    def cuda_stream(self) -> int: ...

@type_check_only
class KernelLaunch(TypedDict):
    name: str
    grid: tuple[int, ...]
    block: int | None
    cluster: int
    smem_bytes: int | None

@type_check_only
class Plan(TypedDict):
    spines: dict[str, str]
    """spine name -> "runs" or the guard that rejects it"""
    chosen: _RanSpineName
    fused_output: str
    """"runs" (two launches: the spine computes the output) or why the three-launch plan runs"""
    kernels: list[KernelLaunch]
    workspace_bytes: int
    chunk_slots: int
    overlap: str
    """"runs: ..." (stage 1 split around the spine: recompute_wu launches twice) or why the serial plan runs"""
    overlap_wu_ctas: int | None
    """the overlap plan's workers CTAs (recompute_wu_workers), or None"""
    checkpoints: str | None
    """the checkpoint interval and table width, or None without checkpoints"""
    initial_state: str
    """where the initial states come from: zeros, state (in place) or initial_state (", per sequence" with
    a has_initial_state mask)"""
    conversions: list[str]
    """the device conversions the call makes first (int64 indices to int32, an integer mask to bool)"""
    state_dtype: Literal["float32", "bfloat16", "float16", "float8_e4m3fn"] | None
    """the state pools' element type (the spine builds are its), or None without a pool"""
    plan: PlanChoice
    """the plan that runs, why, and the cost model's predictions"""

@type_check_only
class PlanChoice(TypedDict, total=False):
    name: Literal["unfused", "serial", "overlap", "segmented"]
    why: str
    predicted_us: dict[str, float]
    """the cost model's time of the serial and (where one fits) the segmented plan"""
    longest_chunks: int | None
    """chunks of the longest sequence the model assumed (None: several sequences, no max_seqlen)"""
    segments: int
    segment_chunks: int
    ctas: int

def compiled_variants() -> list[str]: ...
def workspace_bytes(T: int, N: int, Hv: int, fused: bool | None = None) -> int: ...
def workspace_layout(
    T: int, N: int, Hv: int, fused: bool = True, seg_chunks: int = 0
) -> dict[str, tuple[int, tuple[int, ...], str]]: ...
def prefill(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    g: Tensor,
    beta: Tensor,
    out: Tensor,
    state: Tensor | None = None,
    *,
    cu_seqlens: Tensor | None = None,
    state_indices: Tensor | None = None,
    state_layout: str = "kv",
    scale: float | None = None,
    use_qk_l2norm: bool = False,
    spine: str = "auto",
    stream: _CudaStreamLike | int | None = None,
    workspace: Tensor | None = None,
    checkpoint_every: int | None = None,
    checkpoints: Tensor | None = None,
    initial_state: Tensor | None = None,
    has_initial_state: bool | Tensor = True,
    max_seqlen: int | None = None,
    checkpoint_pool: Tensor | None = None,
    batch_invariant: bool = False,
) -> _RanSpineName: ...
def explain(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    g: Tensor,
    beta: Tensor,
    out: Tensor,
    state: Tensor | None = None,
    *,
    cu_seqlens: Tensor | None = None,
    state_indices: Tensor | None = None,
    state_layout: str = "kv",
    scale: float | None = None,
    use_qk_l2norm: bool = False,
    spine: str = "auto",
    stream: _CudaStreamLike | int | None = None,
    workspace: Tensor | None = None,
    checkpoint_every: int | None = None,
    checkpoints: Tensor | None = None,
    initial_state: Tensor | None = None,
    has_initial_state: bool | Tensor = True,
    max_seqlen: int | None = None,
    check_device: bool = True,
    checkpoint_pool: Tensor | None = None,
    batch_invariant: bool = False,
) -> Plan: ...
