# Cython view of include/gdn/gdn_abi.h and include/gdn/gdn_kernels.h.
from libc.stdint cimport int32_t, int64_t

cdef extern from "cuda_runtime.h" nogil:
    ctypedef void *cudaStream_t
    ctypedef int cudaError_t
    const char *cudaGetErrorString(cudaError_t err)
    const char *cudaGetErrorName(cudaError_t err)
    cudaError_t cudaGetDevice(int *device)
    cudaError_t cudaDeviceGetAttribute(int *value, int attr, int device)
    cudaError_t cudaGetLastError()
    cdef int cudaDevAttrComputeCapabilityMajor
    cdef int cudaDevAttrComputeCapabilityMinor
    cdef int cudaDevAttrMultiProcessorCount
    # the overlap plan's side stream and fork / join events
    ctypedef void *cudaEvent_t
    enum cudaStreamCaptureStatus:
        cudaStreamCaptureStatusNone
    cdef unsigned int cudaStreamNonBlocking
    cdef unsigned int cudaEventDisableTiming
    cudaError_t cudaDeviceGetStreamPriorityRange(int *least, int *greatest)
    cudaError_t cudaStreamCreateWithPriority(cudaStream_t *stream, unsigned int flags, int priority)
    cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags)
    cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
    cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags)
    cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus *status)
    cudaError_t cudaMemsetAsync(void *ptr, int value, size_t count, cudaStream_t stream)

cdef extern from "gdn/gdn_abi.h" nogil:
    enum:
        GDN_CHUNK
        GDN_HEAD_DIM_K
        GDN_HEAD_DIM_V
        GDN_SCALAR_SPINE_VBLOCK
        GDN_SCALAR_SPINE_THREADS
        GDN_WGMMA_SPINE_VBLOCK
        GDN_RS_SPINE_VBLOCK
        GDN_SM_COUNT
        GDN_WGMMA_WG1_MAX_CTAS
        GDN_RS_SOLO_WAVE_NS
        GDN_RS_DUAL_WAVE_NS
        GDN_RS_CTA_NS
        GDN_RS_SPINE_DUAL_WG
        GDN_SINGLE_LAT_PCT
        GDN_COMPOSE_COLS
        GDN_MODEL_WU_SM_NS
        GDN_MODEL_CHAIN_NS
        GDN_MODEL_SEG_CHAIN_NS
        GDN_MODEL_PASS_NS
        GDN_MODEL_MAPS_NS
        GDN_MODEL_COMPOSE_NS
        GDN_MODEL_LAUNCH_NS
        GDN_MODEL_OVERLAP_CHAIN_PCT
        GDN_MODEL_OVERLAP_NS
        GDN_SEG_MAX_SEGMENTS
        GDN_MAP_CUT_LOG_DECAY
        GDN_SEG_MAX_CTAS
        GDN_TMA_ALIGN_BYTES
        GDN_WORKSPACE_ALIGN_BYTES
        GDN_MAX_RANK
        GDN_MAX_SEQUENCES
        GDN_ORDER_MAX_SEQS
        GDN_OVERLAP_MIN_SLOTS
        GDN_DTYPE_BF16
        GDN_DTYPE_F16
        GDN_DTYPE_F32
        GDN_DTYPE_I32
        GDN_DTYPE_F8E4M3
        GDN_DTYPE_U8
        GDN_DTYPE_BOOL
        GDN_SPINE_AUTO
        GDN_SPINE_SCALAR
        GDN_SPINE_WGMMA
        GDN_STATE_KV
        GDN_STATE_VK
        GDN_OK
        GDN_ERR_DTYPE
        GDN_ERR_SHAPE
        GDN_ERR_LAYOUT
        GDN_ERR_ALIAS
        GDN_ERR_SPINE
        GDN_ERR_ARGUMENT
        GDN_ERR_LAUNCH
        GDN_ERR_UNKNOWN_VARIANT

    ctypedef struct gdn_tensor_t:
        void *data
        int64_t shape[4]
        int64_t stride[4]
        int32_t rank
        int32_t dtype

    ctypedef struct gdn_problem_t:
        gdn_tensor_t q, k, v, g, beta, out
        gdn_tensor_t state, cu_seqlens, state_indices, checkpoints, initial_state
        gdn_tensor_t gcum, rq, rk, w, u, vnew, h, pqk, tu, ready, order
        float scale
        int32_t use_qk_l2norm
        int32_t has_state
        int32_t use_state_indices
        int32_t checkpoint_chunks
        int32_t zero_initial
        int32_t state_in
        int32_t overlap
        gdn_tensor_t maps, seg_state
        int32_t seg_chunks
        int64_t max_seqlen
        int32_t maps_all
        gdn_tensor_t beta32
        gdn_tensor_t has_initial
        gdn_tensor_t checkpoint_pool
        int32_t batch_invariant
        int32_t wu_ctas

cdef extern from "gdn/gdn_kernels.h" nogil:
    int gdn_num_variants()
    const char *gdn_variant_name(int id)
    int gdn_variant_id(const char *name)
    int gdn_load_modules()
    int gdn_launch_variant(int id, const gdn_problem_t *problem, cudaStream_t stream)
