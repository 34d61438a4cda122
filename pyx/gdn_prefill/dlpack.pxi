# Tensors from Python: torch's DLPack exchange table, _fill, the device codes.
# (Included by _ext.pyx: one module, one namespace; the order of the includes is the order of
# definition.)

# ----------------------------------------------------------------------------- torch side
# A tensor's metadata read through Python attributes (dim, dtype, data_ptr, shape, stride) costs
# ~0.7 us per tensor (6.0 us for nine, a fifth of prefill()'s host time).  torch >= 2.10
# exports DLPack's C exchange table on its tensor type (`__dlpack_c_exchange_api__`, DLPack 1.x):
# dltensor_from_py_object_no_sync fills a borrowed DLTensor in C (no allocation, no reference
# taken: valid while the caller holds the tensor, which it does for the whole call) and
# current_work_stream returns torch's current stream of a device.  The declarations below are
# that ABI's layout (dlpack.h, DLPack 1.x: the version header, then the function pointers).
cdef extern from *:
    """
    typedef struct { int32_t device_type; int32_t device_id; } gdn_dl_device_t;
    typedef struct { uint8_t code; uint8_t bits; uint16_t lanes; } gdn_dl_dtype_t;
    typedef struct {
        void *data; gdn_dl_device_t device; int32_t ndim; gdn_dl_dtype_t dtype;
        int64_t *shape; int64_t *strides; uint64_t byte_offset;
    } gdn_dl_tensor_t;
    typedef struct {
        uint32_t major; uint32_t minor; void *prev_api;
        void *managed_tensor_allocator;
        void *managed_tensor_from_py_object_no_sync;
        void *managed_tensor_to_py_object_no_sync;
        int (*dltensor_from_py_object_no_sync)(void *py_object, gdn_dl_tensor_t *out);
        int (*current_work_stream)(int32_t device_type, int32_t device_id, void **out_stream);
    } gdn_dl_exchange_api_t;
    """
    ctypedef struct gdn_dl_device_t:
        int32_t device_type
        int32_t device_id
    ctypedef struct gdn_dl_dtype_t:
        uint8_t code
        uint8_t bits
        uint16_t lanes
    ctypedef struct gdn_dl_tensor_t:
        void *data
        gdn_dl_device_t device
        int32_t ndim
        gdn_dl_dtype_t dtype
        int64_t *shape
        int64_t *strides
        uint64_t byte_offset
    ctypedef struct gdn_dl_exchange_api_t:
        uint32_t major
        uint32_t minor
        int (*dltensor_from_py_object_no_sync)(void *py_object, gdn_dl_tensor_t *out) noexcept
        int (*current_work_stream)(int32_t device_type, int32_t device_id, void **out_stream) noexcept

cdef enum:
    DL_INT = 0              # DLPack type codes and the device type of CUDA memory
    DL_UINT = 1
    DL_FLOAT = 2
    DL_BFLOAT = 4
    DL_BOOL = 6             # (DLPack: kDLBool, 8 bits)
    DL_FLOAT8_E4M3FN = 10   # (DLPack 1.1: kDLFloat8_e4m3fn, 8 bits)
    DL_CPU = 1
    DL_CUDA = 2

cdef object _torch = None                        # the torch module, imported by the first call
cdef const gdn_dl_exchange_api_t *_dl = NULL     # torch's exchange table (NULL: torch has none)
cdef object _dl_type = None                      # the exact type it serves (torch.Tensor)
cdef bint _dl_on = True                          # test hook: _use_dlpack(False) reads attributes
cdef dict _DTYPES = {}


cdef object _torch_init():
    """Import torch once; find its DLPack exchange table (major version 1, both functions)."""
    global _torch, _dl, _dl_type
    import torch
    cdef const gdn_dl_exchange_api_t *api
    _DTYPES.update({torch.bfloat16: GDN_DTYPE_BF16, torch.float16: GDN_DTYPE_F16,
                    torch.float32: GDN_DTYPE_F32, torch.int32: GDN_DTYPE_I32, torch.uint8: GDN_DTYPE_U8,
                    torch.bool: GDN_DTYPE_BOOL, torch.int64: DTYPE_I64})
    if hasattr(torch, "float8_e4m3fn"):            # torch >= 2.1
        _DTYPES[torch.float8_e4m3fn] = GDN_DTYPE_F8E4M3
    cap = getattr(torch.Tensor, "__dlpack_c_exchange_api__", None)
    if cap is not None and PyCapsule_IsValid(cap, b"dlpack_exchange_api"):
        api = <const gdn_dl_exchange_api_t *>PyCapsule_GetPointer(cap, b"dlpack_exchange_api")
        if api.major == 1 and api.dltensor_from_py_object_no_sync != NULL and api.current_work_stream != NULL:
            _dl = api
            _dl_type = torch.Tensor
    _torch = torch
    return torch


def _use_dlpack(bint on):
    """Test / benchmark hook: read tensors through torch's DLPack table (True, when torch has
    one) or through Python attributes (False).  Returns whether the table is in use now."""
    global _dl_on
    if _torch is None:
        _torch_init()
    _dl_on = on
    return _dl_on and _dl != NULL


cdef inline int _dl_dtype(gdn_dl_dtype_t t) noexcept nogil:
    if t.lanes != 1:
        return 0
    if t.code == DL_BFLOAT and t.bits == 16:
        return GDN_DTYPE_BF16
    if t.code == DL_FLOAT and t.bits == 16:
        return GDN_DTYPE_F16
    if t.code == DL_FLOAT and t.bits == 32:
        return GDN_DTYPE_F32
    if t.code == DL_INT and t.bits == 32:
        return GDN_DTYPE_I32
    if t.code == DL_FLOAT8_E4M3FN and t.bits == 8:
        return GDN_DTYPE_F8E4M3
    if t.code == DL_UINT and t.bits == 8:
        return GDN_DTYPE_U8
    if t.code == DL_BOOL and t.bits == 8:
        return GDN_DTYPE_BOOL
    if t.code == DL_INT and t.bits == 64:
        return DTYPE_I64
    return 0


