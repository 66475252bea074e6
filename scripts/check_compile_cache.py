#!/usr/bin/env python
"""What JAX's persistent compilation cache saves on a large muscle model.

Runs, in two fresh processes one after the other, the first call of
``jax.jit(mb.muscle_lengths_and_moment_arms)`` on MoBL-ARMS (50 muscles, all wraps),
timing tracing and lowering (``.lower``), compiling (``.compile``) and the whole call,
with ``JAX_COMPILATION_CACHE_DIR`` pointing at an empty temporary folder. The first
process compiles and stores the program; the second traces and lowers it again (no
cache covers that) and loads the compiled program. Prints both times and the
cache's size. About 6 minutes on one core of the 2-core VM.

Run: `taskset -c 1 .venv/bin/python scripts/check_compile_cache.py [--model PATH]`.
"""

import argparse
import os
import pathlib
import subprocess
import sys
import tempfile

CHILD = """
import os, sys, time, warnings
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_use_fusion_emitters=false")
import jax
jax.config.update("jax_enable_x64", True)
import jaxmb as mb
with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # MoBL-ARMS's skipped forces and impossible inertias
    model = mb.io.load_osim(sys.argv[1])
q = model.q_default
t0 = time.perf_counter()
lowered = jax.jit(lambda q: mb.muscle_lengths_and_moment_arms(model, q)).lower(q)
t1 = time.perf_counter()
compiled = lowered.compile()
t2 = time.perf_counter()
lengths, arms = compiled(q)
arms.block_until_ready()
t3 = time.perf_counter()
print(f"{t1 - t0:.1f} {t2 - t1:.1f} {t3 - t0:.1f}")
"""


def main(argv=None):
    root = pathlib.Path(__file__).resolve().parents[1]
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default=str(root.parent / "shared" / "models" / "MOBL_ARMS_fixed_41.osim"))
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, JAX_COMPILATION_CACHE_DIR=cache)
        times = []
        for label in ("empty cache", "filled cache"):
            out = subprocess.run([sys.executable, "-c", CHILD, args.model], env=env, capture_output=True,
                                 text=True, check=True)
            trace, compile_, total = (float(x) for x in out.stdout.split()[-3:])
            times.append(total)
            print(f"first call, {label}: {total:.1f} s (trace and lower {trace:.1f} s, "
                  f"compile or load {compile_:.1f} s)", flush=True)
        size = sum(f.stat().st_size for f in pathlib.Path(cache).rglob("*") if f.is_file())
        print(f"cache: {size / 1e6:.1f} MB; the filled cache saves {times[0] - times[1]:.1f} s "
              f"({times[0] / times[1]:.1f}x)")


if __name__ == "__main__":
    main()
