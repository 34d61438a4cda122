/* gdn-prefill C ABI: the one place where the Cython entry point, the generated
 * launch glue and the CuTe DSL kernels agree on constants and argument layout.
 *
 * Python reads the GDN_* integer constants from this file (gdn_prefill/_abi.py
 * parses it), so the kernels, the launcher and the guards cannot disagree on a
 * tile, a chunk or an alignment.  Keep every constant a plain integer #define.
 */
#ifndef GDN_ABI_H
#define GDN_ABI_H

#include <stdint.h>

/* ---- tile constants ---------------------------------------------------- */
#define GDN_CHUNK 64                 /* tokens per chunk (C in docs/DESIGN.md §1) */
#define GDN_HEAD_DIM_K 128           /* K: the only key head dim compiled           */
#define GDN_HEAD_DIM_V 128           /* V: the only value head dim compiled         */
#define GDN_SCALAR_SPINE_VBLOCK 32   /* V columns of the state owned by one CTA     */
#define GDN_SCALAR_SPINE_THREADS 128
#define GDN_WGMMA_SPINE_VBLOCK 32    /* V columns of the state per warpgroup        */
#define GDN_RS_SPINE_VBLOCK 64       /* V columns per CTA of the register-state spine (M of its MMAs) */
#define GDN_SM_COUNT 132             /* SMs of an H100/H200 SXM (never queried)      */
/* wgmma spine (unfused plan): the 1-warpgroup build while its grid N*Hv*(V/VBLOCK) has at most this
 * many CTAs (one per SM), beyond it the 2-warpgroup build (a cluster multicasts the shared W/K copy).
 * The measured crossover: docs/PERFORMANCE.md, "Plan choices". */
#define GDN_WGMMA_WG1_MAX_CTAS 132
/* register-state spine (spine_rs_o): three builds.  The overlap plan runs the pair build (a head's two
 * CTAs as a cluster that multicasts the tiles both load); the serial plan runs solo (one CTA per 64
 * state columns) or dual (one CTA per head, two chains per SM), whichever needs fewer
 * waves-times-chunk-time: dual iff ceil(N Hv / sms) * DUAL_WAVE_NS < ceil(2 N Hv / sms) * SOLO_WAVE_NS
 * (a wave advances one chunk in these times; measured: docs/PERFORMANCE.md, "Solo, pair, dual"). */
#define GDN_RS_SOLO_WAVE_NS 1400
#define GDN_RS_DUAL_WAVE_NS 2200
/* the dual build's own choice for a batch whose longest sequence may be its critical path
 * (cute_kernels/spine_rs.py _lead_solo, from cu_seqlens in the kernel): a CTA costs its chunks times
 * the wave time plus this fixed cost (state load and store, prologue, pipeline fill; docs/PERFORMANCE.md,
 * "the lead rule"). */
#define GDN_RS_CTA_NS 2200
#define GDN_RS_SPINE_DUAL_WG 2       /* consumer warpgroups of spine_rs_o's dual build (one CTA per head) */
/* segmented plan (docs/DESIGN.md §3): the composition of the segment maps, COLS state columns per CTA
 * (cute_kernels/compose.py) */
#define GDN_COMPOSE_COLS 8           /* one n8 tile of mma.sync m16n8k8 */
/* the planner's cost model (pyx/gdn_prefill/plan.pxi _make_plan, explain()["plan"]): nanoseconds
 * fitted to measured calls (docs/PERFORMANCE.md, "The segmented plan"):
 *   WU_SM_NS       stage 1, one chunk of one head, SM-time (the device runs sms of them at once)
 *   CHAIN_NS       one chunk of the serial plan's solo chain (few CTAs on the device)
 *   SEG_CHAIN_NS   one chunk of a SEGMENT pass's chain (every SM busy)
 *   MAPS_NS        one chunk of a MAPS CTA (two chains of 128 columns, no output)
 *   PASS_NS        a segmented pass's fixed cost (its launch, state load and store, the ring's fill)
 *   COMPOSE_NS     one step S = A S + B of the composition
 *   LAUNCH_NS      a call's fixed cost (stage 1's launch and first wave)
 *   OVERLAP_CHAIN_PCT  the overlap plan's chain beside stage 1's workers, in % of CHAIN_NS
 *   OVERLAP_NS     the overlap plan's fixed cost (the flags' memset, two launches, the first items)
 * and the most segments the planner cuts a sequence into. */
