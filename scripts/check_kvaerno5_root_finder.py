#!/usr/bin/env python
"""Kvaerno5 with diffrax's default stage iteration against ``solver="kvaerno5"``.

``diffrax.Kvaerno5()`` (diffrax 0.7.2, optimistix 0.1.0) gives each stage at most two
chord iterations and rejects the step when a stage needs a third; jaxmb's
``"kvaerno5"`` runs the iteration until its contraction rate says it has converged
(``jaxmb._simulate._VeryChord``, docs/engine.md "Simulation"). Prints, per problem
and tolerance, steps (rejected), significant digits where a reference exists, and the
CPU time of a compiled run (best of 10), for both and for Tsit5:

- seed 000's double pendulum, 2 s from its fast initial state;
- Andrews' squeezer 0..0.03 s, pre-modeled embedded ODE (order-24 Fourier joint
  functions) and index-1 DAE (Baumgarte 100), digits against the Test Set reference.

With ``--anatomy``, instead, where a ``"kvaerno5"`` step's time goes on the
pre-modeled Andrews run at 1e-7: µs per step, right-hand-side evaluations per step
(counted by a host callback in a separate run), one right-hand side and one
``jax.jacfwd`` of it in a ``fori_loop``, the same solver on a trivial two-state
right-hand side, and the kernels of each ``while`` body of the compiled simulation.

With ``--other-solvers``, the steps of diffrax's Kvaerno3 and Kvaerno4 on the double
pendulum with diffrax's stage iteration and with ``mb.stage_root_finder()``.

Run: ``taskset -c 1 .venv/bin/python scripts/check_kvaerno5_root_finder.py
[--anatomy | --other-solvers]`` (about 5, 1 and 1 min).
"""

import argparse
import collections
import os
import re
import sys
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
from andrews_rhs import _FREE, best_times, computations, rhs_loop  # noqa: E402
from bench_andrews import compiled, digits, premodeled_andrews  # noqa: E402
from jaxmb import models as C  # noqa: E402
from jaxmb._simulate import _solver_by_name  # noqa: E402

SOLVERS = {"diffrax.Kvaerno5()": diffrax.Kvaerno5(), '"kvaerno5"': "kvaerno5", '"tsit5"': "tsit5"}


def best_cpu(run, repeat=10):
    """``(best CPU seconds of run(), its output)``."""
    return best_times({"run": (run, ())}, repeat)["run"], jax.block_until_ready(run())


def anatomy():
    andrews = C.andrews_squeezer(throw=False)
    fourier, _ = premodeled_andrews(andrews)
    params, static = eqx.partition(fourier, eqx.is_array)
    y0 = jnp.array([C.ANDREWS_Y0[0], 0.0])
    tol = 1e-7

    def field(p, y):
        return jnp.concatenate([y[1:], mb.forward_dynamics(eqx.combine(p, static), y[:1], y[1:])])

    def solve(f, y):
        return diffrax.diffeqsolve(diffrax.ODETerm(f), _solver_by_name("kvaerno5"), 0.0, 0.03, None, y,
                                   stepsize_controller=diffrax.PIDController(rtol=tol, atol=tol)).stats["num_steps"]

    def simulation(m):
        return mb.simulate(m, y0[:1], y0[1:], 0.03, rtol=tol, atol=tol, solver="kvaerno5").stats["num_steps"]

    run, _ = compiled(simulation, fourier)
    t, steps = best_cpu(run, 20)
    print(f"pre-modeled Andrews, simulate(solver='kvaerno5') at {tol:g}: {int(steps)} steps, "
          f"{1e6 * t / int(steps):.1f} µs per step")
    calls = []

    def counted(t, x, a):
        jax.debug.callback(lambda _: calls.append(1), x[0])
        return field(params, x)

    counted_steps = jax.block_until_ready(jax.jit(lambda y: solve(counted, y))(y0))
    jax.effects_barrier()
    print(f"  right-hand sides per step (diffeqsolve on the same field, {int(counted_steps)} steps): "
          f"{len(calls) / int(counted_steps):.1f}")
    n = 2000
    loops = {"one right-hand side": rhs_loop(field, n),
             "jax.jacfwd of it": rhs_loop(lambda p, y: jax.jacfwd(lambda x: field(p, x))(y).sum(1), n)}
    for name, us in best_times({k: (fn, (params, y0)) for k, fn in loops.items()}, 5).items():
        print(f"  {name}: {1e6 * us / n:.2f} µs (in a fori_loop)")
    trivial = jax.jit(lambda y: solve(lambda t, x, a: jnp.stack([x[1], -1e4 * jnp.sin(x[0])]), y))
    t, steps = best_cpu(lambda: trivial(y0), 20)
    print(f"  the same solver on a trivial two-state right-hand side: {1e6 * t / int(steps):.1f} µs per step")
    hlo = jax.jit(lambda p: simulation(eqx.combine(p, static))).lower(params).compile().as_text()
    bodies = dict((name, lines) for name, _, lines in computations(hlo))
    for body in re.findall(r"while\([^)]*\), condition=%[\w.\-]+, body=(%[\w.\-]+)", hlo):
        ops = [m.group(1) for line in bodies.get(body, []) if (m := re.search(r"= \S+ ([a-z\-]+)\(", line))
               and m.group(1) not in _FREE]
        print(f"  while body of the simulation {body[:24]}: {len(ops)} kernels {dict(collections.Counter(ops).most_common(4))}")


def other_solvers(pendulum, q0, qd0):
    """Steps (rejected) of diffrax's Kvaerno3 and Kvaerno4 on the double pendulum, with
    diffrax's stage iteration and with ``mb.stage_root_finder()``."""
    run = eqx.filter_jit(lambda s: mb.simulate(pendulum, q0, qd0, 2.0, rtol=1e-6, atol=1e-6, solver=s).stats)
    for cls in (diffrax.Kvaerno3, diffrax.Kvaerno4):
        for label, solver in ((f"diffrax.{cls.__name__}()", cls()),
                              (f"diffrax.{cls.__name__}(root_finder=mb.stage_root_finder())",
                               cls(root_finder=mb.stage_root_finder()))):
            stats = run(solver)
            print(f"double pendulum, 2 s, 1e-6, {label}: {int(stats['num_steps'])} steps "
                  f"({int(stats['num_rejected_steps'])} rejected)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--anatomy", action="store_true", help="where a Kvaerno5 step's time goes")
    parser.add_argument("--other-solvers", action="store_true",
                        help="step counts of Kvaerno3 and Kvaerno4 with either stage iteration")
    args = parser.parse_args()
    if args.anatomy:
        return anatomy()
    pendulum = mb.models.double_pendulum()
    q0, qd0 = jnp.array([np.pi / 10, np.pi / 3]), jnp.array([2 * np.pi, -6 * np.pi])
    if args.other_solvers:
        return other_solvers(pendulum, q0, qd0)
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
            for label, solver in SOLVERS.items():
                run, _ = compiled(lambda m, s, fn=fn, tol=tol: fn(m, tol, s), model, solver)
                t, (end, steps, rejected) = best_cpu(run)
                d = f"{digits(np.asarray(end)):6.2f}" if has_reference else f"{'':6}"
                print(f"{name:<38} {tol:6.0e} {label:<20} {int(steps):6d} {int(rejected):8d} {d} {1e3 * t:8.1f}",
                      flush=True)


if __name__ == "__main__":
    main()
