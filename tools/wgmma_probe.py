"""How fast the warpgroup MMAs of a register-state spine chunk run on this card, alone and in the chunk's chain.

    python tools/wgmma_probe.py [--out FILE.md]        (Hopper GPU, nvcc on PATH)
    python tools/wgmma_probe.py --source FILE.cu       (only write the generated CUDA source)

The register-state spine's chunk (cute_kernels/spine_rs.py) is five bf16 wgmma groups of M = 64 with fp32
accumulators and the A operand in registers: G1, G2 (N = 64, 8 k-steps), G1b, G4 (N = 64, 4
k-steps), G3 (N = 128, B MN-major, 4 k-steps): ~1,000 cycles per chunk at the datasheet rate
(2,048 bf16 MACs per cycle per SM), in a chain measured at ~2,330 cycles per chunk (B = 1).  On one SM (one CTA), clock64 around each loop, this probe times

  rate     m64nNk16 (N = 32 / 64 / 128 / 256, A from registers or shared memory; N = 32 is
           stage 1's K K^T and Q K^T per warpgroup) back to back into
           one accumulator, a commit every 4 k-steps, at most two groups in flight: the pipe's
           cycles per k-step;
  group    K dependent k-steps, commit, wait for them, again: a group's issue-to-result time
           (what each wait of the chain costs), K = 1, 4, 8;
  chain    the chunk loop of spine_rs with its groups, waits and register work (the bf16
           conversions, the decay, Y^T = V^T - Z diag(a), Vnew^T and its coefficients, the
           output's transposing stmatrix; no TMA ring, no mbarrier, no store warp), in
           spine_rs's schedule (G1, G4 of chunk i - 1 | Y^T, G1b | its output, G2 | Vnew^T, G3)
           and in the earlier one (G4 behind G3, waited for with it: the move measured
           -6 to -7 % per chunk, so the pair calibrates the emulation); each also
           without shared-memory access and scaling (`no smem or scaling`: the groups, the
           waits and the dependent register work between them: Y^T's FMAs, Vnew^T's selects,
           the bf16 packing).  One warpgroup is the solo / pair build, two on
           one SM the dual build.

So the chain rows against the measured 2,330 cycles say how much of a chunk the MMA structure
itself costs (the rest is the ring, the table loads, the slot arithmetic and the stores).  (G1 and
G2 merged into one N = 128 group does not fit: ptxas serialised that loop's wgmmas, C7511.)  The operands are zeros in 128-byte swizzled tiles (a dense MMA's timing does not
depend on the values); the source is generated here (an m64n256k16 lists
134 operands) and compiled with nvcc -arch=sm_90a into a temporary folder.  Prints one markdown
table; on a machine without a Hopper GPU it says so and exits 0.
"""
from __future__ import annotations

import argparse
import datetime
import os
import shutil
import subprocess
import sys
import tempfile

PEAK_MACS_PER_CYCLE = 2048     # per SM, bf16 dense: 989 TFLOP/s / (2 x 132 SMs x 1.83 GHz)
ITERS = 256                    # groups (rate, group rows) or chunks (chain rows) timed per launch
SHAPES = (32, 64, 128, 256)
MODES = ((0, 4), (1, 1), (1, 4), (1, 8))   # (rate, 4 k-steps per commit), then groups of 1 / 4 / 8
# (schedule, OLD, WORK): spine_rs's schedule and the earlier one, with and without the work
CHAINS = (("spine_rs", 0, 1), ("spine_rs", 0, 0), ("G4 behind G3", 1, 1), ("G4 behind G3", 1, 0))
# the chain rows' WORK column; printed into a comma-separated row, so no label may hold a comma
WORK_LABELS = ("no smem or scaling", "with its register work")
NVCC_FLAGS = ["-O3", "-gencode", "arch=compute_90a,code=sm_90a"]


