#!/usr/bin/env python
"""Kvaerno5 with diffrax's default stage iteration against ``solver="kvaerno5"``.

``diffrax.Kvaerno5()`` (diffrax 0.7.2, optimistix 0.1.0) gives each stage at most two
chord iterations and rejects the step when a stage needs a third; jaxmb's
``"kvaerno5"`` runs the iteration until its contraction rate says it has converged
(``jaxmb._simulate._VeryChord``, docs/engine.md "Simulation"). Prints, per problem
and tolerance, steps (rejected), significant digits where a reference exists, and the
CPU time of a compiled run (best of 3), for both and for Tsit5:

- seed 000's double pendulum, 2 s from its fast initial state;
- Andrews' squeezer 0..0.03 s, pre-modeled embedded ODE (order-24 Fourier joint
  functions) and index-1 DAE (Baumgarte 100), digits against the Test Set reference.

Run: ``taskset -c 1 .venv/bin/python scripts/check_kvaerno5_root_finder.py`` (about
3 min).
"""

import os
import sys
import time
from pathlib import Path

os.environ.setdefault("XLA_FLAGS", "--xla_cpu_use_fusion_emitters=false")

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import diffrax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import jaxmb as mb  # noqa: E402
from bench_andrews import compiled, digits, premodeled_andrews  # noqa: E402
from jaxmb import models as C  # noqa: E402

SOLVERS = {"diffrax.Kvaerno5()": diffrax.Kvaerno5, '"kvaerno5"': lambda: "kvaerno5", '"tsit5"': lambda: "tsit5"}


def best_cpu(run, repeat=3):
    out = jax.block_until_ready(run())
    best = np.inf
    for _ in range(repeat):
        t = time.process_time()
        jax.block_until_ready(run())
        best = min(best, time.process_time() - t)
    return best, out


def main():
    pendulum = mb.models.double_pendulum()
    q0, qd0 = jnp.array([np.pi / 10, np.pi / 3]), jnp.array([2 * np.pi, -6 * np.pi])
    andrews = C.andrews_squeezer(throw=False)
    fourier, _ = premodeled_andrews(andrews)
    perm = np.asarray([C.ANDREWS_ANGLES.index(n) for n in andrews.joint_names])
    inv = np.argsort(perm)
    z0 = jnp.asarray(C.ANDREWS_Y0)[perm]
    beta0 = jnp.asarray(C.ANDREWS_Y0[:1])

    def pendulum_run(m, tol, solver):
        s = mb.simulate(m, q0, qd0, 2.0, rtol=tol, atol=tol, solver=solver)
        return s.q[-1], s.stats["num_steps"], s.stats["num_rejected_steps"]

    def embedded(m, tol, solver):
        s = mb.simulate(m, beta0, jnp.zeros(1), 0.03, rtol=tol, atol=tol, solver=solver)
        return C.andrews_angles(m, s.q[-1]), s.stats["num_steps"], s.stats["num_rejected_steps"]

    def dae(m, tol, solver):
        s = mb.constraints.simulate_dae(m, z0, jnp.zeros(7), 0.03, alpha=100.0, beta=100.0, rtol=tol, atol=tol,
                                        solver=solver)
        return s.z[-1][inv], s.stats["num_steps"], s.stats["num_rejected_steps"]

    cases = [("double pendulum, 2 s", pendulum_run, pendulum, (1e-6,), False),
             ("Andrews, pre-modeled embedded ODE", embedded, fourier, (1e-5, 1e-7), True),
             ("Andrews, index-1 DAE (Baumgarte 100)", dae, andrews, (1e-5, 1e-7), True)]
    print(f"{'problem':<38} {'tol':>6} {'solver':<20} {'steps':>6} {'rejected':>8} {'digits':>6} {'CPU ms':>8}")
    for name, fn, model, tols, has_reference in cases:
        for tol in tols:
            for label, make in SOLVERS.items():
                run, _ = compiled(lambda m, s, fn=fn, tol=tol: fn(m, tol, s), model, make())
                t, (end, steps, rejected) = best_cpu(run)
                d = f"{digits(np.asarray(end)):6.2f}" if has_reference else f"{'':6}"
                print(f"{name:<38} {tol:6.0e} {label:<20} {int(steps):6d} {int(rejected):8d} {d} {1e3 * t:8.1f}",
                      flush=True)


if __name__ == "__main__":
    main()
