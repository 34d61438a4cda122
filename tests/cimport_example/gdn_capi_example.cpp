// How a C++ extension without Cython calls gdn-prefill: fetch gdn_prefill_raw from the
// C-API capsule that gdn_prefill._ext exports (__pyx_capi__), then call it with the GIL
// released.  Needs only gdn/gdn_abi.h (shipped in <site-packages>/gdn_prefill/include) and
// cuda_runtime.h (for cudaStream_t); nothing is linked.
//
// describe_q_dtype(dtype_code) fills a small problem (T = 64 tokens, one sequence, one head)
// with placeholder device addresses, sets q's dtype code, and returns (status, message):
// a bad code shows a validation error reaching a C++ caller, before any pointer is used.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdint>
#include <cstring>

#include <cuda_runtime.h>

#include "gdn/gdn_abi.h"

namespace {

using gdn_prefill_raw_fn = int (*)(gdn_problem_t *, int, int, void *, int64_t, cudaStream_t, int *, char *,
                                   size_t);
// The capsule's name is the C signature Cython gives it; PyCapsule_GetPointer checks it, so
// a caller built against a different ABI fails loudly here instead of calling through a bad
// pointer.
constexpr const char *kRawSignature =
    "int (gdn_problem_t *, int, int, void *, int64_t, cudaStream_t, int *, char *, size_t)";

gdn_prefill_raw_fn load_raw() {
  PyObject *mod = PyImport_ImportModule("gdn_prefill._ext");
  if (!mod) return nullptr;
  PyObject *capi = PyObject_GetAttrString(mod, "__pyx_capi__");
  Py_DECREF(mod);
  if (!capi) return nullptr;
  PyObject *cap = PyDict_GetItemString(capi, "gdn_prefill_raw");  // borrowed
  void *fn = cap ? PyCapsule_GetPointer(cap, kRawSignature) : nullptr;
  if (!cap) PyErr_SetString(PyExc_ImportError, "gdn_prefill._ext exports no gdn_prefill_raw");
  Py_DECREF(capi);
  return reinterpret_cast<gdn_prefill_raw_fn>(fn);
}

void tensor(gdn_tensor_t *t, uintptr_t addr, int rank, const int64_t *shape, int dtype) {
  std::memset(t, 0, sizeof(*t));
  t->data = reinterpret_cast<void *>(addr);
  t->rank = rank;
  t->dtype = dtype;
  int64_t stride = 1;
  for (int i = rank - 1; i >= 0; --i) {  // compact row-major
    t->shape[i] = shape[i];
    t->stride[i] = stride;
    stride *= shape[i];
  }
}

PyObject *describe_q_dtype(PyObject *, PyObject *args) {
  int q_dtype = 0;
  if (!PyArg_ParseTuple(args, "i", &q_dtype)) return nullptr;
  gdn_prefill_raw_fn raw = load_raw();
  if (!raw) return nullptr;

  const int64_t T = 64, H = 1, D = GDN_HEAD_DIM_K;
  const int64_t qkv[3] = {T, H, D}, gb[2] = {T, H}, cu[1] = {2};
  const uintptr_t base = uintptr_t(1) << 40, gap = uintptr_t(1) << 30;  // never dereferenced
  gdn_problem_t p;
  std::memset(&p, 0, sizeof(p));
  tensor(&p.q, base + 0 * gap, 3, qkv, q_dtype);
  tensor(&p.k, base + 1 * gap, 3, qkv, GDN_DTYPE_BF16);
  tensor(&p.v, base + 2 * gap, 3, qkv, GDN_DTYPE_BF16);
  tensor(&p.g, base + 3 * gap, 2, gb, GDN_DTYPE_F32);
  tensor(&p.beta, base + 4 * gap, 2, gb, GDN_DTYPE_F32);
  tensor(&p.out, base + 5 * gap, 3, qkv, GDN_DTYPE_BF16);
  tensor(&p.cu_seqlens, base + 6 * gap, 1, cu, GDN_DTYPE_I32);
  p.scale = 0.08838834764831845f;

  char msg[512] = {0};
  int chosen = -1, rc;
  Py_BEGIN_ALLOW_THREADS
  rc = raw(&p, GDN_SPINE_AUTO, GDN_STATE_KV, nullptr, 0, nullptr, &chosen, msg, sizeof(msg));
  Py_END_ALLOW_THREADS
  return Py_BuildValue("(is)", rc, msg);
}

PyMethodDef kMethods[] = {
    {"describe_q_dtype", describe_q_dtype, METH_VARARGS, "(status, message) of a call whose q has this dtype code"},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "gdn_capi_example", nullptr, -1, kMethods};

}  // namespace

PyMODINIT_FUNC PyInit_gdn_capi_example() { return PyModule_Create(&kModule); }
