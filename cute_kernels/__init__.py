"""CuTe DSL kernels of gdn-prefill, compiled ahead of time by cute_kernels.aot.

One stage or spine per module. Each module exposes its `@cute.jit` launch
function (parameters named after gdn_problem_t fields), `VARIANTS` and
`fake_args(dims, **variant)`; cute_kernels.registry lists what gets built.
Importing this package needs the DSL; the installed gdn_prefill never does.
"""
