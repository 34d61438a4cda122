"""What the compiled kernels are made of, read from the shipped sm_90a cubins (no GPU needed).

    python -m gdn_prefill.sass          # a table: registers, shared memory, key instructions

Registers and static shared memory come from the cubin's ELF section headers; the
instruction counts from `nvdisasm` (pip install nvidia-cuda-nvdisasm, or CUDA's own).
HGMMA = warpgroup MMA, UTMALDG = TMA bulk-tensor load, LDL/STL = local memory (spills).
"""
from __future__ import annotations

import glob
import os
import re
import shutil
import struct
import subprocess
import sys

from . import _manifest

OPCODES = ("HGMMA", "HMMA", "UTMALDG", "UTMASTG", "LDL", "STL", "FFMA", "LDGSTS", "STSM", "LDSM", "ARRIVES")


def nvdisasm() -> str | None:
    """Path of nvdisasm: on PATH, beside CUDA, or from the nvidia-cuda-nvdisasm wheel."""
    found = shutil.which("nvdisasm")
    if found:
        return found
    candidates = [os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvdisasm")]
    for base in sys.path:
        candidates += glob.glob(os.path.join(base, "nvidia", "cu*", "bin", "nvdisasm"))
        candidates += glob.glob(os.path.join(base, "nvidia", "cuda_nvdisasm", "bin", "nvdisasm"))
    for c in candidates:
        if os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None


def _sections(path: str) -> list[tuple[str, int, int, bytes]]:
    """(name, sh_info, sh_size, contents) of every section of a 64-bit little-endian ELF."""
    data = open(path, "rb").read()
    if data[:4] != b"\x7fELF" or data[4] != 2:
        raise ValueError(f"{path}: not a 64-bit ELF cubin")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    strtab = headers[shstrndx]
    names = data[strtab[4]:strtab[4] + strtab[5]]
    out = []
    for h in headers:
        name = names[h[0]:names.index(b"\0", h[0])].decode()
        out.append((name, h[7], h[5], data[h[4]:h[4] + h[5]] if h[1] != 8 else b""))
    return out


# .nv.info attributes (format 0x04 = 16-bit size + payload of (symbol index u32, value u32))
_EIATTR_FRAME_SIZE = 0x11
_EIATTR_REGCOUNT = 0x2F


def _nv_info(blob: bytes) -> list[tuple[int, bytes]]:
    out, i = [], 0
    while i + 2 <= len(blob):
        fmt, attr = blob[i], blob[i + 1]
        if fmt == 0x04:
            size, = struct.unpack_from("<H", blob, i + 2)
            out.append((attr, blob[i + 4:i + 4 + size]))
            i += 4 + size
        elif fmt == 0x03:
            out.append((attr, blob[i + 2:i + 4]))
            i += 4
        else:
            out.append((attr, b""))
            i += 2 if fmt == 0x01 else 4
    return out


def elf_arch(path: str) -> int:
    """The SM number encoded in the cubin's ELF e_flags (90 for sm_90a)."""
    data = open(path, "rb").read(0x40)
    e_flags, = struct.unpack_from("<I", data, 0x30)
    # CUDA ELF: bits 8..15 hold the SM version (ABI v2 and later).
    return (e_flags >> 8) & 0xFF


def resources(path: str) -> list[dict]:
    """Per kernel in the cubin: registers and static shared memory bytes."""
    secs = _sections(path)
    shared = {n[len(".nv.shared."):]: size for n, _, size, _ in secs if n.startswith(".nv.shared.")}
    regs, frame = {}, {}
    for name, _, _, blob in secs:
        if name == ".nv.info":
            for attr, payload in _nv_info(blob):
                if attr in (_EIATTR_REGCOUNT, _EIATTR_FRAME_SIZE) and len(payload) == 8:
                    sym, value = struct.unpack("<II", payload)
                    (regs if attr == _EIATTR_REGCOUNT else frame)[sym] = value
    kernels = [n[len(".text."):] for n, _, _, _ in secs if n.startswith(".text.")]
    out = []
    for kernel in kernels:
        # one kernel per cubin here: the attribute's symbol index names it
        out.append({"kernel": kernel, "registers": next(iter(regs.values()), None),
                    "stack_frame": next(iter(frame.values()), None), "static_smem": shared.get(kernel, 0)})
    return out


def disassemble(path: str, *flags: str) -> str:
    """nvdisasm's SASS of a cubin (extra nvdisasm flags, e.g. "-hex", pass through)."""
    tool = nvdisasm()
    if tool is None:
        raise FileNotFoundError("nvdisasm not found (pip install nvidia-cuda-nvdisasm)")
    return subprocess.run([tool, *flags, "-c", path], check=True, capture_output=True, text=True).stdout


def instructions(path: str) -> list[dict]:
    """Every instruction of a cubin with its scheduling control, decoded from the encoding's top
    23 bits (sm_70 and later): `wait`, the mask of scoreboards it waits for before issuing; `wb` /
    `rb`, the scoreboard it sets until its result is written / its sources are read (None if
    none); `stall`, the fixed cycles before the next instruction; `addr`, `text` and `label` (the
    `.L_x_n` label at this address, if any)."""
    lines = disassemble(path, "-hex").splitlines()
    out, label = [], None
    for i, line in enumerate(lines):
        m = re.match(r"\s*(\.L_x_\d+):", line)
        if m:
            label = m.group(1)
            continue
        m = re.search(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;\s*/\* 0x[0-9a-f]+ \*/", line)
        if not m:
            continue
        hi = int(re.search(r"/\* (0x[0-9a-f]+) \*/", lines[i + 1]).group(1), 16)
        ctrl = hi >> 41
        wb, rb = (ctrl >> 5) & 7, (ctrl >> 8) & 7
        out.append({"addr": int(m.group(1), 16), "text": m.group(2), "label": label,
                    "stall": ctrl & 0xF, "wb": None if wb == 7 else wb, "rb": None if rb == 7 else rb,
                    "wait": (ctrl >> 11) & 0x3F})
        label = None
    return out


def loops(instrs: list[dict]) -> list[tuple[int, int]]:
    """(first, last) indices into `instrs` of every loop: a branch back to an earlier label."""
    at = {ins["label"]: k for k, ins in enumerate(instrs) if ins["label"]}
    found = []
    for k, ins in enumerate(instrs):
        m = re.search(r"\bBRA\b.*`\((\.L_x_\d+)\)", ins["text"])
        if m and m.group(1) in at and at[m.group(1)] < k:
            found.append((at[m.group(1)], k))
    return found


def opcode_counts(sass: str) -> dict[str, int]:
    counts = {}
    for op in OPCODES:
        counts[op] = len(re.findall(r"\b%s(?:\.[A-Z0-9_.]+)?\b" % op, sass))
    return counts


def report() -> list[dict]:
    rows = []
    for v in _manifest.load()["variants"]:
        for cubin in _manifest.cubins(v["variant"]):
            sass = disassemble(cubin)
            for r in resources(cubin):
                rows.append({"variant": v["variant"], "dynamic_smem": v.get("smem_bytes"),
                             "threads": v.get("threads"), **r, **opcode_counts(sass)})
    return rows


def main() -> int:
    rows = report()
    cols = ["variant", "threads", "registers", "stack_frame", "dynamic_smem", "static_smem"] + list(OPCODES)
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(str(r.get(c, "")) for c in cols) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
