# The C-level entry of gdn-prefill, for other Cython / C++ extensions:
#
#     from gdn_prefill._ext cimport gdn_prefill_raw, gdn_workspace_bytes, gdn_problem_t
#
# Fill a gdn_problem_t (see include/gdn/gdn_abi.h: q, k, v, g, beta, out, state,
# cu_seqlens, state_indices; leave the workspace fields zeroed), pass a device
# workspace of gdn_workspace_bytes(T, N, Hv) bytes (256-byte aligned), and call
# gdn_prefill_raw without the GIL.  It runs every guard the Python API runs (it is
# the same code), then launches on `stream`.  It returns GDN_OK (0) or a GDN_ERR_*
# status with a message naming the argument and the rule in `msg`; on an error
# nothing has been launched and nothing written.  `chosen_spine` receives the
# spine that ran (GDN_SPINE_SCALAR or GDN_SPINE_WGMMA).
from libc.stdint cimport int32_t, int64_t
from gdn_prefill.gdn_abi cimport gdn_problem_t, gdn_tensor_t, cudaStream_t

cdef int64_t gdn_workspace_bytes(int64_t T, int64_t N, int64_t Hv) noexcept nogil
cdef int gdn_prefill_raw(gdn_problem_t *problem, int spine, int state_layout,
                         void *workspace, int64_t workspace_bytes, cudaStream_t stream,
                         int *chosen_spine, char *msg, size_t msg_cap) noexcept nogil
