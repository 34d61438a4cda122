# Variant ids of the launch table, looked up once at import.
# (Included by _ext.pyx: one module, one namespace; the order of the includes is the order of
# definition.)

# ----------------------------------------------------------------------------- variants
# Variant ids in the launch table, looked up once at import (-1: not compiled in).
# Stages 1 and 3 come in two builds: any strides (2-byte loads), and "_a16" for q/k/v/out
# whose base pointers are 16-byte aligned and token/head strides multiples of 8 elements
# (16-byte cp.async loads and stores; the usual case).  _aligned16() picks one per call.
cdef int _v_wu[2][2]      # [beta is bf16][aligned]
_v_wu[0][0] = gdn_variant_id(b"recompute_wu_bf16_betaf32")
_v_wu[1][0] = gdn_variant_id(b"recompute_wu_bf16_betabf16")
_v_wu[0][1] = gdn_variant_id(b"recompute_wu_bf16_betaf32_a16")
_v_wu[1][1] = gdn_variant_id(b"recompute_wu_bf16_betabf16_a16")
cdef int _v_fwd_o[2]      # [aligned]
_v_fwd_o[0] = gdn_variant_id(b"fwd_o_bf16")
_v_fwd_o[1] = gdn_variant_id(b"fwd_o_bf16_a16")
# The wgmma spine comes in two builds: 1 warpgroup per CTA (spine_wgmma_<layout>) and 2
# warpgroups sharing one W/K copy (spine_wgmma_wg2_<layout>); _spine_warpgroups() picks one per
# call from N and Hv.  The scalar spine has one build (both entries).
# Every spine build comes once per state-pool element type (fp32, bf16: cute_kernels/state_pool.py
# STATE_DTYPES, the suffix of the variant's name); _state_type() picks one per call.
cdef enum:
    SDT_F32 = 0
    SDT_BF16 = 1
    NUM_SDT = 2
_SDT_SUFFIX = (b"", b"_sbf16")
cdef int _v_spine[NUM_SDT][NUM_SPINES][NUM_LAYOUTS][NUM_SPINE_WG]   # [SDT_*][GDN_SPINE_*][GDN_STATE_*][warpgroups - 1]
cdef int _wgi, _sdt
for _sdt in range(NUM_SDT):
    for _wgi in range(NUM_SPINE_WG):
        _v_spine[_sdt][GDN_SPINE_AUTO][GDN_STATE_KV][_wgi] = -1
        _v_spine[_sdt][GDN_SPINE_AUTO][GDN_STATE_VK][_wgi] = -1
        _v_spine[_sdt][GDN_SPINE_SCALAR][GDN_STATE_KV][_wgi] = gdn_variant_id(b"spine_scalar_kv" + _SDT_SUFFIX[_sdt])
        _v_spine[_sdt][GDN_SPINE_SCALAR][GDN_STATE_VK][_wgi] = gdn_variant_id(b"spine_scalar_vk" + _SDT_SUFFIX[_sdt])
    _v_spine[_sdt][GDN_SPINE_WGMMA][GDN_STATE_KV][0] = gdn_variant_id(b"spine_wgmma_kv" + _SDT_SUFFIX[_sdt])
    _v_spine[_sdt][GDN_SPINE_WGMMA][GDN_STATE_VK][0] = gdn_variant_id(b"spine_wgmma_vk" + _SDT_SUFFIX[_sdt])
    _v_spine[_sdt][GDN_SPINE_WGMMA][GDN_STATE_KV][1] = gdn_variant_id(b"spine_wgmma_wg2_kv" + _SDT_SUFFIX[_sdt])
    _v_spine[_sdt][GDN_SPINE_WGMMA][GDN_STATE_VK][1] = gdn_variant_id(b"spine_wgmma_wg2_vk" + _SDT_SUFFIX[_sdt])
# The fused plan (spine="wgmma" with q, k, v, out 16-byte aligned): recompute_wu writes the
# in-chunk attention (pqk), Tu = (I + A)^-1 (tu) and beta in fp32 instead of W and U, and the spine
# forms Vnew from Tu and V and computes the output itself (spine_rs_o_*: the state in the
# registers of one warpgroup per 64 state columns, every regime): two launches, no W / U / h /
# vnew round trip through HBM, no fwd_o.  _fused_guard() decides per call.
cdef int _v_wu_pqk[2]     # [beta is bf16]
_v_wu_pqk[0] = gdn_variant_id(b"recompute_wu_bf16_betaf32_a16_pqk")
_v_wu_pqk[1] = gdn_variant_id(b"recompute_wu_bf16_betabf16_a16_pqk")
# Three builds of the fused spine: solo (one CTA per 64 state columns), pair (a head's two CTAs as
# a cluster that multicasts the tiles both load) and dual (one CTA per head, a consumer warpgroup
# per 64 state columns); _rs_build() picks one per call (from N, Hv and the overlap rule).
cdef enum:
    RS_SOLO = 0
    RS_PAIR = 1
    RS_DUAL = 2
    NUM_RS_BUILDS = 3
