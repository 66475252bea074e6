#!/usr/bin/env python
"""Compile time of muscle lengths and moment arms (closed form, autodiff) on small
wrapped models, their run time and their values, for before/after comparisons of the
wrap code.

Models (the test suite's): the two-link arm with one ellipsoid-wrapped or one
torus-wrapped muscle (`tests/test_muscles.py::_arm`), and the two muscles whose
cylinder and sphere/ellipsoid wraps chain (`_chained_wraps_model`). Each quantity is
one `jax.jit` of a `lax.map` over six random states; compile is `lower().compile()`,
run the best of 5 calls after it (CPU time).

Run: `.venv/bin/python scripts/wrap_compile_times.py [--save out.npz] [--compare ref.npz]`.
To compare with an earlier version of the code, export its `jaxmb/` to a folder, run
this script from outside the repository with that folder on PYTHONPATH and
`--save ref.npz`, then run it on the current code with `--compare ref.npz`. The
comparison prints the largest difference of every array.
"""

import argparse
import os
import pathlib
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))
from _xla_flags import fusion_emitters_off  # noqa: E402

fusion_emitters_off()

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
# Compile times are reported: no persistent compilation cache (JAX_COMPILATION_CACHE_DIR).
jax.config.update("jax_compilation_cache_dir", None)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))

import jaxmb as mb  # noqa: E402
from jaxmb import _muscles as M  # noqa: E402
from test_muscles import WRAPS, _arm, _chained_wraps_model  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--save", help="write the computed arrays to this .npz")
    p.add_argument("--compare", help="print the largest difference from the arrays in this .npz")
    args = p.parse_args(argv)
    print(f"jaxmb from {mb.__file__}")
    rng = np.random.default_rng(0)
    arm_states = jnp.asarray(np.c_[rng.uniform(-1, 1, 6), rng.uniform(0, 2, 6)])
    models = {
        "arm, ellipsoid": (_arm({"ellipsoid": WRAPS["ellipsoid"]}), arm_states),
        "arm, torus": (_arm({"torus": WRAPS["torus"]}), arm_states),
        "chained cylinder + sphere/ellipsoid": (_chained_wraps_model(), jnp.asarray(rng.uniform(-0.6, 0.6, (6, 2)))),
    }
    out = {}
    print(f"{'model':<38} {'quantity':<22} {'compile s':>9} {'run ms':>8}")
    for name, (model, qs) in models.items():
        for what, fn in (("lengths", lambda q: M.muscle_lengths(model, q)),
                         ("moment arms, closed", lambda q: M.moment_arms(model, q)),
                         ("moment arms, autodiff", lambda q: M.moment_arms(model, q, method="autodiff"))):
            f = jax.jit(lambda qs: jax.lax.map(fn, qs))
            t = time.perf_counter()
            compiled = f.lower(qs).compile()
            dt = time.perf_counter() - t
            out[f"{name}: {what}"] = np.asarray(compiled(qs))
            run = np.inf
            for _ in range(5):
                t = time.process_time()
                jax.block_until_ready(compiled(qs))
                run = min(run, time.process_time() - t)
            print(f"{name:<38} {what:<22} {dt:9.1f} {run * 1e3:8.2f}", flush=True)
    if args.save:
        np.savez(args.save, **out)
    if args.compare:
        ref = np.load(args.compare)
        for key, value in out.items():
            print(f"{key}: max |difference| {np.max(np.abs(value - ref[key])):.1e} (max |value| "
                  f"{np.max(np.abs(value)):.1e})")


if __name__ == "__main__":
    main()
