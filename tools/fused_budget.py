"""Issue 42's fused CTA on paper: its shared memory, field by field, and its register split.

    python tools/fused_budget.py

No GPU and no DSL: the sizes come from the constants the kernels use (gdn_prefill.plan,
cute_kernels.spine_rs / intra_chunk's tile shapes, restated here as plain numbers), each tile
1,024-byte aligned as the kernels allocate them.  It prints the layouts benchmarks/NOTES.md
(session 32, "The fused kernel's plan") weighs: the 512-thread CTA of two chains, the role and an
I/O warpgroup, with the chain's bf16 S^T staged in shared memory (branch chain-rs-smem) or not,
and the output staged in buffers of its own or in the chunk's V slot.  The register floors are
what ptxas compiled spill-free under setmaxnreg budgets (session 32); they are inputs here, not
computed.
"""
from __future__ import annotations

import sys

CHUNK, DK, DV, VB = 64, 128, 128, 64
BF16, F32 = 2, 4
AS = CHUNK + 4                    # the role's A row stride (fp32), as intra_chunk
XS = CHUNK // 2 + 4               # the role's merge scratch row stride
SMEM_LIMIT = 232_448              # dynamic shared memory one H100 / H200 CTA may have
REGS_PER_THREAD_SUM = 65_536 // 128   # registers per thread summed over a CTA's warpgroups

# floors under setmaxnreg (ptxas, session 32): the chains with rS in registers / staged in smem,
# the lowest budget that keeps their wgmma pipeline and the lowest without a spill (below the
# first, ptxas waits for every wgmma); the role with its norms on the I/O warps; the I/O
# warpgroup (load + norm warps)
FLOORS = {"chain": 224, "chain serialised": 208, "chain_sS": 192, "chain_sS serialised": 176,
          "role": 96, "io": 56}


def up(x: int, a: int) -> int:
    return (x + a - 1) // a * a


def layout(kq_slots: int, v_slots: int, sS: bool, o_in_v: bool) -> list[tuple[str, int, int]]:
    """(field, bytes, alignment) in allocation order."""
    tile = 1024
    f = [("K", kq_slots * CHUNK * DK * BF16, tile), ("q", kq_slots * CHUNK * DK * BF16, tile),
         ("V (both chains' columns)", v_slots * CHUNK * DV * BF16, tile),
         ("Tu", v_slots * CHUNK * CHUNK * BF16, tile), ("P", v_slots * CHUNK * CHUNK * BF16, tile)]
    if not o_in_v:
        f.append(("output staging (2 buffers per chain)", 2 * 2 * CHUNK * VB * BF16, tile))
    if sS:
        f.append(("sS (bf16 S^T per chain)", 2 * VB * DK * BF16, tile))
    f += [("role A (fp32)", CHUNK * AS * F32, 16),
          ("role merge scratch", (CHUNK // 2) * XS * F32, 16),
          ("coefficient tables + (a, beta) ring", v_slots * (2 * CHUNK + 4) * F32 + 2 * CHUNK * 2 * F32, 16),
          ("gate ring (gcum, beta, rk, rq)", 4 * 2 * CHUNK * F32, 16),
          ("mbarriers", 8 * (2 * kq_slots + 2 * v_slots + 2 * 2 + 2 * 2), 8)]
    return f


def total(fields) -> int:
    off = 0
    for _, size, align in fields:
        off = up(off, align) + size
    return up(off, 1024)


def main() -> int:
    print("Registers per thread, summed over the four warpgroups (limit "
          f"{REGS_PER_THREAD_SUM}):")
    for chain in ("chain", "chain serialised", "chain_sS", "chain_sS serialised"):
        need = 2 * FLOORS[chain] + FLOORS["role"] + FLOORS["io"]
        verdict = "fits" if need <= REGS_PER_THREAD_SUM else "does not fit"
        print(f"  {chain:20s} {FLOORS[chain]} x 2 + role {FLOORS['role']} + I/O {FLOORS['io']} = {need}: {verdict}")
    print(f"\nShared memory (limit {SMEM_LIMIT:,} B), K and q in 3 slots, V / Tu / P in 2:")
    for sS in (False, True):
        for o_in_v in (False, True):
            fields = layout(3, 2, sS, o_in_v)
            t = total(fields)
            print(f"  sS {'yes' if sS else 'no ':3s}  output {'in the V slot ' if o_in_v else 'own buffers  '}"
                  f"{t:>9,} B  {'fits' if t <= SMEM_LIMIT else 'over by ' + format(t - SMEM_LIMIT, ',') + ' B'}")
    print("\nThe layout with sS and the output in the V slot, field by field:")
    for name, size, _ in layout(3, 2, True, True):
        print(f"  {name:40s} {size:>8,} B")
    return 0


if __name__ == "__main__":
    sys.exit(main())
