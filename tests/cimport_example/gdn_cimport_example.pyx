# cython: language_level=3
"""How another Cython extension calls gdn-prefill: no torch, no GIL, raw pointers.

    from gdn_prefill._ext cimport gdn_prefill_raw, gdn_workspace_bytes
    from gdn_prefill.gdn_abi cimport gdn_problem_t, gdn_tensor_t, cudaStream_t, GDN_OK, ...

Build it with the installed package's parent directory on Cython's include path (for the
.pxd files) and `<site-packages>/gdn_prefill/include` plus the CUDA toolkit's include
directory on the C include path (for gdn/gdn_abi.h and cuda_runtime.h); nothing needs to
be linked: gdn_prefill_raw is reached through gdn_prefill._ext's C-API capsule, which the
generated module init imports.  tests/test_cimport_example.py builds and runs this file.

A tensor is described as (data_ptr, shape, strides, dtype_code) with strides in elements
and dtype_code one of the GDN_DTYPE_* values below, or None for an absent tensor.
"""
from libc.stdint cimport int64_t, uintptr_t
from libc.string cimport memset

from gdn_prefill._ext cimport gdn_prefill_raw, gdn_workspace_bytes
from gdn_prefill.gdn_abi cimport (
    gdn_problem_t, gdn_tensor_t, cudaStream_t, GDN_MAX_RANK, GDN_HEAD_DIM_K,
    GDN_DTYPE_BF16, GDN_DTYPE_F16, GDN_DTYPE_F32, GDN_DTYPE_I32,
    GDN_SPINE_AUTO, GDN_SPINE_SCALAR, GDN_SPINE_WGMMA, GDN_STATE_KV, GDN_STATE_VK,
    GDN_OK, GDN_ERR_DTYPE, GDN_ERR_SHAPE, GDN_ERR_LAYOUT, GDN_ERR_ALIAS, GDN_ERR_SPINE,
    GDN_ERR_ARGUMENT, GDN_ERR_LAUNCH, GDN_ERR_UNKNOWN_VARIANT,
)

DTYPES = {"bfloat16": GDN_DTYPE_BF16, "float16": GDN_DTYPE_F16, "float32": GDN_DTYPE_F32, "int32": GDN_DTYPE_I32}
SPINES = {"auto": GDN_SPINE_AUTO, "scalar": GDN_SPINE_SCALAR, "wgmma": GDN_SPINE_WGMMA}
STATE_LAYOUTS = {"kv": GDN_STATE_KV, "vk": GDN_STATE_VK}
STATUS = {"GDN_OK": GDN_OK, "GDN_ERR_DTYPE": GDN_ERR_DTYPE, "GDN_ERR_SHAPE": GDN_ERR_SHAPE,
          "GDN_ERR_LAYOUT": GDN_ERR_LAYOUT, "GDN_ERR_ALIAS": GDN_ERR_ALIAS, "GDN_ERR_SPINE": GDN_ERR_SPINE,
          "GDN_ERR_ARGUMENT": GDN_ERR_ARGUMENT, "GDN_ERR_LAUNCH": GDN_ERR_LAUNCH,
          "GDN_ERR_UNKNOWN_VARIANT": GDN_ERR_UNKNOWN_VARIANT}

cdef enum:
    MSG_CAP = 512


cdef int _fill(gdn_tensor_t *t, object desc) except -1:
    cdef int i
    memset(t, 0, sizeof(gdn_tensor_t))
    if desc is None:
        return 0  # rank 0: absent
    ptr, shape, strides, dtype = desc
    if len(shape) != len(strides) or not 1 <= len(shape) <= GDN_MAX_RANK:
        raise ValueError(f"a tensor has 1 to {GDN_MAX_RANK} dims and one stride per dim")
    t.data = <void *><uintptr_t>ptr
    t.rank = len(shape)
    t.dtype = dtype
    for i in range(t.rank):
        t.shape[i] = shape[i]
        t.stride[i] = strides[i]
    return 0


def workspace_bytes(int64_t T, int64_t N, int64_t Hv):
    return gdn_workspace_bytes(T, N, Hv)


def run(q, k, v, g, beta, out, state=None, cu_seqlens=None, state_indices=None, *,
        int spine=GDN_SPINE_AUTO, int state_layout=GDN_STATE_KV, float scale=GDN_HEAD_DIM_K ** -0.5,
        bint use_qk_l2norm=False, uintptr_t workspace=0, int64_t workspace_bytes=0, uintptr_t stream=0,
        size_t msg_cap=MSG_CAP, bint raw_message=False):
    """Fill a gdn_problem_t and call gdn_prefill_raw without the GIL.

    Returns (status, message, chosen_spine).  The workspace fields of the problem are left
    zeroed (gdn_prefill_raw carves them from `workspace`); `scale` must be set by the caller
    (the Python API's default is K^-1/2).  With raw_message, `message` is the whole 512-byte
    buffer (pre-filled with 0x7f) as bytes, to show that a short msg_cap truncates the
    message and nothing is written past it.
    """
    cdef gdn_problem_t p
    cdef char msg[MSG_CAP]
    cdef int rc, chosen = -1
    if msg_cap > MSG_CAP:
        raise ValueError("msg_cap: at most 512")
    memset(&p, 0, sizeof(p))
    _fill(&p.q, q)
    _fill(&p.k, k)
    _fill(&p.v, v)
    _fill(&p.g, g)
    _fill(&p.beta, beta)
    _fill(&p.out, out)
    _fill(&p.state, state)
    _fill(&p.cu_seqlens, cu_seqlens)
    _fill(&p.state_indices, state_indices)
    p.scale = scale
    p.use_qk_l2norm = use_qk_l2norm
    memset(msg, 0x7f, MSG_CAP)
    with nogil:
        rc = gdn_prefill_raw(&p, spine, state_layout, <void *>workspace, workspace_bytes,
                             <cudaStream_t>stream, &chosen, msg, msg_cap)
    if raw_message:
        return rc, msg[:MSG_CAP], chosen
    return rc, msg[:msg_cap].split(b"\0", 1)[0].decode(), chosen
