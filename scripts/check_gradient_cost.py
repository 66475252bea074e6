#!/usr/bin/env python
"""What reverse mode (``jax.grad`` through a simulation) costs, and what the unrolled
projected pass's custom JVP does to it.

Andrews' squeezer 0..0.03 s, embedded ODE with implicit and with pre-modeled (order
24) joint functions, diffrax Dopri8 at rtol = atol = 1e-8 (73 steps), diffrax's
default adjoint (recursive checkpointing, ``max_steps`` 4096). The loss is β(0.03);
its gradient is taken with respect to a scale s of the spring's stiffness alone (one
parameter, as an identification of a few parameters; in reverse mode, and in forward
mode with ``diffrax.ForwardMode``) and with respect to s and every
array of the model (some 90: masses, inertias, geometry, the fitted series). Printed
per route: CPU time of the simulation alone and of value-and-gradient (best of 5,
interleaved), their ratio, compile times, and dβ/ds next to a central difference of
two simulations at rtol = atol = 1e-12 (step 1e-6), so that a wrong gradient shows.

``--derivatives level-wise`` (default, the library), ``unrolled`` (differentiating the
unrolled scalar pass itself, as before its custom JVP) or ``no-unrolling`` (the
level-wise pass for values too), as in scripts/check_implicit_solver_cost.py.

With ``--crossover K1,K2,...``: where forward and reverse mode cross. For each k the
loss is β(0.03) of the model with its first k floating-point arrays (in pytree order:
masses, inertias, geometry, loads, fitted series) each scaled by its own factor
``1 + p_i``, and the derivative is the k-vector dβ/dp at p = 0, by ``jax.jacfwd`` with
``diffrax.ForwardMode`` (k tangents carried with the simulation) and by ``jax.grad``
(one backward pass). Printed per route and k: both times, their ratio to the
simulation, compile times, the largest absolute difference between the two
derivatives and the largest |dβ/dp|.

Run: ``taskset -c 1 .venv/bin/python scripts/check_gradient_cost.py [--derivatives
unrolled|no-unrolling] [--crossover 1,2,4,8,16,32,64]`` (about 2 min; 6 with
``unrolled``, 8 with ``--crossover``). docs/engine.md quotes it.
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
import jax.numpy as jnp  # noqa: E402

import jaxmb as mb  # noqa: E402
from jaxmb import models as C  # noqa: E402

from andrews_rhs import best_times  # noqa: E402
from check_implicit_solver_cost import DERIVATIVES, use_derivatives  # noqa: E402
from bench_andrews import compiled, premodeled_andrews, scaled_stiffness  # noqa: E402


def scaled_arrays(model, p):
    """`model` with its first ``len(p)`` floating-point arrays (pytree order) each scaled
    by ``1 + p_i``: k scalar parameters that touch k different parts of the model."""
    arrays, static = eqx.partition(model, eqx.is_inexact_array)
    leaves, tree = jax.tree_util.tree_flatten(arrays)
    if p.shape[0] > len(leaves):
        raise ValueError(f"the model has {len(leaves)} floating-point arrays, fewer than the {p.shape[0]} asked for")
    leaves = [x * (1 + p[i]) if i < p.shape[0] else x for i, x in enumerate(leaves)]
    return eqx.combine(jax.tree_util.tree_unflatten(tree, leaves), static)


def crossover(models, counts, tol, beta):
    """Time forward mode (``jax.jacfwd``) against reverse mode (``jax.grad``) for k = each
    of `counts` parameters (:func:`scaled_arrays`) and print the table."""

    def forward(m, p):
        return jax.jacfwd(lambda p: beta(scaled_arrays(m, p), 1.0, tol, diffrax.ForwardMode())[0])(p)

    def reverse(m, p):
        return jax.grad(lambda p: beta(scaled_arrays(m, p), 1.0, tol)[0])(p)

    runs, compile_s = {}, {}
    for name, m in models.items():
        for key, fn, args in [((name, 0), lambda m: beta(m, 1.0, tol)[0], ())] + [
                ((name, mode, k), fn, (jnp.zeros(k),)) for k in counts
                for mode, fn in (("forward", forward), ("reverse", reverse))]:
            run, compile_s[key] = compiled(fn, m, *args)
            runs[key] = (run, ())
    seconds = best_times(runs, repeat=5)
    for name in models:
        sim = seconds[name, 0]
        print(f"{name}: simulation {sim * 1e3:.2f} ms")
        print(f"  {'k':>3}  {'jax.jacfwd, ForwardMode':>30}  {'jax.grad':>30}  {'max |difference|':>16}  "
              f"{'max |d beta / d p|':>18}")
        for k in counts:
            f, r = seconds[name, "forward", k], seconds[name, "reverse", k]
            df, dr = runs[name, "forward", k][0](), runs[name, "reverse", k][0]()
            print(f"  {k:>3}  {f * 1e3:8.2f} ms ({f / sim:5.1f}x, {compile_s[name, 'forward', k]:4.1f} s)  "
                  f"{r * 1e3:8.2f} ms ({r / sim:5.1f}x, {compile_s[name, 'reverse', k]:4.1f} s)  "
                  f"{float(jnp.max(jnp.abs(df - dr))):16.2e}  {float(jnp.max(jnp.abs(dr))):18.2e}", flush=True)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--derivatives", choices=DERIVATIVES, default="level-wise")
    p.add_argument("--tol", type=float, default=1e-8)
    p.add_argument("--checkpoints", type=int, default=None,
                   help="checkpoints of diffrax.RecursiveCheckpointAdjoint (default: diffrax's choice for "
                        "max_steps 4096; 4096 stores every step and recomputes none)")
    p.add_argument("--crossover", default=None, metavar="K1,K2,...",
                   help="time forward against reverse mode for these numbers of parameters instead")
    args = p.parse_args(argv)
    use_derivatives(args.derivatives)
    model = C.andrews_squeezer(throw=False)
    fourier, _ = premodeled_andrews(model)
    q0 = jnp.asarray(C.ANDREWS_Y0[:1])
    adjoint = diffrax.RecursiveCheckpointAdjoint(checkpoints=args.checkpoints)

    def beta(m, s, tol, adjoint=adjoint):
        sol = mb.simulate(scaled_stiffness(m, s), q0, jnp.zeros(1), 0.03, rtol=tol, atol=tol, solver="dopri8",
                          max_steps=4096, throw=False, adjoint=adjoint)
        return sol.q[-1, 0], sol.stats["num_steps"]

    def forward_mode_stiffness(m, s, tol):
        # One parameter: a forward-mode derivative (one tangent carried with the
        # simulation) needs no backward pass; diffrax.ForwardMode is the adjoint for it.
        b, ds, steps = jax.jvp(lambda s: beta(m, s, tol, diffrax.ForwardMode()), (s,), (jnp.ones_like(s),),
                               has_aux=True)
        return b, steps, ds

    def gradient_stiffness(m, s, tol):
        (b, steps), ds = jax.value_and_grad(beta, argnums=1, has_aux=True)(m, s, tol)
        return b, steps, ds

    def gradient_model(m, s, tol):
        # The model enters as a pytree, so jax.grad gives one cotangent per array.
        (b, steps), (dm, ds) = jax.value_and_grad(beta, argnums=(0, 1), has_aux=True)(m, s, tol)
        leaves = jax.tree_util.tree_leaves(dm)
        return b, steps, ds, jnp.sqrt(sum(jnp.sum(x**2) for x in leaves))

    if args.crossover:
        counts = [int(k) for k in args.crossover.split(",")]
        print(f"Dopri8, rtol = atol = {args.tol:g}: forward against reverse mode in k parameters "
              "(times best of 5; in brackets the ratio to the simulation and the compile time)")
        crossover({"implicit": model, "pre-modeled": fourier}, counts, jnp.asarray(args.tol), beta)
        return

    kinds = {"simulation": beta, "gradient in s": gradient_stiffness, "forward mode in s": forward_mode_stiffness,
             "gradient in s and model": gradient_model}

    print(f"Dopri8, rtol = atol = {args.tol:g}, checkpoints {args.checkpoints or 'diffrax default'}, "
          f"derivatives of the unrolled pass: {args.derivatives}")
    runs, compile_s = {}, {}
    one, tol = jnp.asarray(1.0), jnp.asarray(args.tol)
    for name, m in (("implicit", model), ("pre-modeled", fourier)):
        for what, fn in kinds.items():
            runs[name, what], compile_s[name, what] = compiled(fn, m, one, tol)
            runs[name, what] = (runs[name, what], ())
    seconds = best_times(runs, repeat=5)
    fine = jax.jit(beta)
    for name, m in (("implicit", model), ("pre-modeled", fourier)):
        b, steps = runs[name, "simulation"][0]()
        _, _, ds_alone = runs[name, "gradient in s"][0]()
        _, _, ds_forward = runs[name, "forward mode in s"][0]()
        _, _, ds, norm = runs[name, "gradient in s and model"][0]()
        h = 1e-6
        fd = (fine(m, 1.0 + h, 1e-12)[0] - fine(m, 1.0 - h, 1e-12)[0]) / (2 * h)
        print(f"{name}: {int(steps)} steps, beta(0.03) = {float(b):.12f}")
        for what in kinds:
            t = seconds[name, what]
            print(f"  {what:<24} {t * 1e3:7.2f} ms  ({t / seconds[name, 'simulation']:4.1f}x the simulation; "
                  f"compile {compile_s[name, what]:5.1f} s)")
        print(f"  d beta / d s = {float(ds_alone):.10e} (alone), {float(ds_forward):.10e} (forward mode), "
              f"{float(ds):.10e} (with the model), "
              f"central difference at 1e-12: {float(fd):.10e}; |d beta / d model| = {float(norm):.6e}", flush=True)


if __name__ == "__main__":
    main()
