#!/usr/bin/env python
"""Where one Andrews simulation's time goes, and two things that are not levers.

Prints, for the pre-modeled Andrews squeezer (Fourier order 24) with diffrax Dopri8 at
rtol = atol = 1e-9 over 0..0.03 s:

1. CPU time per step with diffrax's saving and adjoint options varied (``SaveAt(ts=[t1])``
   as `mb.simulate` uses, ``SaveAt(t1=True)``, ``max_steps`` 4096, ``ForwardMode``,
   ``DirectAdjoint``), next to 13 x the cost of one right-hand side;
2. accepted and rejected steps of the embedded ODE and of the index-1 DAE for a few
   PID step-size controller settings, at 1e-6, 1e-8 and 1e-10;
3. with ``--unrolled``: compile time and CPU time per step of the pre-modeled route and
   of the DAE (Baumgarte 100) with diffrax's Dopri8, whose 13 stages per step run in a
   loop, against :class:`UnrolledDopri8`, the same method with its stages written out
   at trace time (a prototype that was not kept; docs/engine.md, "Tried and not kept").

Run: ``taskset -c 1 .venv/bin/python scripts/check_step_cost.py [--unrolled]`` (about a
minute; with ``--unrolled`` about 3). docs/engine.md ("Cost on CPU") quotes it.
"""

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from _xla_flags import fusion_emitters_off  # noqa: E402

fusion_emitters_off()

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import diffrax  # noqa: E402
import equinox as eqx  # noqa: E402
import equinox.internal as eqxi  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxmb as mb  # noqa: E402
from jaxmb import models as C  # noqa: E402
from jaxmb._simulate import _Vector, _Zero  # noqa: E402

from andrews_rhs import best_times, rhs_loop  # noqa: E402
from bench_andrews import compiled, premodeled_andrews  # noqa: E402

T1 = 0.03


