#!/usr/bin/env python
"""What passing a model to a jitted function costs per call: its arrays as separate
arguments against one flat vector (``benchmarks/bench_andrews.model_as_vector``).

Prints, for Andrews' squeezer pre-modeled (Fourier order 24), CPU time per call (best
of 300): an empty jitted function with no model, with the model's arrays, with one
vector; and a one-step simulation (t1 = 1e-6 s, Dopri8, as `mb.simulate` runs it) with
the arrays and with the vector. The benchmarks' harness notes and docs/engine.md
("Simulation") quote it.

Run: ``taskset -c 1 .venv/bin/python scripts/check_dispatch_cost.py`` (about 20 s).
"""

import functools
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from _xla_flags import fusion_emitters_off  # noqa: E402

fusion_emitters_off()

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import diffrax  # noqa: E402
import equinox as eqx  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxmb as mb  # noqa: E402
from jaxmb import models as C  # noqa: E402

from bench_andrews import model_as_vector, premodeled_andrews  # noqa: E402


def best_us(fn, repeat=300):
    jax.block_until_ready(fn())
    best = np.inf
    for _ in range(repeat):
        t = time.process_time()
        jax.block_until_ready(fn())
        best = min(best, time.process_time() - t)
    return best * 1e6


def main():
    model = C.andrews_squeezer(throw=False)
    fourier, _ = premodeled_andrews(model)
    params, static = eqx.partition(fourier, eqx.is_array)
    flat, rebuild = model_as_vector(fourier)
    tol = jnp.asarray(2e-5)
    q0 = jnp.asarray(C.ANDREWS_Y0[:1])

    def one_step(m):
        sol = mb.simulate(m, q0, jnp.zeros(1), 1e-6, rtol=tol, atol=tol, solver=diffrax.Dopri8(), throw=False)
        return sol.q[-1]

    rows = {
        "empty function, no model": functools.partial(jax.jit(lambda t: 2 * t), tol),
        f"empty function, the model's {len(jax.tree_util.tree_leaves(params))} arrays":
            functools.partial(jax.jit(lambda p, t: 2 * t), params, tol),
        "empty function, one vector": functools.partial(jax.jit(lambda p, t: 2 * t), flat, tol),
        "one-step simulation, the model's arrays":
            functools.partial(jax.jit(lambda p: one_step(eqx.combine(p, static))), params),
        "one-step simulation, one vector": functools.partial(jax.jit(lambda p: one_step(rebuild(p))), flat),
    }
    for name, fn in rows.items():
        print(f"{name:<48} {best_us(fn):7.1f} µs per call")


if __name__ == "__main__":
    main()
