#!/usr/bin/env python
"""Which loops of the Andrews routes XLA's CPU runtime runs on its sequential path, and
what that path is worth.

XLA's CPU runtime executes the kernels ("thunks") of a loop body in one of two ways. If
every buffer that any of them reads or writes is at most 512 bytes (64 float64), or
the body has at most 8 kernels, or its kernels form a chain, it calls them one after
the other. Otherwise it schedules them as a dataflow graph, which costs some tens of
ns more per kernel (``ThunkExecutor``, jax 0.10; the thresholds are compiled in, no
flag changes them). A right-hand side of a few bodies is some twenty kernels, so
that mode is worth as much as a sizeable part of the arithmetic.

Prints, per route, for the right-hand side in a ``fori_loop`` (as
benchmarks/andrews_rhs.py) and for each while loop of a Tsit5 and a Dopri8 simulation
(0..0.03 s, rtol = atol = 2e-5, the model as one flat vector as in the benchmarks): the
kernels of the loop body and its largest buffer, and the CPU time per right-hand side
or per step. The pre-modeled route is run at Fourier order 24 (the benchmarks'), and
at orders 1 and 2: order 1's coefficients, (3, 6, 2), are 288 bytes, order 2's 576.
Two things differ between those, the mode and the product: XLA emits a
matrix-vector product of at most 2 columns inline and calls Eigen from 4. So the
script first times each alone, in loops of their own: a dozen small kernels with one
buffer of 64 float64 (sequential) against 65 (a graph); and matrix products of the
shapes the routes use. Times: best of `--repeat`.

``--variants`` also times the forms tried to put the pre-modeled route and the DAE on
the sequential path, patched over the library for the run (docs/engine.md, "Tried and
not kept"): the order-24 Fourier sums with no buffer over 512 bytes in three ways, and
the DAE with its state as two 7-vectors and its multipliers by a range-space solve
(plus that DAE's Tsit5 runs at 1e-6 and 5e-7, with their digits).

Run: ``taskset -c 1 .venv/bin/python scripts/check_executor_mode.py [--variants]``
(about a minute; two with ``--variants``). docs/engine.md ("Cost on CPU") quotes it.
"""

import argparse
import contextlib
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
import jax.scipy.linalg as jsl  # noqa: E402
import numpy as np  # noqa: E402

import jaxmb as mb  # noqa: E402
from jaxmb import _dae, _kinematics  # noqa: E402
from jaxmb import models as C  # noqa: E402
from jaxmb._dynamics import _mass_matrix_and_forces  # noqa: E402
from jaxmb._functions import FourierSeries, _harmonics  # noqa: E402
from jaxmb._spatial import own_buffer  # noqa: E402

from andrews_rhs import _FREE, best_times, computations, rhs_loop  # noqa: E402
from bench_andrews import compiled, digits  # noqa: E402

SEQUENTIAL_BYTES = 512
_BYTES = {"f64": 8, "s64": 8, "u64": 8, "f32": 4, "s32": 4, "u32": 4, "pred": 1, "s8": 1, "u8": 1}


def _largest_array(shape: str) -> int:
    """Bytes of the largest array in an HLO shape string (tuples: their largest member)."""
    best = 0
    for dtype, dims in re.findall(r"\b(f64|s64|u64|f32|s32|u32|pred|s8|u8)\[([0-9,]*)\]", shape):
        best = max(best, int(np.prod([int(d) for d in dims.split(",") if d], dtype=np.int64)) * _BYTES[dtype])
    return best


def loop_bodies(hlo: str) -> list[tuple[int, int]]:
    """``(kernels, largest buffer in bytes)`` for every while-loop body of a compiled
    module: the kernels are its fusions, dots, custom calls and the like; the buffers
    are their operands and results (constants included)."""
    bodies = set(re.findall(r"body=(%[\w.\-]+)", hlo))
    out = []
    for name, _, lines in computations(hlo):
        if name not in bodies:
            continue
        shapes, kernels, largest = {}, 0, 0
        for line in lines:
            mm = re.match(r"\s*(?:ROOT )?(%[\w.\-]+) = (\(.*?\)|\S+) ([\w\-]+)\((.*)", line)
            if not mm:
                continue
            iname, shape, op, rest = mm.groups()
            shapes[iname] = shape
            if op in _FREE:
                continue
            kernels += 1
            sizes = [_largest_array(shapes.get(o, "")) for o in re.findall(r"%[\w.\-]+", rest.split("), ")[0])]
            if op != "while" and not shape.startswith("("):
                sizes.append(_largest_array(shape))
            largest = max([largest, *sizes])
        out.append((kernels, largest))
    return out