class UnrolledDopri8(diffrax.Dopri8):
    """diffrax's Dopri8 (tableau, FSAL, error estimate, dense output) with the stage loop
    written out at trace time: no loop over stages, the tableau's weights compiled in as
    numbers, zero weights skipped. Explicit ODE terms only; a prototype for measuring."""

    def step(self, terms, t0, t1, y0, args, solver_state, made_jump):
        tab = self.tableau
        first_step, f0 = solver_state
        control = terms.contr(t0, t1)
        redo = first_step | made_jump
        # As diffrax: the first stage is evaluated only on the first step or after a jump
        # (otherwise it is the last stage of the previous step), once for a whole batch.
        f0 = jax.lax.cond(eqxi.unvmap_any(redo), lambda: jnp.where(redo, terms.vf(t0, y0, args), f0),
                          lambda: f0)
        ks = [terms.prod(f0, control)]
        for c, a in zip(tab.c, tab.a_lower):
            yi = y0
            for weight, k in zip(np.asarray(a), ks):
                if weight != 0:
                    yi = yi + float(weight) * k
            fi = terms.vf(t1 if c == 1 else t0 + float(c) * (t1 - t0), yi, args)
            ks.append(terms.prod(fi, control))
        # The last stage is the solution (FSAL and SSAL).
        y_error = sum(float(w) * k for w, k in zip(tab.b_error, ks) if w != 0)
        return yi, y_error, dict(y0=y0, y1=yi, k=jnp.stack(ks)), (jnp.array(False), fi), diffrax.RESULTS.successful


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--unrolled", action="store_true", help="also time the Dopri8 with its stages unrolled")
    args = p.parse_args(argv)
    model = C.andrews_squeezer(throw=False)
    fourier, _ = premodeled_andrews(model)
    q0 = jnp.asarray(C.ANDREWS_Y0[:1])
    y0 = jnp.concatenate([q0, jnp.zeros(1)])
    perm = np.asarray([C.ANDREWS_ANGLES.index(n) for n in model.joint_names])
    z0 = jnp.asarray(C.ANDREWS_Y0)[perm]

    def field(m):  # the vector field `mb.simulate` integrates, with no torque
        return _Vector(m, _Zero(), None, "recursive")

    def solve(saveat, max_steps, adjoint):
        @eqx.filter_jit
        def run(m, tol):
            sol = diffrax.diffeqsolve(diffrax.ODETerm(field(m)), diffrax.Dopri8(), 0.0, T1, None, y0,
                                      saveat=saveat, max_steps=max_steps, adjoint=adjoint, throw=False,
                                      stepsize_controller=diffrax.PIDController(rtol=tol, atol=tol))
            return sol.ys[-1], sol.stats["num_steps"]
        return run

    tol = jnp.asarray(1e-9)
    n = 2000

    params, static = eqx.partition(fourier, eqx.is_array)
    loop = rhs_loop(lambda p, y: field(eqx.combine(p, static))(0.0, y, None), n, step=1e-9)
    rhs_us = best_times({"rhs": (loop, (params, y0))}, repeat=9)["rhs"] / n * 1e6
    print(f"one right-hand side: {rhs_us:.2f} µs; 13 per Dopri8 step: {13 * rhs_us:.1f} µs")
    variants = {
        "SaveAt(ts=[t1]), max_steps 1e6, RecursiveCheckpointAdjoint (as mb.simulate)":
            solve(diffrax.SaveAt(ts=jnp.asarray([T1])), 1_000_000, diffrax.RecursiveCheckpointAdjoint()),
        "SaveAt(t1=True), max_steps 1e6, RecursiveCheckpointAdjoint":
            solve(diffrax.SaveAt(t1=True), 1_000_000, diffrax.RecursiveCheckpointAdjoint()),
        "SaveAt(ts=[t1]), max_steps 4096, RecursiveCheckpointAdjoint":
            solve(diffrax.SaveAt(ts=jnp.asarray([T1])), 4096, diffrax.RecursiveCheckpointAdjoint()),
        "SaveAt(t1=True), max_steps 1e6, ForwardMode":
            solve(diffrax.SaveAt(t1=True), 1_000_000, diffrax.ForwardMode()),
        "SaveAt(t1=True), max_steps 4096, DirectAdjoint":
            solve(diffrax.SaveAt(t1=True), 4096, diffrax.DirectAdjoint()),
    }
    seconds_of = best_times({name: (fn, (fourier, tol)) for name, fn in variants.items()}, repeat=15)
    for name, fn in variants.items():
        seconds = seconds_of[name]
        steps = int(fn(fourier, tol)[1])
        print(f"{name:<80} {seconds * 1e3:6.2f} ms  {steps} steps  {seconds / steps * 1e6:5.1f} µs/step")

    print("\naccepted + rejected steps (Dopri8)")
    controllers = {"default (I, factormax 10)": {}, "factormax 3": dict(factormax=3.0),
                   "PI 0.2/0.4": dict(pcoeff=0.2, icoeff=0.4), "PI 0.4/0.3, factormax 3":
                   dict(pcoeff=0.4, icoeff=0.3, factormax=3.0)}
    for label, kw in controllers.items():
        @eqx.filter_jit
        def embedded(m, tol, kw=kw):
            sol = diffrax.diffeqsolve(diffrax.ODETerm(field(m)), diffrax.Dopri8(), 0.0, T1, None, y0,
                                      saveat=diffrax.SaveAt(t1=True), throw=False, max_steps=100_000,
                                      stepsize_controller=diffrax.PIDController(rtol=tol, atol=tol, **kw))
            return sol.stats["num_accepted_steps"], sol.stats["num_rejected_steps"]

        @eqx.filter_jit
        def dae(m, tol, kw=kw):
            y = jnp.concatenate([z0, jnp.zeros(7)])
            sol = diffrax.diffeqsolve(diffrax.ODETerm(mb.constraints.dae_vector_field(m)), diffrax.Dopri8(),
                                      0.0, T1, None, y, saveat=diffrax.SaveAt(t1=True), throw=False,
                                      max_steps=100_000,
                                      stepsize_controller=diffrax.PIDController(rtol=tol, atol=tol, **kw))
            return sol.stats["num_accepted_steps"], sol.stats["num_rejected_steps"]

        cells = []
        for t in (1e-6, 1e-8, 1e-10):
            ea, er = embedded(fourier, jnp.asarray(t))
            da, dr = dae(model, jnp.asarray(t))
            cells.append(f"{t:.0e}: {int(ea)}+{int(er)} / {int(da)}+{int(dr)}")
        print(f"{label:<28} embedded / DAE   " + "   ".join(cells))

    if args.unrolled:
        unrolled(fourier, model, y0, z0, field)


def unrolled(fourier, model, y0, z0, field):
    """Section 3: diffrax's Dopri8 against :class:`UnrolledDopri8`, per step."""
    print("\nDopri8 stages in a loop (diffrax) / unrolled, rtol = atol = 1e-9")
    runs, compile_s = {}, {}
    for route, m, y, make in (("pre-modeled", fourier, y0, field),
                              ("DAE, Baumgarte 100", model, jnp.concatenate([z0, jnp.zeros(7)]),
                               lambda m: mb.constraints.dae_vector_field(m, alpha=100.0, beta=100.0))):
        for solver in (diffrax.Dopri8, UnrolledDopri8):
            def run(m, tol, y=y, make=make, solver=solver):
                sol = diffrax.diffeqsolve(diffrax.ODETerm(make(m)), solver(), 0.0, T1, None, y,
                                          saveat=diffrax.SaveAt(ts=jnp.asarray([T1])), max_steps=1_000_000,
                                          throw=False, stepsize_controller=diffrax.PIDController(rtol=tol, atol=tol))
                return sol.ys[-1], sol.stats["num_steps"]

            key = (route, solver.__name__)
            fn, compile_s[key] = compiled(run, m, jnp.asarray(1e-9))
            runs[key] = (fn, ())
    seconds = best_times(runs, repeat=9, calls=3)
    for key, (fn, _) in runs.items():
        steps = int(fn()[1])
        print(f"{key[0]:<20} {key[1]:<15} compile {compile_s[key]:5.1f} s  {seconds[key] * 1e3:6.2f} ms  "
              f"{steps} steps  {seconds[key] / steps * 1e6:5.1f} µs/step")


if __name__ == "__main__":
    main()
