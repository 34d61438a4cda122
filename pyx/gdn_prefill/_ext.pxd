# The C-level entry of gdn-prefill, for other Cython / C++ extensions:
#
#     from gdn_prefill._ext cimport gdn_prefill_raw, gdn_workspace_bytes
#     from gdn_prefill.gdn_abi cimport gdn_problem_t, gdn_tensor_t, cudaStream_t, GDN_OK  # GDN_* codes
#
# Fill a gdn_problem_t (see include/gdn/gdn_abi.h: q, k, v, g, beta, out, state,
# cu_seqlens, state_indices as gdn_tensor_t {data, shape, stride in elements, rank,
# dtype = GDN_DTYPE_*}; rank 0 marks an absent state / state_indices; set `scale`
# yourself (the Python default is K^-1/2) and `use_qk_l2norm`; leave the workspace
# fields, has_state / use_state_indices and the launch fields (overlap, seg_chunks, ...)
# zeroed: they are derived), pass a device
# workspace of gdn_workspace_bytes(T, N, Hv) bytes (GDN_WORKSPACE_ALIGN_BYTES = 256-byte
# aligned), and call gdn_prefill_raw without the GIL.  `spine` is GDN_SPINE_AUTO /
# _SCALAR / _WGMMA and `state_layout` GDN_STATE_KV / _VK.  It runs every guard the
# Python API runs (it is the same code), then launches on `stream` for the *current*
# CUDA device (cudaSetDevice first); it never reads device memory nor synchronises, so
# it can be captured in a CUDA graph, and it is safe to call from several threads.
# Every plan launches on `stream` alone (with few sequences, the overlap plan: stage 1's workers
# and the spine as their programmatic dependent, explain()["overlap"]), so work queued on `stream`
# after the call waits for all of it.
# It returns GDN_OK (0) or a GDN_ERR_* status with a message naming the argument and
# the rule in `msg` (at most msg_cap - 1 bytes, always NUL-terminated when msg_cap > 0;
# 512 bytes always suffice); on an error nothing has been launched and nothing written.
# `chosen_spine` (may be NULL) receives the spine that ran (GDN_SPINE_SCALAR or
# GDN_SPINE_WGMMA), 0 when validation failed.  `problem` is not modified.
#
# Building a caller: put the directory that holds the installed `gdn_prefill` package
# on Cython's include path (the .pxd files ship inside the package), and
# <package>/include plus the CUDA toolkit's include directory on the C include path
# (gdn/gdn_abi.h, cuda_runtime.h).  Nothing is linked: the function pointers come from
# gdn_prefill._ext's C-API capsules (`__pyx_capi__`), imported when the caller's module
# is imported.  A C++ caller without Cython can fetch the same capsule itself:
#     PyCapsule_GetPointer(__pyx_capi__["gdn_prefill_raw"],
#         "int (gdn_problem_t *, int, int, void *, int64_t, cudaStream_t, int *, char *, size_t)")
# tests/cimport_example/ has one of each, built and run by tests/test_cimport_example.py.
from libc.stdint cimport int32_t, int64_t
from gdn_prefill.gdn_abi cimport gdn_problem_t, gdn_tensor_t, cudaStream_t

cdef int64_t gdn_workspace_bytes(int64_t T, int64_t N, int64_t Hv) noexcept nogil
cdef int gdn_prefill_raw(gdn_problem_t *problem, int spine, int state_layout,
                         void *workspace, int64_t workspace_bytes, cudaStream_t stream,
                         int *chosen_spine, char *msg, size_t msg_cap) noexcept nogil