def _mma_fn(n: int, rs: bool, mn_b: bool) -> str:
    """`mma_{n}_{rs|ss}_{k|mn}(acc, a, desc_a, desc_b, scale_d)`: one m64n{n}k16 bf16 -> fp32 wgmma;
    scale_d = 0 overwrites the accumulator, 1 accumulates."""
    nacc = n // 2
    d = ",".join(f"%{i}" for i in range(nacc))
    outs = ", ".join(f'"+f"(acc[{i}])' for i in range(nacc))
    if rs:
        a = "{" + ",".join(f"%{nacc + i}" for i in range(4)) + "}"
        b, sd = f"%{nacc + 4}", f"%{nacc + 5}"
        ins = '"r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d)'
        imm = f"1, 1, {int(mn_b)}"
    else:
        a, b, sd = f"%{nacc}", f"%{nacc + 1}", f"%{nacc + 2}"
        ins = '"l"(desc_a), "l"(desc_b), "r"(scale_d)'
        imm = f"1, 1, 0, {int(mn_b)}"
    name = f"mma_{n}_{'rs' if rs else 'ss'}_{'mn' if mn_b else 'k'}"
    return f"""
__device__ __forceinline__ void {name}(float (&acc)[{nacc}], const unsigned (&a)[4], unsigned long long desc_a,
                                       unsigned long long desc_b, int scale_d) {{
    asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, {sd}, 0;\\n"
                 "wgmma.mma_async.sync.aligned.m64n{n}k16.f32.bf16.bf16 {{{d}}}, {a}, {b}, p, {imm};\\n}}\\n"
                 : {outs} : {ins});
}}
"""


_PRELUDE = r"""#include <cstdio>
#include <cuda_runtime.h>

// wgmma smem descriptor, 128-byte swizzle: K-major tiles have rows of 128 bytes and 8-row groups
// SBO = 1,024 bytes apart (LBO unused); MN-major ones 64-element runs, LBO apart along N, SBO along K
__device__ __forceinline__ unsigned long long desc(unsigned addr, unsigned lbo = 16, unsigned sbo = 1024) {
    unsigned long long d = 0;
    d |= (unsigned long long)((addr & 0x3FFFF) >> 4);
    d |= (unsigned long long)((lbo & 0x3FFFF) >> 4) << 16;
    d |= (unsigned long long)((sbo & 0x3FFFF) >> 4) << 32;
    d |= (unsigned long long)1 << 62;
    return d;
}
#define FENCE() asm volatile("wgmma.fence.sync.aligned;" ::: "memory")
#define COMMIT() asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory")
#define WAIT(n) asm volatile("wgmma.wait_group.sync.aligned " #n ";" ::: "memory")
// after a wait: the accumulator's registers are read only after it (CUTLASS's warpgroup_fence_operand)
template <int N> __device__ __forceinline__ void pin(float (&x)[N]) {
    #pragma unroll
    for (int i = 0; i < N; ++i) asm volatile("" : "+f"(x[i]) :: "memory");
}
__device__ __forceinline__ unsigned pack(float lo, float hi) {
    unsigned r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}
__device__ __forceinline__ float lo16(unsigned u) { return __uint_as_float(u << 16); }
__device__ __forceinline__ float hi16(unsigned u) { return __uint_as_float(u & 0xffff0000u); }
__device__ __forceinline__ const unsigned (&a4(const unsigned *p))[4] {
    return *reinterpret_cast<const unsigned (*)[4]>(p);
}
__device__ __forceinline__ unsigned smem_base(char *raw) {
    unsigned b = (unsigned)__cvta_generic_to_shared(raw);
    return (b + 1023u) & ~1023u;
}
// a chunk's output (its G4 complete): bf16, then the transposing stmatrix into sO and a fence for
// the TMA store that would read it; store = false (WORK = 0): only read into keep, so ptxas keeps G4
__device__ __forceinline__ void output(float (&accY)[32], unsigned (&rO)[16], unsigned sO, int lane, bool store,
                                       unsigned &keep) {
    pin(accY);
    #pragma unroll
    for (int e = 0; e < 16; ++e) rO[e] = pack(accY[2 * e], accY[2 * e + 1]);
    if (store) {
        #pragma unroll
        for (int m = 0; m < 4; ++m)
            asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1,%2,%3,%4};"
                         :: "r"(sO + 2048 * m + 16 * lane), "r"(rO[4 * m]), "r"(rO[4 * m + 1]),
                            "r"(rO[4 * m + 2]), "r"(rO[4 * m + 3]) : "memory");
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    } else {
        #pragma unroll
        for (int e = 0; e < 16; ++e) keep ^= rO[e];
    }
}
__device__ void zero_smem(char *raw, int bytes) {
    char *p = raw + (smem_base(raw) - (unsigned)__cvta_generic_to_shared(raw));
    for (int i = threadIdx.x; i < bytes / 16; i += blockDim.x)
        reinterpret_cast<uint4 *>(p)[i] = make_uint4(0u, 0u, 0u, 0u);
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
}
"""


