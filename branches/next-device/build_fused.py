"""build_fused.py OUT [PREFIX ...]: the variants of the tree in the current directory whose names start
with a PREFIX (default: fused_, the 16 fused variants), two processes at a time (the DSL compiler is
not thread-safe; CUTE_DSL_ARCH=sm_90a is set before cutlass is imported)."""
import os, subprocess, sys
sys.path.insert(0, os.getcwd())
from cute_kernels import registry
out = sys.argv[1]
prefixes = tuple(sys.argv[2:]) or ("fused_",)
os.makedirs(out, exist_ok=True)
procs = []
vs = [(m, v) for m, v, _ in registry.variants() if v.startswith(prefixes)]
for m, v in vs:
    code = ("import os; os.environ['CUTE_DSL_ARCH'] = 'sm_90a'; import sys; sys.path.insert(0, '.'); "
            f"from cute_kernels import aot; aot.compile_one({m!r}, {v!r}, {out!r})")
    procs.append(subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL,
                                  stderr=open(os.path.join(out, v + ".log"), "w")))
    if len(procs) >= 2:
        procs.pop(0).wait()
for p in procs:
    p.wait()
print(len(vs), "variants ->", out)