#define GDN_MODEL_WU_SM_NS 2230
#define GDN_MODEL_CHAIN_NS 1150
#define GDN_MODEL_SEG_CHAIN_NS 1340
#define GDN_MODEL_MAPS_NS 1200
#define GDN_MODEL_PASS_NS 8000
#define GDN_MODEL_COMPOSE_NS 1300
#define GDN_MODEL_LAUNCH_NS 5000
#define GDN_MODEL_OVERLAP_CHAIN_PCT 118
#define GDN_MODEL_OVERLAP_NS 25000
#define GDN_SEG_MAX_SEGMENTS 64
/* the segmented plan's MAPS pass cuts a segment's maps where the log-decay of its last chunks sums
 * below this (spine_rs._map_cut, docs/DESIGN.md §3): what came before reaches the segment's end
 * scaled by less than e^-16 (~2^-23, the fp32 state's own rounding), so B runs those chunks alone
 * and A is dropped; at e^-10 (FlashQLA's) a value 1e4x the others just before the cut moved o by
 * 6.8e-3 of its scale, at e^-16 by 9.5e-6 (tests/test_map_cut.py's case) */
#define GDN_MAP_CUT_LOG_DECAY -16
/* the segmented plan's passes have at most this many CTAs (2 x segment slots x heads): two waves of
 * an H100 / H200, and the bound of its workspace (maps and seg_state, 3 states per slot and head) */
#define GDN_SEG_MAX_CTAS 264
/* the single plan (cute_kernels/single.py: stage 1 and the spine of one (sequence, value head) in one
 * CTA, no workspace): faster than the serial plan wherever its CTAs keep the SMs busy until the
 * longest sequence ends (docs/PERFORMANCE.md, "The single plan").  prefill() runs it iff max_seqlen
 * is given and the longest sequence alone, ceil(max_seqlen / 64) chunks at SINGLE_LAT_PCT % of a
 * chunk's cost on a full SM, takes no longer than the batch's ceil(T / 64) * Hv chunks spread over
 * the SMs: ceil(max_seqlen / 64) * SMs * SINGLE_LAT_PCT <= ceil(T / 64) * Hv * 100. */
#define GDN_SINGLE_LAT_PCT 70
#define GDN_TMA_ALIGN_BYTES 16       /* TMA: base pointers and strides 16B aligned  */
#define GDN_WORKSPACE_ALIGN_BYTES 256
#define GDN_MAX_RANK 4
/* sequences per call: the per-chunk kernels find a chunk slot's sequence by a warp search over
 * cu_seqlens, 32 candidates per round, 4 rounds (cute_kernels/slots.py) */
#define GDN_MAX_SEQUENCES 1048576
/* the fused plan's sequence order: stage 1's first CTA ranks up to this many sequences longest
 * first (an O(N^2) count over the lengths in its shared memory) into the workspace's `order`, and
 * the register-state spine starts its chains in that order; beyond it, index order, and no CTA reads more
 * than a fixed number of lengths (cute_kernels/handoff.py longest_first) */
#define GDN_ORDER_MAX_SEQS 1024
/* overlap plan (register-state spine, few sequences): stage 1 as
 * recompute_wu_workers, one CTA on each SM the spine leaves (wu_ctas = SMs - the spine's CTAs, the SMs
 * queried), publishing each (slot, head) in `ready`, and the spine behind it on the same stream as its
 * programmatic dependent, waiting for each slot's flag: it is scheduled only once every workers CTA
 * runs (pyx/gdn_prefill/overlap.pxi says why that cannot hang).  It runs where the spine's CTAs leave
 * at least half of the SMs to the workers and the call has at least MIN_SLOTS chunk slots (measured
 * against the serial plan: slower at 17 slots, level at 33, faster from 65: docs/PERFORMANCE.md). */
#define GDN_OVERLAP_MIN_SLOTS 24

/* ---- element types ----------------------------------------------------- */
#define GDN_DTYPE_BF16 1
#define GDN_DTYPE_F16 2
#define GDN_DTYPE_F32 3
#define GDN_DTYPE_I32 4
#define GDN_DTYPE_F8E4M3 5           /* float8_e4m3fn (finite only, +-448): state pools */
#define GDN_DTYPE_U8 6               /* uint8: the workspace, has_initial              */
#define GDN_DTYPE_BOOL 7             /* bool (one byte): has_initial                   */

/* ---- spines ------------------------------------------------------------ */
#define GDN_SPINE_AUTO 0
#define GDN_SPINE_SCALAR 1
#define GDN_SPINE_WGMMA 2