def _rate_kernel(n: int, rs: bool) -> str:
    nacc = n // 2
    mma = f"mma_{n}_{'rs' if rs else 'ss'}_k"
    return f"""
// MODE 0: rate (commit every K, at most two groups in flight); MODE 1: group (commit, wait 0)
template <int K, int MODE>
__global__ void __launch_bounds__(256, 1) probe_{n}_{'rs' if rs else 'ss'}(long long *cycles, float *sink, int iters) {{
    extern __shared__ char smem_raw[];
    zero_smem(smem_raw, 8192 + 32768);
    unsigned sa = smem_base(smem_raw), sb = sa + 8192;       // A: 64 rows, B: n rows, 128 bytes each
    unsigned long long desc_a = desc(sa), desc_b = desc(sb);
    unsigned a[4] = {{0u, 0u, 0u, 0u}};
    float acc[{nacc}];
    #pragma unroll
    for (int i = 0; i < {nacc}; ++i) acc[i] = 0.f;
    __syncthreads();
    long long t0 = clock64();
    for (int it = 0; it < iters; ++it) {{
        FENCE();
        #pragma unroll
        for (int s = 0; s < K; ++s) {mma}(acc, a, desc_a, desc_b, 1);
        COMMIT();
        if (MODE == 0) WAIT(1); else WAIT(0);
    }}
    WAIT(0);
    pin(acc);
    long long t1 = clock64();
    float s = 0.f;
    #pragma unroll
    for (int i = 0; i < {nacc}; ++i) s += acc[i];
    if (s != 0.f) sink[threadIdx.x] = s;            // never true (zeros): keeps the MMAs
    if (threadIdx.x % 128 == 0) cycles[threadIdx.x / 128] = t1 - t0;
}}
"""