def _describe(compiled_fn) -> str:
    """The three largest loop bodies of a compiled function, by kernel count."""
    rows = sorted(loop_bodies(compiled_fn.as_text()), reverse=True)[:3]
    return "; ".join(f"{k} kernels, {b} B{' (sequential)' if b <= SEQUENTIAL_BYTES else ''}" for k, b in rows)


def kernel_costs(repeat, n=20000):
    """Per-iteration CPU time of (a) 6 independent sine pairs, each kept a kernel of its
    own by a product with the 2x2 identity, plus a sum reading one extra buffer of
    64 or 65 float64; (b) one matrix product A @ B per iteration, B from the carry."""
    print("kernel costs in a fori_loop: ns per iteration")
    eye = jnp.eye(2)

    def pairs(big, c):
        outs = [eye @ jnp.stack([jnp.sin(c * (k + 1.0)), jnp.cos(c + k)]) for k in range(6)]
        return sum(o[0] + o[1] for o in outs) + jnp.sum(big * c)

    runs = {size: (rhs_loop(pairs, n, step=1e-9), (jnp.linspace(0.0, 1.0, size), jnp.asarray(0.3)))
            for size in (64, 65)}
    shapes = [((18, 2), (2, 1)), ((18, 4), (4, 1)), ((18, 48), (48, 1)), ((2, 2), (2, 5)), ((6, 8), (8, 3))]
    for sa, sb in shapes:
        a_scale = (jnp.asarray(np.random.default_rng(0).normal(size=sa)), jnp.arange(1.0, np.prod(sb) + 1.0).reshape(sb))
        runs[sa, sb] = (rhs_loop(lambda p, c: jnp.sum(p[0] @ (c * p[1])), n, step=1e-9), (a_scale, jnp.asarray(0.3)))
    best = best_times(runs, repeat)
    for size in (64, 65):
        fn, args = runs[size]
        kernels = max(k for k, _ in loop_bodies(fn.lower(*args).compile().as_text()))
        print(f"  {kernels} small kernels, one buffer of {size} float64 ({size * 8} B): {best[size] / n * 1e9:6.1f} ns")
    for sa, sb in shapes:
        print(f"  product {sa} @ {sb}: {best[sa, sb] / n * 1e9:6.1f} ns")


# ---------------------------------------------------------------------------
# The routes, as the benchmarks run them.
# ---------------------------------------------------------------------------

def _andrews():
    model = C.andrews_squeezer(throw=False)
    perm = np.asarray([C.ANDREWS_ANGLES.index(name) for name in model.joint_names])
    return model, perm, jnp.asarray(C.ANDREWS_Y0[:1]), jnp.asarray(C.ANDREWS_Y0)[perm]


def _dae_solve(model, z0, tol, solver, split=False):
    """The Baumgarte-100 DAE over 0..0.03 s, ``(z(t1), steps)``; with `split` its state is
    the pytree ``(z, ż)`` (for :func:`_range_space_dae`), else one vector, as
    `mb.constraints.simulate_dae` integrates it."""
    field = mb.constraints.dae_vector_field(model, alpha=100.0, beta=100.0)
    zd0 = jnp.zeros_like(z0)
    sol = diffrax.diffeqsolve(diffrax.ODETerm(field), solver, t0=0.0, t1=0.03, dt0=None,
                              y0=(z0, zd0) if split else jnp.concatenate([z0, zd0]),
                              saveat=diffrax.SaveAt(ts=jnp.asarray([0.03])),
                              stepsize_controller=diffrax.PIDController(rtol=tol, atol=tol), max_steps=100_000)
    return (sol.ys[0][-1] if split else sol.ys[-1, : z0.shape[0]]), sol.stats["num_steps"]


def rhs_and_steps(routes, args, split_dae=False):
    """Per route: the right-hand side in a fori_loop (µs), and µs per Tsit5 and Dopri8
    step, with each compiled function's three largest loop bodies."""
    model, _, q0, z0 = _andrews()
    field = mb.constraints.dae_vector_field(model)
    loops = {}
    for name, m in routes.items():
        if m is None:
            params, static = eqx.partition(field, eqx.is_array)
            rhs = (lambda p, z, static=static: eqx.combine(p, static).accelerations(z, jnp.full(7, 0.1))[0])
            loops[name] = (rhs_loop(rhs, args.evals), (params, z0))
        else:
            params, static = eqx.partition(m, eqx.is_array)
            rhs = (lambda p, q, static=static: mb.forward_dynamics(eqx.combine(p, static), q, jnp.full(1, 0.1)))
            loops[name] = (rhs_loop(rhs, args.evals), (params, q0))
    loops = {name: (fn.lower(*a).compile(), a) for name, (fn, a) in loops.items()}
    best = best_times(loops, args.repeat)
    print("right-hand side in a fori_loop: µs per evaluation; loop bodies (kernels, largest buffer)")
    for name, (fn, _) in loops.items():
        print(f"  {name:<32} {best[name] / args.evals * 1e6:6.2f} µs   {_describe(fn)}")

    tol = jnp.asarray(args.tol)
    sims = {}
    for sname in ("Tsit5", "Dopri8"):
        solver = getattr(diffrax, sname)()
        for name, m in routes.items():
            if m is None:
                run, _ = compiled(lambda mm, t, solver=solver: _dae_solve(mm, z0, t, solver, split_dae)[1], model, tol)
            else:
                run, _ = compiled(lambda mm, t, solver=solver: mb.simulate(
                    mm, q0, jnp.zeros(1), 0.03, rtol=t, atol=t, solver=solver, throw=False).stats["num_steps"], m, tol)
            sims[sname, name] = (run, ())
    best = best_times(sims, args.repeat, calls=3)
    print(f"simulation 0..0.03 s, rtol = atol = {args.tol:g}: µs per step; loop bodies")
    for (sname, name), (run, _) in sims.items():
        steps = int(run())
        print(f"  {sname:<7} {name:<32} {best[sname, name] / steps * 1e6:6.2f} µs/step ({steps} steps)   "
              f"{_describe(run.func)}")