/* ---- state layouts ----------------------------------------------------- */
#define GDN_STATE_KV 0               /* [P, Hv, K, V] (FLA)                         */
#define GDN_STATE_VK 1               /* [P, Hv, V, K] (vLLM / FlashInfer pools)     */

/* ---- status codes (returned by every C entry) -------------------------- */
#define GDN_OK 0
#define GDN_ERR_DTYPE 1              /* -> GdnDtypeError (TypeError)                */
#define GDN_ERR_SHAPE 2              /* -> GdnShapeError (ValueError)               */
#define GDN_ERR_LAYOUT 3             /* stride / alignment -> GdnLayoutError         */
#define GDN_ERR_ALIAS 4              /* -> GdnAliasError (ValueError)               */
#define GDN_ERR_SPINE 5              /* requested spine's guard -> GdnSpineError    */
#define GDN_ERR_ARGUMENT 6           /* any other bad argument -> GdnArgumentError  */
#define GDN_ERR_LAUNCH 7             /* a kernel launch failed -> GdnLaunchError     */
#define GDN_ERR_UNKNOWN_VARIANT 8    /* no compiled kernel for the request          */

/* A tensor as the launch glue sees it: logical shape and element strides.
 * Unused trailing modes are 1 / 0.  `data == NULL` marks an absent tensor. */
typedef struct {
    void *data;
    int64_t shape[GDN_MAX_RANK];
    int64_t stride[GDN_MAX_RANK];
    int32_t rank;
    int32_t dtype;                   /* GDN_DTYPE_* */
} gdn_tensor_t;

/* One prefill call.  Field names are the parameter names of the DSL launch
 * functions in cute_kernels/: the generated glue binds each kernel argument
 * to the field of the same name, and the build fails if one is missing.
 *
 * Logical shapes (T tokens packed over N sequences, P state slots):
 *   q, k          [T, Hk, K]        v, out   [T, Hv, V]
 *   g, beta       [T, Hv]           cu_seqlens [N+1] int32, state_indices [N] int32
 *   state         [P, Hv, K, V] logical view (a "vk" pool is passed with its last two strides
 *                 swapped, so kernels always index S[k, v]); fp32, bf16, fp16 or fp8 e4m3 (the
 *                 pool types: read once, rounded once when written, fp32 inside the kernels)
 *   checkpoints   [N, J] int32 (row stride free, last dim contiguous): with checkpoint_chunks = c > 0,
 *                 every spine writes the state after token (j + 1) c CHUNK of sequence n into slot
 *                 checkpoints[n, j] of checkpoint_pool, for each such token at or before the
 *                 sequence's end (FlashInfer's rule: floor(len / (c CHUNK)) checkpoints, the last one
 *                 the final state when the length is a multiple) with j < J and checkpoints[n, j] >= 0
 *                 (prefix caching); c = 0: no checkpoints (an unread [N, 1] view, data NULL)
 *   checkpoint_pool [PC, Hv, K, V], the layout and type of `state`: where the checkpoints go; the
 *                 launcher binds `state` itself when the caller gives no pool of its own
 *   initial_state [P, Hv, K, V], the layout, slots and type of `state`: with state_in = 2 the spines
 *                 read each sequence's initial state here (read only) instead of from `state`
 *   has_initial   [N] bool or uint8, any stride: 0 = sequence n starts from zero whatever
 *                 state_in says (state_in 3, 4); data NULL = no per-sequence mask
 *   zero_initial  1: every sequence starts from zero (`state`, when bound, is only written)
 *   batch_invariant  1: each sequence's output and final state are the same bits in any batch: the
 *                 planner runs the serial plan for every call (never the single or segmented plan,
 *                 whose choice and rounding depend on the batch); 0: the rules
 *   state_in      where the initial state comes from, set by the launcher (callers leave it): 0 zeros
 *                 (no state, or zero_initial), 2 `initial_state` when bound, else 1 `state` (in place);
 *                 3 and 4: 1 and 2 for the sequences whose has_initial entry is nonzero, zeros for
 *                 the others (state_pool.py `source`)
 * Workspace (carved per plan by the launcher, CB = ceil(T/CHUNK) + N chunk slots; chunk i
 * of sequence n is slot cu_seqlens[n] / CHUNK + n + i, computed on the device: no index table).
 * The fused-output plan's: gcum, rq, rk, ready, tu, pqk, order, beta32; the unfused plan's: gcum, rq, rk,
 * ready, w, u, vnew, h; the other plan's tensors keep their shapes with data NULL (never
 * touched).  gdn_workspace_bytes serves either plan:
 *   gcum, rq, rk  [T, Hv] fp32 in-chunk cumulative gate; 1/||q||, 1/||k|| (or 1); stored
 *                 head-major (strides 1, T): a chunk's rows of one head are contiguous
 *   w             [T, Hv, K] bf16   u, vnew [T, Hv, V] bf16
 *   h             [CB, Hv, K, V] bf16   state at the entry of each chunk
 *   pqk           [T, Hv, CHUNK] bf16   in-chunk attention of the register-state spine + output:
 *                 row t0+i = scale rq_i rk_j (q_i . k_j) exp(gcum_i - gcum_j), j <= i (else 0)
 *   tu            [T, Hv, CHUNK] bf16   the fused plan's stage-1 output instead of w and u:
 *                 row t0+i = row i of Tm = (I + A)^-1 (its spine forms
 *                 Vnew = Tm diag(beta) (V - diag(exp(gcum) rk) K S) itself, beta on the bracket)
 *   beta32        [T, Hv] fp32, head-major as gcum: beta as stage 1 read it (fused plans)
 *   ready         [CB, Hv] int32   overlap plan: 1 once recompute_wu has stored slot c's Tu, P,
 *                 gcum, rq, rk, beta32 of head hv (zeroed by the launcher before each overlapped call)
 *   order         [N] int32        fused plan: the sequences longest first (equal lengths by
 *                 index), written by the fused plans' recompute_wu, block 0, when
 *                 N <= GDN_ORDER_MAX_SEQS; read by the register-state spine's grid
 * The segmented plan's, besides the fused plan's (M = (floor(T/CHUNK) + N) / seg_chunks + N
 * segment slots; segment j of sequence n is slot (cu_seqlens[n] / CHUNK + n) / seg_chunks + n + j):
 *   maps          [2 M, Hv, K, V] fp32   row 2 m: segment slot m's transition A (K x K), row 2 m + 1
 *                 its offset B (S_end = A S_start + B; segment 0's B from the initial state)
 *   seg_state     [M, Hv, K, V] fp32     the state at each segment's entry (composed)
 *
 * Launch ranges (set by the launcher per launch, not by the caller):
 *   overlap               1: the overlap plan (recompute_wu_workers publishes every slot in `ready`
 *                         while the register-state spine runs, and the spine waits for each);
 *                         0: any other plan (nothing awaited)
 *   seg_chunks            the segmented plan's segment length in chunks (0: another plan)
 *   maps_all              1: the MAPS pass forms every segment's map, segment 0's A and the maps of
 *                         one-segment sequences included, each B from a zero state (a rank's shard
 *                         under context parallelism over devices); 0: the segmented plan's maps
 */