# The chunk loop of spine_rs.SpineRS.chain on synthetic tiles (see the module docstring).  Shared memory
# (from a 1,024-aligned base): the K tile at 0 and the q tile at 16 KB as spine_rs stores them (64
# rows x 128 k, two 64-wide atom columns 8 KB apart; G3 reads K MN-major), Tu at 32 KB, P at 40 KB,
# V and sO per warpgroup at 48 / 64 KB (+ 8 KB per warpgroup), the coefficient table at 80 KB.
# L = 64 (full chunks, a run-time value as in spine_rs).  OLD = 1: the earlier schedule,
# G4 of chunk i issued behind G3 and waited for with it (the move measured -6 to -7 % per chunk:
# a calibration of this emulation).  WORK = 0: no shared-memory access (tables,
# ldmatrix, stmatrix) and no scaling (decay, coef_j, c_i: multiplies by 1 fold away), the rest of
# the register work as with WORK = 1.
_CHAIN = r"""
#define LDTAB(i) (*reinterpret_cast<const float2 *>(tab + (i)))    // tab[i], tab[i + 1]
template <int OLD, int WORK>
__global__ void __launch_bounds__(256, 1) chain(long long *cycles, float *sink, int chunks, float decay, int L) {
    extern __shared__ char smem_raw[];
    zero_smem(smem_raw, 82 * 1024);
    const unsigned base = smem_base(smem_raw);
    const int wg = threadIdx.x / 128, lt = threadIdx.x % 128, lane = lt % 32;
    const unsigned sK = base, sQ = base + 16384, sT = base + 32768, sP = base + 40960;
    const unsigned sV = base + 49152 + 8192 * wg, sO = base + 65536 + 8192 * wg;
    const float *tab = reinterpret_cast<const float *>(smem_raw + (base - (unsigned)__cvta_generic_to_shared(smem_raw))
                                                       + 81920);
    float accS[64], accX[32], accY[32];
    unsigned rS[32], rP[16], rV[16], rVt[16], rO[16];
    #pragma unroll
    for (int e = 0; e < 64; ++e) accS[e] = 0.f;
    #pragma unroll
    for (int e = 0; e < 32; ++e) accX[e] = accY[e] = 0.f;
    #pragma unroll
    for (int e = 0; e < 16; ++e) rP[e] = rV[e] = rVt[e] = rO[e] = 0u;
    const int col0 = 2 * (lane % 4);    // a thread's columns: 2 adjacent ones in each block of 8
    unsigned keep = 0u;                 // WORK = 0: G4's result read into this (else ptxas drops G4)
    __syncthreads();
    long long t0 = clock64();
    for (int i = 0; i < chunks; ++i) {
        #pragma unroll
        for (int e = 0; e < 32; ++e) rS[e] = pack(accS[2 * e], accS[2 * e + 1]);   // bf16(S^T)
        FENCE();            // G1: Z = rS K^T
        #pragma unroll
        for (int kb = 0; kb < 8; ++kb)
            mma_64_rs_k(accX, a4(rS + 4 * kb), 0ull, desc(sK + (kb / 4) * 8192 + (kb % 4) * 32), kb > 0);
        COMMIT();
        if (WORK) {
            #pragma unroll
            for (int e = 0; e < 64; ++e) accS[e] *= decay;
        }
        if constexpr (!OLD) {   // G4 of chunk i - 1 behind G1: O^T += bf16(Vnew^T) P^T
            #pragma unroll
            for (int kb = 0; kb < 4; ++kb) mma_64_rs_k(accY, a4(rV + 4 * kb), 0ull, desc(sP + kb * 32), 1);
            COMMIT();
        }
        if (WORK) {         // V^T by transposing ldmatrix
            #pragma unroll
            for (int m = 0; m < 4; ++m)
                asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                             : "=r"(rVt[4 * m]), "=r"(rVt[4 * m + 1]), "=r"(rVt[4 * m + 2]), "=r"(rVt[4 * m + 3])
                             : "r"(sV + 2048 * m + 16 * lane));
        }
        if constexpr (OLD) WAIT(0); else WAIT(1);    // G1
        pin(accX);
        #pragma unroll
        for (int c = 0; c < 8; ++c) {   // Y^T = V^T - Z diag(a), a_m once per column
            float2 a = WORK ? LDTAB(128 + 8 * c + col0) : make_float2(0.f, 0.f);
            rP[2 * c] = pack(lo16(rVt[2 * c]) - accX[4 * c] * a.x, hi16(rVt[2 * c]) - accX[4 * c + 1] * a.y);
            rP[2 * c + 1] = pack(lo16(rVt[2 * c + 1]) - accX[4 * c + 2] * a.x,
                                 hi16(rVt[2 * c + 1]) - accX[4 * c + 3] * a.y);
        }
        FENCE();            // G1b: Vnew^T = bf16(Y^T) Tu^T
        #pragma unroll
        for (int kb = 0; kb < 4; ++kb) mma_64_rs_k(accX, a4(rP + 4 * kb), 0ull, desc(sT + kb * 32), kb > 0);
        COMMIT();
        if constexpr (!OLD) {
            WAIT(1);        // G4 of chunk i - 1: its output
            output(accY, rO, sO, lane, WORK && i > 0, keep);
        }
        FENCE();            // G2: Y = rS q^T
        #pragma unroll
        for (int kb = 0; kb < 8; ++kb)
            mma_64_rs_k(accY, a4(rS + 4 * kb), 0ull, desc(sQ + (kb / 4) * 8192 + (kb % 4) * 32), kb > 0);
        COMMIT();
        WAIT(1);            // G1b (G2 may still run)
        pin(accX);
        #pragma unroll
        for (int c = 0; c < 8; ++c) {   // Vnew^T (columns >= L selected to 0), P^T = Vnew^T coef_j
            const int j = 8 * c + col0;
            float2 cf = WORK ? LDTAB(j) : make_float2(1.f, 1.f);
            float v0 = j < L ? accX[4 * c] : 0.f, v1 = j + 1 < L ? accX[4 * c + 1] : 0.f;
            float v2 = j < L ? accX[4 * c + 2] : 0.f, v3 = j + 1 < L ? accX[4 * c + 3] : 0.f;
            rV[2 * c] = pack(v0, v1);
            rV[2 * c + 1] = pack(v2, v3);
            rP[2 * c] = pack(v0 * cf.x, v1 * cf.y);
            rP[2 * c + 1] = pack(v2 * cf.x, v3 * cf.y);
        }
        FENCE();            // G3: S^T = g S^T + bf16(P^T) K, B the K tile read MN-major
        #pragma unroll
        for (int kb = 0; kb < 4; ++kb) mma_128_rs_mn(accS, a4(rP + 4 * kb), 0ull, desc(sK + kb * 2048, 8192, 1024), 1);
        COMMIT();
        WAIT(1);            // G2 (G3 may still run)
        pin(accY);
        #pragma unroll
        for (int c = 0; c < 8; ++c) {   // Y *= c_i
            float2 ci = WORK ? LDTAB(64 + 8 * c + col0) : make_float2(1.f, 1.f);
            accY[4 * c] *= ci.x; accY[4 * c + 1] *= ci.y; accY[4 * c + 2] *= ci.x; accY[4 * c + 3] *= ci.y;
        }
        if constexpr (OLD) {    // G4 of this chunk behind G3, its output after both
            FENCE();
            #pragma unroll
            for (int kb = 0; kb < 4; ++kb) mma_64_rs_k(accY, a4(rV + 4 * kb), 0ull, desc(sP + kb * 32), 1);
            COMMIT();
        }
        WAIT(0);            // G3 (OLD: and G4): nothing in flight across the back edge
        pin(accS);
        if constexpr (OLD) {
            output(accY, rO, sO, lane, WORK, keep);
        }
    }
    long long t1 = clock64();
    float s = (float)keep;
    #pragma unroll
    for (int e = 0; e < 64; ++e) s += accS[e];
    #pragma unroll
    for (int e = 0; e < 32; ++e) s += accY[e];
    if (s != 0.f) sink[threadIdx.x] = s;
    if (lt == 0) cycles[wg] = t1 - t0;
}
"""