# ---------------------------------------------------------------------------
# --variants: forms tried and not kept, patched over the library for the run.
# ---------------------------------------------------------------------------

@contextlib.contextmanager
def _patched(obj, **attrs):
    """`obj`'s attributes replaced for the block. JAX's trace caches are cleared on the
    way in and out: `mb.simulate`'s inner jitted functions would otherwise reuse the
    traces of the unpatched code."""
    saved = {k: getattr(obj, k) for k in attrs}
    jax.clear_caches()
    for k, v in attrs.items():
        setattr(obj, k, v)
    try:
        yield
    finally:
        for k, v in saved.items():
            setattr(obj, k, v)
        jax.clear_caches()


def _sums_by_columns(fns, x):
    """(m, 3) sums: unrolled over k as (m,)-vector products of per-harmonic amplitude
    columns (48 columns, each a loop buffer of its own), one fusion."""
    n, m = fns[0].a.shape[-1], len(fns)
    c, s = own_buffer(jnp.stack(_harmonics(n, fns[0].omega * x)))
    f = d1 = d2 = 0.0
    for k in range(n):
        w = (k + 1) * fns[0].omega
        ak, bk = jnp.stack([fn.a[k] for fn in fns]), jnp.stack([fn.b[k] for fn in fns])
        f = f + ak * c[k] + bk * s[k]
        d1 = d1 + w * (bk * c[k] - ak * s[k])
        d2 = d2 - (w * w) * (ak * c[k] + bk * s[k])
    return _own_rows(jnp.concatenate([f, d1, d2]), m)


def _sums_by_chunks(fns, x, width=5):
    """(m, 3) sums: amplitudes in (m, 2 width) chunks made buffers of their own by a
    product with the identity, the sums unrolled over k in one fusion."""
    n, m = fns[0].a.shape[-1], len(fns)
    c, s = own_buffer(jnp.stack(_harmonics(n, fns[0].omega * x)))
    eye = jnp.eye(m, dtype=c.dtype)
    f = d1 = d2 = 0.0
    for lo in range(0, n, width):
        hi = min(n, lo + width)
        chunk = eye @ jnp.stack([jnp.concatenate([fn.a[lo:hi], fn.b[lo:hi]]) for fn in fns])
        for i, k in enumerate(range(lo, hi)):
            w = (k + 1) * fns[0].omega
            ak, bk = chunk[:, i], chunk[:, hi - lo + i]
            f = f + ak * c[k] + bk * s[k]
            d1 = d1 + w * (bk * c[k] - ak * s[k])
            d2 = d2 - (w * w) * (ak * c[k] + bk * s[k])
    return _own_rows(jnp.concatenate([f, d1, d2]), m)


def _sums_by_chunk_products(fns, x, width=5):
    """(m, 3) sums: one (m, 2 width) x (2 width, 3) product per chunk of harmonics."""
    n = fns[0].a.shape[-1]
    c, s = _harmonics(n, fns[0].omega * x)
    kw = jnp.arange(1, n + 1, dtype=c.dtype) * fns[0].omega
    total = 0.0
    for lo in range(0, n, width):
        cc, ss, ww = c[lo:lo + width], s[lo:lo + width], kw[lo:lo + width]
        h = jnp.stack([jnp.concatenate([cc, ss]), jnp.concatenate([-ww * ss, ww * cc]),
                       -jnp.concatenate([ww * ww * cc, ww * ww * ss])], axis=1)
        total = total + jnp.stack([jnp.concatenate([fn.a[lo:lo + width], fn.b[lo:lo + width]]) for fn in fns]) @ h
    return total