_RS_BUILDS = _plan.RS_BUILDS                              # their names, by code
assert len(_RS_BUILDS) == NUM_RS_BUILDS
cdef int _v_spine_o[NUM_SDT][NUM_LAYOUTS][NUM_RS_BUILDS]            # [SDT_*][GDN_STATE_*][RS_*]
for _sdt in range(NUM_SDT):
    _v_spine_o[_sdt][GDN_STATE_KV][RS_SOLO] = gdn_variant_id(b"spine_rs_o_kv" + _SDT_SUFFIX[_sdt])
    _v_spine_o[_sdt][GDN_STATE_VK][RS_SOLO] = gdn_variant_id(b"spine_rs_o_vk" + _SDT_SUFFIX[_sdt])
    _v_spine_o[_sdt][GDN_STATE_KV][RS_PAIR] = gdn_variant_id(b"spine_rs_o_pair_kv" + _SDT_SUFFIX[_sdt])
    _v_spine_o[_sdt][GDN_STATE_VK][RS_PAIR] = gdn_variant_id(b"spine_rs_o_pair_vk" + _SDT_SUFFIX[_sdt])
    _v_spine_o[_sdt][GDN_STATE_KV][RS_DUAL] = gdn_variant_id(b"spine_rs_o_dual_kv" + _SDT_SUFFIX[_sdt])
    _v_spine_o[_sdt][GDN_STATE_VK][RS_DUAL] = gdn_variant_id(b"spine_rs_o_dual_vk" + _SDT_SUFFIX[_sdt])

# The single plan (_make_plan): cute_kernels/fused.py, stage 1 and the spine of a (sequence, value
# head) in one CTA, one launch and no workspace.
cdef int _v_single[NUM_SDT][NUM_LAYOUTS][2]                       # [SDT_*][GDN_STATE_*][beta is bf16]
for _sdt in range(NUM_SDT):
    for _b, _bname in enumerate((b"f32", b"bf16")):
        _v_single[_sdt][GDN_STATE_KV][_b] = gdn_variant_id(b"fused_prefill_beta" + _bname + b"_kv" + _SDT_SUFFIX[_sdt])
        _v_single[_sdt][GDN_STATE_VK][_b] = gdn_variant_id(b"fused_prefill_beta" + _bname + b"_vk" + _SDT_SUFFIX[_sdt])


cdef inline int _state_type(const gdn_problem_t *p) noexcept nogil:
    """SDT_* of the call's pools (state and initial_state share one type; fp32 without either)."""
    if p.state.rank != 0:
        return SDT_BF16 if p.state.dtype == GDN_DTYPE_BF16 else SDT_F32
    if p.initial_state.rank != 0:
        return SDT_BF16 if p.initial_state.dtype == GDN_DTYPE_BF16 else SDT_F32
    return SDT_F32


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
# The segmented plan (_make_plan): spine_rs's MAPS pass (dual CTAs, each segment's affine map), the
# composition (compose_f32, the states at the segments' entries, pool-independent) and its SEGMENT
# pass (solo CTAs, each segment from its composed state, with the output).
cdef int _v_spine_maps[NUM_SDT][NUM_LAYOUTS]                      # [SDT_*][GDN_STATE_*]
cdef int _v_spine_seg[NUM_SDT][NUM_LAYOUTS]
for _sdt in range(NUM_SDT):
    _v_spine_maps[_sdt][GDN_STATE_KV] = gdn_variant_id(b"spine_rs_maps_kv" + _SDT_SUFFIX[_sdt])
    _v_spine_maps[_sdt][GDN_STATE_VK] = gdn_variant_id(b"spine_rs_maps_vk" + _SDT_SUFFIX[_sdt])
    _v_spine_seg[_sdt][GDN_STATE_KV] = gdn_variant_id(b"spine_rs_o_seg_kv" + _SDT_SUFFIX[_sdt])
    _v_spine_seg[_sdt][GDN_STATE_VK] = gdn_variant_id(b"spine_rs_o_seg_vk" + _SDT_SUFFIX[_sdt])
cdef int _v_compose = gdn_variant_id(b"compose_f32")
