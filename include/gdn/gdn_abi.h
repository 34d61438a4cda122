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
/* wgmma spine: the 1-warpgroup build runs while its grid N*Hv*(V/VBLOCK) has at most this
 * many CTAs (one per SM); beyond, the 2-warpgroup build whose warpgroups share one W/K copy
 * and whose 2 CTAs per (sequence, head) form a cluster that multicasts it.
 * Measured on the H200, T=4096, Hv=32, us/chunk WG1/WG2 (benchmarks/bench_spine.py --crossover,
 * run 10): 128 CTAs 1.37/1.53, 256 1.91/1.88, 384 3.84/2.57, 512 4.73/3.33, 1024 16.7/6.85. */
#define GDN_WGMMA_WG1_MAX_CTAS 132
/* fused spine (spine_rs_o): three builds.  The overlap plan runs the pair build (a head's two CTAs
 * as a cluster that multicasts the Tu, K, q and P tiles both load: it shares the L2 with stage 1's
 * second part; run 51, 1x64K 1833.8 -> 1767.5 us against solo).  The serial plan runs solo (one
 * CTA per 64 state columns, one chain per SM) or dual (one CTA per head, two consumer warpgroups:
 * two chains per SM, the shared tiles loaded once), whichever needs fewer waves-times-chunk-time:
 * dual iff ceil(N Hv / sms) * DUAL_WAVE_NS < ceil(2 N Hv / sms) * SOLO_WAVE_NS.  A wave advances
 * one chunk in ~1.4 us solo and ~2.2 us dual (run 91, bench_spine --rs-crossover, T=4K, us/chunk
 * solo / dual: B=1 1.36 / 2.15, B=2 1.48 / 2.17, B=3 2.76 / 2.23, B=4 2.83 / 2.33, B=6 4.19 /
 * 4.48, B=8 5.56 / 4.58; pair = solo within 1 % from B=2).  Whole prefill (run 91, pair -> dual):
 * 8x4K 727.8 -> 663.4 us, 32x2K 1469.8 -> 1357.2. */
#define GDN_RS_SOLO_WAVE_NS 1400
#define GDN_RS_DUAL_WAVE_NS 2200
/* the dual build's own choice for a batch whose longest sequence may be its critical path
 * (cute_kernels/spine_rs.py _lead_solo, from cu_seqlens in the kernel): a CTA costs its chunks
 * times the wave time plus this fixed cost (state load and store, prologue, pipeline fill).  Run 97:
 * 8K + 31 x 512 run split measured 289 us where chunks alone modelled 257 (14.6 waves of 8-chunk
 * CTAs on 68 SMs; ~2.2 us more per CTA), and all dual 279 (modelled 282). */
#define GDN_RS_CTA_NS 2200
#define GDN_RS_SPINE_DUAL_WG 2       /* consumer warpgroups of spine_rs_o's dual build (one CTA per head) */
#define GDN_TMA_ALIGN_BYTES 16       /* TMA: base pointers and strides 16B aligned  */
#define GDN_WORKSPACE_ALIGN_BYTES 256
#define GDN_MAX_RANK 4
/* sequences per call: the per-chunk kernels find a chunk slot's sequence by a warp search over
 * cu_seqlens, 32 candidates per round, 4 rounds (cute_kernels/slots.py) */
#define GDN_MAX_SEQUENCES 1048576
/* the fused plan's sequence order: stage 1's first CTA ranks up to this many sequences longest
 * first (an O(N^2) count over the lengths in its shared memory) into the workspace's `order`, and
 * the fused spine starts its chains in that order; beyond it, index order, and no CTA reads more
 * than a fixed number of lengths (cute_kernels/spine_rs.py _longest_first) */