typedef struct {
    gdn_tensor_t q, k, v, g, beta, out;
    gdn_tensor_t state, cu_seqlens, state_indices, checkpoints, initial_state;
    gdn_tensor_t gcum, rq, rk, w, u, vnew, h, pqk, tu, ready, order;
    float scale;
    int32_t use_qk_l2norm;           /* 1: q, k are l2-normalised in the kernels    */
    int32_t has_state;               /* 0: S_0 = 0 and no final state is written    */
    int32_t use_state_indices;       /* 1: sequence n uses slot state_indices[n]    */
    int32_t checkpoint_chunks;       /* chunks between state checkpoints; 0: none   */
    int32_t zero_initial;            /* 1: S_0 = 0 even where a state is bound       */
    int32_t state_in;                /* launcher: 0 zeros, 1 state, 2 initial_state  */
    int32_t overlap;                 /* 1: the spine awaits each slot in `ready`    */
    gdn_tensor_t maps, seg_state;    /* the segmented plan's workspace               */
    int32_t seg_chunks;              /* chunks per segment of the segmented plan    */
    int64_t max_seqlen;              /* the caller's hint: the longest sequence's tokens (0: unknown) */
    int32_t maps_all;                /* launcher: the MAPS pass forms every map (a rank's shard) */
    gdn_tensor_t beta32;             /* the fused plans' workspace: beta in fp32 for the spine */
    gdn_tensor_t has_initial;        /* [N] per-sequence initial-state mask (state_in 3, 4)   */
    gdn_tensor_t checkpoint_pool;    /* the checkpoints' pool (the launcher binds state when absent) */
    int32_t batch_invariant;         /* caller: 1 = every sequence's bits independent of its batch */
    int32_t wu_ctas;                 /* launcher: the overlap plan's stage-1 CTAs (recompute_wu_workers) */
} gdn_problem_t;

#endif /* GDN_ABI_H */