def source() -> str:
    parts = [_PRELUDE]
    fns = {(n, rs, False) for n in SHAPES for rs in (True, False)} | {(128, True, True)}   # + G3's
    for key in sorted(fns):
        parts.append(_mma_fn(*key))
    for n in SHAPES:
        for rs in (True, False):
            parts.append(_rate_kernel(n, rs))
    parts.append(_CHAIN)
    rate = ",\n".join(f'    {{{n}, {int(rs)}, {k}, {mode}, probe_{n}_{"rs" if rs else "ss"}<{k}, {mode}>}}'
                      for n in SHAPES for rs in (True, False) for mode, k in MODES)
    chain = ",\n".join(f'    {{"{name}", {work}, chain<{old}, {work}>}}' for name, old, work in CHAINS)
    parts.append(f"""
typedef void (*rate_fn)(long long *, float *, int);
typedef void (*chain_fn)(long long *, float *, int, float, int);
struct Rate {{ int n; int rs; int k; int mode; rate_fn f; }};
struct Chain {{ const char *name; int work; chain_fn f; }};
static const Rate rates[] = {{
{rate}
}};
static const Chain chains[] = {{
{chain}
}};

// best of 5 launches on one SM: the larger of the two warpgroups' cycle counts
template <class F> static long long best_of(F launch, long long *cyc) {{
    long long best = -1;
    for (int rep = 0; rep < 5; ++rep) {{
        launch();
        long long h[2] = {{0, 0}};
        cudaError_t err = cudaDeviceSynchronize();
        if (err != cudaSuccess) {{ printf("launch failed: %s\\n", cudaGetErrorString(err)); return -1; }}
        cudaMemcpy(h, cyc, sizeof h, cudaMemcpyDeviceToHost);
        long long c = h[0] > h[1] ? h[0] : h[1];
        if (best < 0 || c < best) best = c;
    }}
    return best;
}}

int main() {{
    long long *cyc; float *sink;
    cudaMalloc(&cyc, 2 * sizeof(long long)); cudaMalloc(&sink, 256 * sizeof(float));
    const int rate_smem = 8192 + 32768 + 1024, chain_smem = 83 * 1024;
    printf("kind,n,a,warpgroups,mode,k,cycles_per_kstep,cycles_per_group\\n");
    for (const Rate &p : rates) {{
        cudaFuncSetAttribute((const void *)p.f, cudaFuncAttributeMaxDynamicSharedMemorySize, rate_smem);
        for (int wgs = 1; wgs <= 2; ++wgs) {{
            cudaMemset(cyc, 0, 2 * sizeof(long long));
            long long c = best_of([&] {{ p.f<<<1, 128 * wgs, rate_smem>>>(cyc, sink, {ITERS}); }}, cyc);
            if (c < 0) return 1;
            double per_group = (double)c / {ITERS};
            printf("rate,%d,%s,%d,%s,%d,%.2f,%.1f\\n", p.n, p.rs ? "RS" : "SS", wgs, p.mode ? "group" : "rate",
                   p.k, per_group / (p.k * wgs), per_group);
        }}
    }}
    for (const Chain &p : chains) {{
        cudaFuncSetAttribute((const void *)p.f, cudaFuncAttributeMaxDynamicSharedMemorySize, chain_smem);
        for (int wgs = 1; wgs <= 2; ++wgs) {{
            cudaMemset(cyc, 0, 2 * sizeof(long long));
            long long c = best_of([&] {{ p.f<<<1, 128 * wgs, chain_smem>>>(cyc, sink, {ITERS}, 0.999f, 64); }}, cyc);
            if (c < 0) return 1;
            printf("chain,%s,%s,%d,chunk,0,0,%.1f\\n", p.name, p.work ? "{WORK_LABELS[1]}" : "{WORK_LABELS[0]}", wgs,
                   (double)c / {ITERS});
        }}
    }}
    return 0;
}}
""")
    return "".join(parts)


