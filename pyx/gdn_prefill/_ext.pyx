# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The typed entry point of gdn-prefill: validate -> pack -> launch.

Every call is planned by one function, `_plan_call` (plan.pxi; docs/PLANNER.md): every
guard, the spine, the plan, its launches, grids and workspace.  `gdn_prefill_raw` plans
and launches; the Python `prefill` fills a gdn_problem_t from torch tensors and does the
same, `explain` plans and reports.  Nothing here reads device memory, so a call never
synchronises with the host and can be captured in a CUDA graph.
"""
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t, uintptr_t
from cpython.exc cimport PyErr_Clear
from cpython.pycapsule cimport PyCapsule_GetPointer, PyCapsule_IsValid
from libc.stdio cimport snprintf
from libc.string cimport memset
from libc.math cimport isfinite

from gdn_prefill.gdn_abi cimport *

import logging
import numbers as _numbers
import operator as _operator
import os

from gdn_prefill import errors as _errors
from gdn_prefill import grids as _grids
from gdn_prefill import _driver  # its import checks the CUDA driver: one older than 13.0 raises here

_log = logging.getLogger("gdn_prefill")

cdef enum:
    MSG_CAP = 512

# The module by concern, in definition order:
include "variants.pxi"
include "validate.pxi"
include "plan.pxi"
include "workspace.pxi"
include "launch.pxi"
include "overlap.pxi"
include "dlpack.pxi"
include "api.pxi"
include "hooks.pxi"