#define GDN_ORDER_MAX_SEQS 1024
/* overlap plan (fused spine, few sequences): recompute_wu's slots [0, split) run first, then the
 * spine on a library-owned high-priority stream beside recompute_wu's slots [split, CB) on the
 * caller's stream, which publish each (slot, head) in `ready`.  split = min(SLOTS, CB) (a
 * percentage of CB until run 131, the history below): early
 * enough that the spine starts soon, late enough that it does not overtake stage 1 on the SMs it
 * leaves.  Measured (benchmarks/bench_overlap.py, H200, 16/32, run 40), us at 0/25/35/45 %:
 * 1x8K 289.4/248.8/237.1/245.9, 1x16K 557.8/465.0/454.5/477.1, 1x64K 2127/1773/1767/1850.
 * With the cheaper stage 1 of runs 86-100 a shorter head start suffices (the spine catches up with
 * stage 1 later): run 101 (bench_overlap, warm), us at 10/15/20/25/35 %: 1x4K 120.7/112.4/119.4/
 * 119.5/120.1, 1x8K 220.9/222.1/213.1/214.4/222.4, 1x16K 412.0/402.8/438.9/451.2/432.7, 1x32K
 * 832.1/881.6/802.6/867.1/851.6, 1x64K 1574.9/1749.8/1634.2/1718.9/1721.0 (single medians vary
 * +-5 % between neighbours: the overlap plan's replays are bimodal); run 87: 1x64K best at 20 %
 * (1709.8 against 1824.8 at 35 %), 1x4K at 15 %.  Run 105 (tools/overlap_parts.py, per replay)
 * showed why less is better: at 20 % stage 1's second part ends 27-40 us (1x8K) / 200-340 us
 * (1x64K) before the spine, which is the critical path; a spine that starts earlier ends earlier
 * as long as it rarely catches up with stage 1.  Run 106 (bench_overlap, two passes, us at
 * 5/10/15/20 %): 1x4K 113.9,112.0/114.3,114.3/114.3,113.8/115.1,114.7; 1x8K 209.1,208.4/210.8,209.2/
 * 212.9,209.8/218.0,217.1; 1x16K 400.4,402.0/421.3,412.7/415.4,416.9/424.9,423.0; 1x32K
 * 794.3,793.7/814.5,814.4/822.7,836.1/832.8,826.0; 1x64K 1577.2,1579.6/1634.8,1642.9/1657.9,1648.3/
 * 1661.2,1680.2: 5 % is the lowest on every length in both passes (-1.5 to -5.5 % against 20 %).
 * Run 113, after stage 1's cheaper TF32 split (runs 110-111: its second part then ends 42 us before
 * the spine at 1x8K, and the spine's chain beside it slows from 1.60 to 1.69 us per chunk: a
 * faster second part costs the critical path more than it gains), with that second part at two
 * CTAs per SM (recompute_wu.OVERLAP_CTAS_PER_SM), us at 5/15/25/35 %: 1x8K 222.3/212.6/205.9/
 * 210.9, 1x16K 430.5/402.9/400.1/409.0, 1x64K 1666.5/1559.7/1548.3/1602.0 (three CTAs per SM,
 * 5 %: 221.4, 426.8, 1606-1726): a longer head start on all SMs, then a gentler second part.
 * Run 120, after stage 1's TMA loads and row norms (runs 117-118), two CTAs per SM, us at
 * 15/20/25/30 %: 1x8K 202.4/201.8/202.9/208.1, 1x16K 385.7/396.8/403.6/402.2, 1x64K
 * 1494.6/1533.7/1537.0/1561.2 (three CTAs per SM, 10/15/20/25 %: 209.0/201.5/213.2/211.7,
 * 409.6/411.5/416.4/421.3, 1622.9/1659.7/1672.6/1688.6); run 121, alternated, 15 against 25 %:
 * 1x8K 202.7, 202.8 / 204.0, 205.2; 1x16K 384.7, 384.3 / 397.3, 398.0; 1x64K 1565.3, 1533.3 /
 * 1581.4, 1566.4.  Run 128, after the spine's faster chunk schedule (run 127: the spine now waits for
 * stage 1; the sweep's spine build was 3 % slower per chunk than the merged one, a refuted variant),
 * stage 1's second part at three CTAs per SM, us at 10/15/20/25/30 %: 1x4K 101.8/103.9/
 * 105.6/105.3/110.4, 1x8K 192.0/197.2/199.9/200.1/204.5, 1x16K 380.6/383.6/386.8/393.3/393.8, 1x64K
 * 1470.7/1493.6/1494.0/1519.6/1522.8 (at two CTAs per SM: 1x8K 204.0/199.1/196.1/198.5/202.3, 1x64K
 * 1514.7/1493.3/1494.1/1515.7/1517.8); run 129, alternated, three at 10 % against two at 15 %:
 * 1x4K 99.1, 98.7 / 106.1; 1x8K 192.8, 193.0 / 199.7; 1x16K 380.0, 380.4 / 376.8; 1x64K 1483.2,
 * 1492.0 / 1502.5.  Run 130 (three CTAs per SM, us at 2/5/7/10 %) read as a step in slots, not in
 * percent: 1x4K (65 slots) 99.4/99.1/98.8/99.6 at 1/3/4/6 slots; 1x8K 182.2/181.4 at 2/6 slots,
 * 190.8/192.1 at 9/12; 1x16K 344.9 at 5 slots, 370.3/378.6/379.6 at 12/17/25; 1x64K 1454.9 at 20
 * slots, 1469.6-1474.5 at 51-102 (four CTAs per SM: 1x4K 108, 1x8K 194-195, 1x16K 375-381, no
 * better).  Run 131, by slot, two passes, 1x64K: 1455.0, 1446.7 / 1437.7, 1440.3 / 1446.2, 1445.1 /
 * 1447.8, 1446.7 at 1/2/3/4 slots (1749 serial); at 8/16 heads 1x8K and 1x16K are level from 2 to
 * 32 slots (180.3-182.3, 345.7-349.3 us).  Run 132 (16/32, serial / 2 / 4 slots): 1x1K 39.2/38.9/
 * 39.1, 1x1536 55.0/51.1/49.8, 1x2K 68.3/59.2/59.0, 1x4K 122.8/99.5/99.0, 1x8K 230.1/182.0/178.7,
 * 1x16K 443.1/350.8/348.1: four slots, the same at every length (+0.5 % at 1x64K against two);
 * run 133's table at four: 1x8K 179.2 us, 1x64K 1439.6 (193.0 / 1486.4 at 10 %, run 129).
 * Deadlock-free because the producer never waits on the spine and the spine's CTAs leave at
 * least half of the device's SMs (queried) to it. */
