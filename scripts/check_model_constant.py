#!/usr/bin/env python
"""What a simulation costs with the model passed to ``jax.jit`` against compiled in.

A jitted simulation can take the model's arrays as runtime arguments (what
parameter identification needs: ``jax.grad`` with respect to them) or close over a
fixed model, so that XLA sees its numbers as constants and folds them into the
compiled kernels. This script times both ways on Andrews' squeezer, for the
pre-modeled embedded ODE (periodic quintic splines, 512 intervals) and for the
index-1 DAE (Baumgarte 0), Dopri8 at rtol = atol = 2e-5, from the seed's start
(beta = -0.0620 rad at rest):

- ``flat``: the model's arrays raveled into one vector, the argument
  (benchmarks/andrews_work_precision.py's default, ``--model-as flat``);
- ``argument``: the model's ~90 arrays as separate arguments (``--model-as argument``);
- ``constant``: the model compiled in (``--model-as constant``);
- ``constant, no exact zeros``: compiled in, with every entry of the model that is
  exactly 0 replaced by 1e-300 (the same model to the last bit of every result, but
  XLA and LLVM can no longer drop the products with those entries).

Each row gives the time of a one-step run (t1 = 1e-7 s: dispatch, set-up, the initial
step size and one step) and of the whole 0..0.05 s run, and from the two the cost per
step. CPU time, best of `--repeat` rounds over every way and end time of a route
(`andrews_rhs.best_times`), one process, all compiled first.

Run: ``taskset -c 1 .venv/bin/python scripts/check_model_constant.py`` (about 2 min).
docs/engine.md ("A fixed model compiled in") quotes it.
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from _xla_flags import fusion_emitters_off  # noqa: E402

fusion_emitters_off()

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import equinox as eqx  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxmb as mb  # noqa: E402
from jaxmb import models as C  # noqa: E402

from andrews_rhs import best_times  # noqa: E402
from bench_andrews import model_as_vector, quintic_andrews  # noqa: E402

BETA0, T1, TOL = -0.0620, 0.05, 2e-5


def _without_exact_zeros(model):
    return jax.tree.map(lambda x: jnp.where(x == 0.0, 1e-300, x) if eqx.is_inexact_array(x) else x, model)


def _callers(fn, model):
    """``{way: (jitted, leading args)}`` for ``fn(model, t1)``."""
    flat, rebuild = model_as_vector(model)
    params, static = eqx.partition(model, eqx.is_array)
    fixed = _without_exact_zeros(model)
    return {
        "flat": (jax.jit(lambda p, t1: fn(rebuild(p), t1)), (flat,)),
        "argument": (jax.jit(lambda p, t1: fn(eqx.combine(p, static), t1)), (params,)),
        "constant": (jax.jit(lambda t1: fn(model, t1)), ()),
        "constant, no exact zeros": (jax.jit(lambda t1: fn(fixed, t1)), ()),
    }


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=300)
    args = p.parse_args(argv)

    model = C.andrews_squeezer(throw=False)
    quintic, _ = quintic_andrews(model, 512)
    perm = np.asarray([C.ANDREWS_ANGLES.index(n) for n in model.joint_names])
    q0 = jnp.asarray([BETA0])
    z0 = C.andrews_angles(model, q0)[perm]

    def embedded(m, t1):
        sol = mb.simulate(m, q0, jnp.zeros(1), t1, rtol=TOL, atol=TOL, solver="dopri8", throw=False)
        return sol.q[-1], sol.stats["num_steps"]

    def dae(m, t1):
        s = mb.constraints.simulate_dae(m, z0, jnp.zeros(7), t1, alpha=0.0, beta=0.0, rtol=TOL, atol=TOL,
                                        solver="dopri8")
        return s.z[-1], s.stats["num_steps"]

    print(f"Andrews' squeezer, Dopri8, rtol = atol = {TOL:g}, 0..{T1} s from beta = {BETA0}; CPU time, "
          f"best of {args.repeat} interleaved rounds")
    print(f"{'route':<24} {'model':<26} {'one step µs':>11} {'whole run µs':>12} {'steps':>5} {'µs/step':>8}")
    for name, fn, m in (("pre-modeled (quintic)", embedded, quintic), ("index-1 DAE", dae, model)):
        callers = _callers(fn, m)
        # Every way and end time in each round, so that a slow spell of the machine
        # spoils one round of all of them rather than every call of one.
        runs = {(way, t1): (f, lead + (jnp.asarray(t1),)) for way, (f, lead) in callers.items() for t1 in (1e-7, T1)}
        best = best_times(runs, args.repeat)
        ends = {}
        for way, (f, lead) in callers.items():
            one, whole = best[way, 1e-7], best[way, T1]
            end, steps = f(*lead, jnp.asarray(T1))
            ends[way] = np.asarray(end)
            print(f"{name:<24} {way:<26} {one * 1e6:11.0f} {whole * 1e6:12.0f} {int(steps):5d} "
                  f"{(whole - one) / (int(steps) - 1) * 1e6:8.1f}")
        spread = max(np.abs(e - ends["flat"]).max() for e in ends.values())
        print(f"{'':<24} largest difference of the end state between the ways: {spread:.1e}")


if __name__ == "__main__":
    main()
