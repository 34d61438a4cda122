"""tools/ncu_hot.py on a synthetic ncu source-page CSV (no GPU, no ncu): the per-segment table (stage 1's
phases in docs/PERFORMANCE.md) sums executed warp instructions, shared-memory wavefronts and
stall samples between CTA barriers and divides the first two by --ctas."""
import os
import re
import subprocess
import sys

TOOL = os.path.join(os.path.dirname(__file__), "..", "tools", "ncu_hot.py")
HEAD = ["Address", "Source", "Warp Stall Sampling (All Samples)", "Instructions Executed",
        "L1 Wavefronts Shared", "L1 Wavefronts Shared Ideal", "stall_barrier", "stall_long_sb"]
ROWS = [  # address, SASS, samples, executed (all CTAs), wavefronts, ideal, barrier, long_sb
    ("0x7f0000000000", "LDG.E R2, desc[UR4][R2.64]", 10, 800, 0, 0, 0, 10),
    ("0x7f0000000010", "LDS.128 R4, [R1]", 20, 800, 1600, 800, 0, 20),
    ("0x7f0000000020", "BAR.SYNC.DEFER_BLOCKING 0x0", 30, 800, 0, 0, 30, 0),
    ("0x7f0000000030", "HGMMA.64x32x16.F32.BF16 R24, gdesc[UR8], RZ, !UPT, gsb0", 15, 400, 0, 0, 0, 0),
    ("0x7f0000000040", "EXIT", 25, 800, 0, 0, 0, 0),
]


def test_phases_per_cta(tmp_path):
    path = tmp_path / "src.csv"
    lines = ['"Kernel Name","k"', ",".join(f'"{h}"' for h in HEAD)]
    lines += [",".join(f'"{x}"' for x in r) for r in ROWS]
    path.write_text("\n".join(lines) + "\n")
    out = subprocess.run([sys.executable, TOOL, str(path), "--phases", "--ctas", "8"],
                         capture_output=True, text=True, check=True).stdout
    assert "5 SASS lines, 100 stall samples" in out
    segs = re.findall(r"seg\s+(\d+) @\s*\S+\s+(\d+) instr\s+(\d+) exec\s+(\d+) wf\s+([\d.]+)%", out)
    # segment 0 ends at the barrier (its wait counts to it): 3 lines, (800 * 3) / 8 executed,
    # 1600 / 8 wavefronts (not the "Ideal" column), 60 of 100 samples; segment 1 the rest
    assert segs == [("0", "3", "300", "200", "60.0"), ("1", "2", "150", "0", "40.0")], out
    assert re.search(r"stall_barrier\s+30\.0%", out) and re.search(r"stall_long_sb\s+30\.0%", out), out


def test_sections_split_at_setmaxnreg(tmp_path):
    """--sections: the samples of each warpgroup role's code (setmaxnreg to setmaxnreg), each with
    its reasons as shares of its own samples."""
    rows = [ROWS[0],
            ("0x7f0000000008", "USETMAXREG.DEALLOC.CTAPOOL 0x30", 0, 800, 0, 0, 0, 0),
            ROWS[1], ROWS[2],
            ("0x7f0000000028", "USETMAXREG.TRY_ALLOC.CTAPOOL UP1, 0xb0", 0, 800, 0, 0, 0, 0),
            ROWS[3], ROWS[4]]
    path = tmp_path / "src.csv"
    lines = ['"Kernel Name","k"', ",".join(f'"{h}"' for h in HEAD)]
    lines += [",".join(f'"{x}"' for x in r) for r in rows]
    path.write_text("\n".join(lines) + "\n")
    out = subprocess.run([sys.executable, TOOL, str(path), "--sections"],
                         capture_output=True, text=True, check=True).stdout
    got = re.findall(r"^  (.+?)\s+(\d+) instr\s+([\d.]+)% of samples\s+\[(.*)\]$", out, re.M)
    assert [(g[0], g[1], g[2]) for g in got] == [
        ("prologue", "1", "10.0"), ("1: 0x30 registers (dealloc)", "3", "50.0"),
        ("2: 0xb0 registers (try_alloc)", "3", "40.0")], out
    # the 0x30 section: 50 samples, 30 at the barrier (60 %), 20 long scoreboard (40 %)
    assert got[1][3] == "stall_barrier 60%, stall_long_sb 40%", got[1][3]
