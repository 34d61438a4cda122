"""The planner's nogil copies of gdn_prefill.grids's formulas are generated from them at build time
(grids.c_formulas_pxi, written by setup.py as plan_formulas.pxi): each generated expression computes
its Python function, and the extension (built from them) agrees with grids.py.  CPU only."""
from __future__ import annotations

import itertools
import re

from gdn_prefill import _ext, grids

PY = {
    "_chunk_slots": lambda T, N: grids.chunk_slots(T, N),
    "_segment_slots": lambda T, N, sc: grids.segment_slots(T, N, sc),
    "_rs_ctas": lambda N, Hv: grids.grid_spine_rs(0, N, Hv)[0],
    "_wgmma_wg1_ctas": lambda N, Hv: grids.grid_spine_wgmma(0, N, Hv, 1)[0] * grids.grid_spine_wgmma(0, N, Hv, 1)[1]
    * grids.grid_spine_wgmma(0, N, Hv, 1)[2],
}


def test_each_generated_copy_computes_its_python_function():
    text = grids.c_formulas_pxi()
    found = re.findall(r"cdef inline int64_t (\w+)\(([^)]*)\) noexcept nogil:\n.*\n    return (.+)\n", text)
    assert sorted(name for name, _, _ in found) == sorted(PY)
    values = {"T": (0, 1, 63, 64, 65, 1000, 65536, 10 ** 7), "N": (1, 2, 7, 64, 1000), "Hv": (1, 4, 32, 64),
              "sc": (1, 2, 3, 19, 64)}
    for name, params, expr in found:
        args = [p.split()[-1] for p in params.split(",")]
        for combo in itertools.product(*(values[a] for a in args)):
            env = dict(zip(args, combo))
            assert eval(expr, {}, env) == PY[name](*combo), (name, env)


def test_the_extension_agrees_with_plan_py():
    """The built copies, through the hooks that read them: the overlap guard (_rs_ctas), the wgmma
    warpgroups rule (_wgmma_wg1_ctas) and the overlap rule's slot count (_chunk_slots)."""
    for N, Hv, sms in itertools.product((1, 2, 3, 16, 33), (1, 4, 8, 32), (66, 132)):
        assert _ext._overlap_fits_rule(N, Hv, sms) == (2 * grids.grid_spine_rs(0, N, Hv)[0] <= sms)
        wg1 = grids.grid_spine_wgmma(0, N, Hv, 1)
        assert _ext._spine_wgmma_warpgroups(N, Hv) == (2 if wg1[0] * wg1[1] * wg1[2] > grids.WGMMA_SPINE_WG1_MAX_CTAS
                                                       else 1)
