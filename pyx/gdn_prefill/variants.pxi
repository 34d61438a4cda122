# Variant ids of the launch table, looked up once at import.
# (Included by _ext.pyx: one module, one namespace; the order of the includes is the order of
# definition.)

# ----------------------------------------------------------------------------- variants
# The tables of builds (_v_wu, _v_wu_pqk, _v_wu_workers, _v_fwd_o, _v_spine, _v_spine_o, _v_spine_maps,
# _v_spine_seg, _v_compose, _v_single; -1: not compiled in) are generated at build time from the
# kernels' VARIANTS (cute_kernels/registry.py TABLES and launch_entries, run by setup.py on the
# build's manifest.json): a build added to a kernel's VARIANTS lands in its table without an edit
# here.  What the axes mean:
#   stages 1 and 3 come in two builds: any strides (2-byte loads), and "_a16" for q/k/v/out whose
#     base pointers are 16-byte aligned and token/head strides multiples of 8 elements (16-byte
#     cp.async loads and stores; the usual case): _aligned16() picks one per call;
#   the wgmma spine comes with 1 warpgroup per CTA and with 2 sharing one W/K copy:
#     _spine_warpgroups() picks one per call from N and Hv (the scalar spine's one build fills both);
#   every spine build comes once per state-pool element type (fp32, bf16, fp16, fp8 e4m3:
#     cute_kernels/state_pool.py STATE_DTYPES): _state_type() picks one per call;
#   the register-state spine + output (spine_rs_o) has three builds: solo (one CTA per 64 state columns), pair
#     (a head's two CTAs as a cluster that multicasts the tiles both load) and dual (one CTA per
#     head, a consumer warpgroup per 64 state columns): _rs_build() picks one per call;
#   the segmented plan's MAPS pass (dual CTAs, each segment's affine map), its composition
#     (compose_f32, pool-independent) and its SEGMENT pass (solo CTAs, each segment from its
#     composed state, with the output); the single plan's single_prefill (stage 1 and the spine of a
#     (sequence, value head) in one CTA, one launch and no workspace).
include "variants_table.pxi"

# the generated codes of the register-state spine's builds are gdn_prefill.grids's names, in order
_RS_BUILDS = _grids.RS_BUILDS
assert _RS_BUILD_NAMES == tuple(_RS_BUILDS), (_RS_BUILD_NAMES, _RS_BUILDS)


cdef inline int _pool_type(const gdn_problem_t *p) noexcept nogil:
    """GDN_DTYPE_* of the call's pools (state, initial_state and checkpoint_pool share one type; fp32
    without any)."""
    if p.state.rank != 0:
        return p.state.dtype
    if p.initial_state.rank != 0:
        return p.initial_state.dtype
    if p.checkpoint_pool.rank != 0:
        return p.checkpoint_pool.dtype
    return GDN_DTYPE_F32


cdef inline int _state_type(const gdn_problem_t *p) noexcept nogil:
    """SDT_* of the call's pools (the builds' axis of _pool_type)."""
    cdef int d = _pool_type(p)
    if d == GDN_DTYPE_BF16:
        return SDT_BF16
    if d == GDN_DTYPE_F16:
        return SDT_F16
    if d == GDN_DTYPE_F8E4M3:
        return SDT_F8E4M3
    return SDT_F32


cdef inline const char *_pool_suffix(int sdt) noexcept nogil:
    """The variant-name suffix of a pool type's builds (cute_kernels/state_pool.py STATE_DTYPES;
    tests/test_variant_table.py checks the two agree), for messages."""
    if sdt == SDT_BF16:
        return "_sbf16"
    if sdt == SDT_F16:
        return "_sf16"
    if sdt == SDT_F8E4M3:
        return "_sf8e4m3"
    return ""


def _pool_suffixes():
    """Test hook: {pool type name (STATE_DTYPES' key): the suffix _pool_suffix gives its builds}."""
    return {name: _pool_suffix(i).decode() for i, name in enumerate(_SDT_NAMES)}


cdef inline int _single_variant(const gdn_problem_t *p, int state_layout) noexcept nogil:
    """Launch-table id of the single plan's build for this call's pool type, layout and beta dtype
    (-1: not compiled in)."""
    return _v_single[_state_type(p)][state_layout][1 if p.beta.dtype == GDN_DTYPE_BF16 else 0]


SPINES = {"auto": GDN_SPINE_AUTO, "scalar": GDN_SPINE_SCALAR, "wgmma": GDN_SPINE_WGMMA}
SPINE_NAMES = {GDN_SPINE_SCALAR: "scalar", GDN_SPINE_WGMMA: "wgmma"}
STATE_LAYOUTS = {"kv": GDN_STATE_KV, "vk": GDN_STATE_VK}


def compiled_variants():
    """Names of the kernel variants linked into this build."""
    return [gdn_variant_name(i).decode() for i in range(gdn_num_variants())]