def _own_rows(flat, m):
    """``(f, f', f'')`` sums (3m,) -> (m, 3), computed into a buffer of their own."""
    pad = flat.shape[0] % 2
    flat = jnp.concatenate([flat, jnp.zeros(pad, flat.dtype)]) if pad else flat
    return own_buffer(flat.reshape(2, -1)).reshape(-1)[: 3 * m].reshape(3, m).T


def _per_joint_with(fourier_sums):
    """`_kinematics._per_joint` with every group of Fourier series (same coordinate,
    omega and order) evaluated by ``fourier_sums(series, x) -> (m, 3)`` from their own
    parameter arrays (not stacked), the other joints as before."""
    def per_joint(model, method, q, *rest):
        groups = {}
        for i, joint in enumerate(model.joints):
            fn = joint.function
            if isinstance(fn, FourierSeries):
                groups.setdefault((fn.index, fn.omega, fn.a.shape), []).append(i)
        grouped = {i for members in groups.values() for i in members}
        out = [None if i in grouped else getattr(j.function, method)(q, *rest) for i, j in enumerate(model.joints)]
        for members in groups.values():
            fns = [model.joints[i].function for i in members]
            x = q[fns[0].index]
            sums = fourier_sums(fns, x)
            for k, (i, fn) in enumerate(zip(members, fns)):
                d = (fn.a0 + fn.slope * x + sums[k, 0], fn.slope + sums[k, 1], sums[k, 2])
                out[i] = FourierSeries._outputs(method, d, fn.index, q, *rest)
        return out

    return per_joint


def _range_space_accelerations(self, z, zd):
    """The DAE's z̈, λ with every buffer under 64 numbers: M z̈ + Φ_zᵀ λ = Q, Φ_z z̈ = c
    by Cholesky factors of M and of S = Φ_z M⁻¹ Φ_zᵀ (no 13 x 13 KKT matrix)."""
    m, rhs = _mass_matrix_and_forces(self.tree, z, zd)
    g = jax.jacfwd(self.phi)(z)
    gdot_zd = jax.jvp(lambda x: jax.jvp(self.phi, (x,), (zd,))[1], (z,), (zd,))[1]
    c = -gdot_zd - 2.0 * self.alpha * (g @ zd) - self.beta**2 * self.phi(z)
    k = g.shape[0]
    yy = jsl.cho_solve(jsl.cho_factor(m, lower=True), jnp.concatenate([g.T, rhs[:, None]], axis=1))
    y_g, y_q = yy[:, :k], yy[:, k]
    lam = jsl.cho_solve(jsl.cho_factor(g @ y_g, lower=True), g @ y_q - c)
    return y_q - y_g @ lam, lam


def _split_state_call(self, t, y, args):
    z, zd = y
    return zd, self.accelerations(z, zd)[0]


def variants(args, premodeled):
    for label, sums in (("columns", _sums_by_columns), ("chunks", _sums_by_chunks),
                        ("chunk products", _sums_by_chunk_products)):
        print(f"\n--variants: pre-modeled Fourier sums by {label}")
        with _patched(_kinematics, _per_joint=_per_joint_with(sums)):
            rhs_and_steps({f"pre-modeled, {label}": premodeled}, args)
    print("\n--variants: the DAE with a split state and a range-space solve")
    with _patched(_dae.DAEVectorField, accelerations=_range_space_accelerations, __call__=_split_state_call):
        rhs_and_steps({"index-1 DAE, range-space": None}, args, split_dae=True)
        model, perm, _, z0 = _andrews()
        runs = {tl: compiled(lambda mm, t: _dae_solve(mm, z0, t, diffrax.Tsit5(), split=True), model,
                             jnp.asarray(tl))[0] for tl in (1e-6, 5e-7)}
        best = best_times({tl: (run, ()) for tl, run in runs.items()}, args.repeat, calls=3)
        for tl, run in runs.items():
            z, steps = run()
            print(f"  Tsit5, tol {tl:g}: {best[tl] * 1e3:.2f} ms, {int(steps)} steps, "
                  f"{digits(np.asarray(z)[np.argsort(perm)]):.2f} digits")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--evals", type=int, default=2000)
    p.add_argument("--tol", type=float, default=2e-5)
    p.add_argument("--variants", action="store_true", help="also time the forms tried and not kept")
    args = p.parse_args(argv)
    kernel_costs(args.repeat)
    print()
    model = _andrews()[0]
    routes = {"implicit": model}
    for order in (24, 2, 1):
        routes[f"pre-modeled, order {order}"] = mb.constraints.premodeled(
            model, 0.0, 2 * np.pi, 2 * np.pi / 512, kind="fourier", order=order)[0]
    routes["index-1 DAE"] = None
    rhs_and_steps(routes, args)
    if args.variants:
        variants(args, routes["pre-modeled, order 24"])


if __name__ == "__main__":
    main()