def _table(rows: list[str], gpu: str) -> str:
    lines = [f"# wgmma_probe ({gpu}, {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; one CTA, "
             f"best of 5 launches of {ITERS} groups / chunks; cycles are SM clocks)", "",
             "| kind | N / schedule | A / work | warpgroups | mode | k-steps per group | cycles per k-step (SM) "
             "| cycles per group / chunk | % of the datasheet rate |", "|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        kind, n, a, wgs, mode, k, per_k, per_g = row.split(",")
        if kind == "rate":
            pct = f"{100 * int(n) * 64 * 16 / PEAK_MACS_PER_CYCLE / float(per_k):.0f}"
            lines.append(f"| {kind} | {n} | {a} | {wgs} | {mode} | {k} | {float(per_k):.1f} | {float(per_g):.0f} | {pct} |")
        else:   # a chunk is 1,024 cycles of MMA at the datasheet rate per warpgroup
            pct = f"{100 * 1024 * int(wgs) / float(per_g):.0f}"
            lines.append(f"| {kind} | {n} | {a} | {wgs} | {mode} | | | {float(per_g):.0f} | {pct} |")
    return "\n".join(lines)


def compile_probe(out: str, cubin: bool = False) -> str:
    """nvcc the generated source into `out` (an executable, or with cubin=True a cubin for SASS
    checks); returns ptxas's report.  Raises RuntimeError where ptxas serialised the wgmmas of a
    kernel (C751x: what this probe times would then not be the schedule it names)."""
    src = out + ".cu"
    with open(src, "w") as f:
        f.write(source())
    cmd = ["nvcc", *NVCC_FLAGS, "-Xptxas", "-v", *(["-cubin"] if cubin else []), "-o", out, src]
    res = subprocess.run(cmd, check=True, capture_output=True, text=True)
    report = res.stdout + res.stderr
    bad = [line for line in report.splitlines() if "(C751" in line or "(C752" in line]
    if bad:
        raise RuntimeError("ptxas serialised wgmmas:\n" + "\n".join(bad))
    return report


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="also write the table to this markdown file")
    ap.add_argument("--source", help="write the generated CUDA source here and exit")
    args = ap.parse_args()
    if args.source:
        with open(args.source, "w") as f:
            f.write(source())
        return 0
    smi = shutil.which("nvidia-smi")
    gpu = subprocess.run([smi, "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                         text=True).stdout.strip().splitlines()[0] if smi else ""
    if not any(h in gpu for h in ("H100", "H200", "H800", "H20", "GH200")):
        print(f"wgmma_probe: no Hopper GPU visible ({gpu or 'no nvidia-smi'}); nothing to measure.")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        exe = os.path.join(tmp, "wgmma_probe")
        compile_probe(exe)
        res = subprocess.run([exe], capture_output=True, text=True)
    rows = res.stdout.splitlines()[1:]
    try:
        text = _table([r for r in rows if r and not r.startswith("launch")], gpu)
    except ValueError as e:   # keep what was measured even where a row does not parse
        text = f"wgmma_probe: a row did not parse ({e}); the raw rows:\n" + res.stdout
    failed = [r for r in rows if r.startswith("launch")] + ([res.stderr.strip()] if res.stderr.strip() else [])
    if res.returncode != 0 or failed:
        text += "\n\nwgmma_probe: the probe stopped (rc %d) after the rows above: %s" % (res.returncode, "; ".join(failed))
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 0 if res.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