cdef enum:
    DEV_NONE = -1           # _fill's device codes besides a CUDA index (>= 0): no tensor,
    DEV_CPU = -2            # a CPU tensor,
    DEV_META = -3           # a meta tensor,
    DEV_OTHER = -4          # any other device
    FILL_ERROR = -100       # (an exception was raised)


cdef object _not_a_tensor(object x, str name):
    """The GdnTypeError for an argument that must be a dense torch tensor."""
    if x is None:
        return _errors.GdnTypeError(f"{name}: a tensor is required, got None")
    if not isinstance(x, _torch.Tensor):
        return _errors.GdnTypeError(f"{name}: must be a torch.Tensor, got {type(x).__module__}.{type(x).__qualname__}"
                                    if type(x).__module__ != "builtins" else
                                    f"{name}: must be a torch.Tensor, got {type(x).__qualname__}")
    if x.layout != _torch.strided:
        return _errors.GdnTypeError(f"{name}: must be a dense (strided) tensor, got layout {x.layout}")
    if x.is_quantized:
        return _errors.GdnTypeError(f"{name}: quantized tensors are not supported (dtype {x.dtype})")
    return None


cdef int _fill(gdn_tensor_t *t, object x, str name, bint required=False) except FILL_ERROR:
    """Fill t from tensor x (None: rank 0, absent; required: a GdnTypeError).  Returns the CUDA device
    index of x, or a DEV_* code.  torch tensors go through the DLPack table; other tensor types
    (subclasses included) and tensors DLPack cannot describe (meta) through attributes: the same
    fields either way (tests/test_dlpack.py compares them).  Anything but a dense torch tensor
    raises GdnTypeError naming the argument."""
    cdef int i, rank
    cdef int64_t st
    cdef gdn_dl_tensor_t d
    memset(t, 0, sizeof(gdn_tensor_t))
    if x is None and not required:
        return DEV_NONE
    if _torch is None:
        _torch_init()
    if _dl_on and _dl != NULL and type(x) is _dl_type:
        if _dl.dltensor_from_py_object_no_sync(<void *>x, &d) == 0:
            if d.ndim < 1 or d.ndim > GDN_MAX_RANK:
                raise _errors.GdnShapeError(f"{name}: must have 1 to {GDN_MAX_RANK} dims, got {d.ndim}")
            t.rank = d.ndim
            t.dtype = _dl_dtype(d.dtype)
            t.data = <void *>(<char *>d.data + d.byte_offset)
            st = 1
            for i in range(d.ndim - 1, -1, -1):      # DLPack < 1.2 may leave strides NULL: compact
                t.shape[i] = d.shape[i]
                t.stride[i] = d.strides[i] if d.strides != NULL else st
                st *= d.shape[i]
            if d.device.device_type == DL_CUDA:
                return d.device.device_id
            return DEV_CPU if d.device.device_type == DL_CPU else DEV_OTHER
        PyErr_Clear()
    err = _not_a_tensor(x, name)
    if err is not None:
        raise err
    rank = x.dim()
    if rank < 1 or rank > GDN_MAX_RANK:
        raise _errors.GdnShapeError(f"{name}: must have 1 to {GDN_MAX_RANK} dims, got {rank}")
    t.rank = rank
    t.dtype = _DTYPES.get(x.dtype, 0)
    t.data = <void *><uintptr_t>x.data_ptr()
    shape = x.shape
    stride = x.stride()
    for i in range(rank):
        t.shape[i] = shape[i]
        t.stride[i] = stride[i]
    dev = x.device
    if dev.type == "cuda":
        return dev.index if dev.index is not None else 0
    return DEV_CPU if dev.type == "cpu" else (DEV_META if dev.type == "meta" else DEV_OTHER)


def _check_tensor(x, str name):
    """The library's rule for an argument that must be a dense torch tensor (GdnTypeError naming
    it), for the Python layers that reshape or copy a tensor before prefill() reads it (the FLA
    layer, the torch op): the one copy of that rule and its messages."""
    if _torch is None:
        _torch_init()
    err = _not_a_tensor(x, name)
    if err is not None:
        raise err


def _tensor_view(x):
    """Test hook: (data, shape, stride, dtype code, device) as _fill reads x."""
    cdef gdn_tensor_t t
    cdef int dev = _fill(&t, x, "x"), i
    if dev < 0:
        dev = -2 if dev != DEV_NONE else -1       # the hook's contract: -2 for any non-CUDA device
    return (<uintptr_t>t.data, tuple(t.shape[i] for i in range(t.rank)),
            tuple(t.stride[i] for i in range(t.rank)), t.dtype, dev)


cdef enum:
    DEVICES_ANY = 0         # _build's device rule: none (explain(check_device=False), the fake op)
    DEVICES_ONE = 1         # every tensor on one device of any kind (explain: planning on CPU / meta)
    DEVICES_CUDA = 2        # every tensor on one CUDA device (prefill)


cdef int _device_error(int dev, object x, str name, object first_x, str first, int rule) except -1:
    if rule == DEVICES_CUDA and dev < 0:
        raise _errors.GdnDeviceError(f"{name}: must be a CUDA tensor, got device {x.device}")
    raise _errors.GdnDeviceError(f"{name}: is on {x.device} but {first} is on {first_x.device}; "
                                 "all tensors must be on one device")


cdef object _raise(int rc, const char *msg):
    raise _errors.BY_STATUS.get(rc, _errors.GdnError)(msg.decode())