#define GDN_OVERLAP_SPLIT_SLOTS 4
/* fewer chunk slots: the serial plan.  At 16/32, split 35 %, serial -> overlap (run 79, stage 1
 * at four CTAs per SM): 1x1K (17 slots) 46.5 -> 50.6 us, 1x1536 (25) 65.5 -> 63.9, 1x2K (33)
 * 82.3 -> 72.3, 1x3K (49) 116.0 -> 100.4 (run 42, three CTAs per SM: 16 slots, 1x1K 50.7 -> 48.3). */
#define GDN_OVERLAP_MIN_SLOTS 24
#define GDN_NO_OVERLAP 2147483647    /* ready_from of the serial plan                 */

/* ---- element types ----------------------------------------------------- */
#define GDN_DTYPE_BF16 1
#define GDN_DTYPE_F16 2
#define GDN_DTYPE_F32 3
#define GDN_DTYPE_I32 4

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
 *   state         [P, Hv, K, V] fp32 logical view (a "vk" pool is passed with its
 *                 last two strides swapped, so kernels always index S[k, v])
 * Workspace (carved per plan by the launcher, CB = ceil(T/CHUNK) + N chunk slots; chunk i
 * of sequence n is slot cu_seqlens[n] / CHUNK + n + i, computed on the device: no index table).
 * The fused-output plan's: gcum, rq, rk, ready, tu, pqk, order; the unfused plan's: gcum, rq, rk,
 * ready, w, u, vnew, h; the other plan's tensors keep their shapes with data NULL (never
 * touched).  gdn_workspace_bytes serves either plan:
 *   gcum, rq, rk  [T, Hv] fp32 in-chunk cumulative gate; 1/||q||, 1/||k|| (or 1); stored
 *                 head-major (strides 1, T): a chunk's rows of one head are contiguous
 *   w             [T, Hv, K] bf16   u, vnew [T, Hv, V] bf16
 *   h             [CB, Hv, K, V] bf16   state at the entry of each chunk
 *   pqk           [T, Hv, CHUNK] bf16   in-chunk attention of the fused spine + output:
 *                 row t0+i = scale rq_i rk_j (q_i . k_j) exp(gcum_i - gcum_j), j <= i (else 0)
 *   tu            [T, Hv, CHUNK] bf16   the fused plan's stage-1 output instead of w and u:
 *                 row t0+i = row i of Tu = (I + A)^-1 diag(beta) (its spine forms
 *                 Vnew = Tu (V - diag(exp(gcum) rk) K S) itself)
 *   ready         [CB, Hv] int32   overlap plan: 1 once recompute_wu has stored slot c's Tu, P,
 *                 gcum, rq, rk of head hv (zeroed by the launcher before each overlapped call)
 *   order         [N] int32        fused plan: the sequences longest first (equal lengths by
 *                 index), written by recompute_wu's first launch (slot_begin == 0), block 0, when
 *                 N <= GDN_ORDER_MAX_SEQS; read by the fused spine's grid
 *
 * Launch ranges (set by the launcher per launch, not by the caller):
 *   slot_begin, slot_end  recompute_wu runs chunk slots [slot_begin, slot_end)
 *   ready_from            slots >= ready_from are produced concurrently with the fused spine:
 *                         recompute_wu publishes them in `ready`, the spine waits for them
 *                         (GDN_NO_OVERLAP: the serial plan, nothing published or awaited)
 */
typedef struct {
    gdn_tensor_t q, k, v, g, beta, out;
    gdn_tensor_t state, cu_seqlens, state_indices;
    gdn_tensor_t gcum, rq, rk, w, u, vnew, h, pqk, tu, ready, order;
    float scale;
    int32_t use_qk_l2norm;           /* 1: q, k are l2-normalised in the kernels    */
    int32_t has_state;               /* 0: S_0 = 0 and no final state is written    */
    int32_t use_state_indices;       /* 1: sequence n uses slot state_indices[n]    */
    int32_t slot_begin, slot_end;    /* recompute_wu's chunk slots of this launch   */
    int32_t ready_from;              /* first slot published through `ready`        */
} gdn_problem_t;

#endif /* GDN_ABI_H */
