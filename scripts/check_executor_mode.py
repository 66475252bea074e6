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

Run: ``taskset -c 1 .venv/bin/python scripts/check_executor_mode.py`` (about a minute).
docs/engine.md ("Cost on CPU") quotes it.
"""

import argparse
import os
import re
import sys
import time
from pathlib import Path

os.environ.setdefault("XLA_FLAGS", "--xla_cpu_use_fusion_emitters=false")

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import diffrax  # noqa: E402
import equinox as eqx  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxmb as mb  # noqa: E402
from jaxmb import models as C  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from bench_andrews import model_as_vector  # noqa: E402

SEQUENTIAL_BYTES = 512
_BYTES = {"f64": 8, "s64": 8, "u64": 8, "f32": 4, "s32": 4, "u32": 4, "pred": 1, "s8": 1, "u8": 1}
_PASS_THROUGH = {"get-tuple-element", "tuple", "parameter", "bitcast", "constant"}


def _largest_array(shape: str) -> int:
    """Bytes of the largest array in an HLO shape string (tuples: their largest member)."""
    best = 0
    for dtype, dims in re.findall(r"\b(f64|s64|u64|f32|s32|u32|pred|s8|u8)\[([0-9,]*)\]", shape):
        best = max(best, int(np.prod([int(d) for d in dims.split(",") if d], dtype=np.int64)) * _BYTES[dtype])
    return best


def loop_bodies(hlo: str) -> list[tuple[str, int, int]]:
    """``(body name, kernels, largest buffer in bytes)`` for every while-loop body of a
    compiled module: the kernels are its fusions, dots, custom calls and the like; the
    buffers are their operands and results (constants included)."""
    bodies = set(re.findall(r"body=(%[\w.\-]+)", hlo))
    out = []
    for m in re.finditer(r"\n(%[^\n]*\{)\n(.*?)\n\}", hlo, re.S):
        name = m.group(1).split(" ")[0]
        if name not in bodies:
            continue
        shapes, kernels, largest = {}, 0, 0
        for line in m.group(2).split("\n"):
            mm = re.match(r"\s*(?:ROOT )?(%[\w.\-]+) = (\(.*?\)|\S+) ([\w\-]+)\((.*)", line)
            if not mm:
                continue
            iname, shape, op, rest = mm.groups()
            shapes[iname] = shape
            if op in _PASS_THROUGH:
                continue
            kernels += 1
            operands = re.findall(r"%[\w.\-]+", rest.split("), ")[0])
            sizes = [_largest_array(shapes.get(o, "")) for o in operands]
            if op != "while" and not shape.startswith("("):
                sizes.append(_largest_array(shape))
            largest = max([largest, *sizes])
        out.append((name, kernels, largest))
    return out


def best_time(fn, args, repeat, calls=3):
    best = np.inf
    for _ in range(repeat):
        for _ in range(calls):
            t = time.process_time()
            out = jax.block_until_ready(fn(*args))
            best = min(best, time.process_time() - t)
    return best, out


def rhs_loop(field, x0, n):
    params, static = eqx.partition(field, eqx.is_array)

    def loop(params, x):
        f = eqx.combine(params, static)

        def body(i, c):
            xx, acc = c
            xdd = f(xx)
            return xx + 1e-6 * xdd, acc + xdd

        return jax.lax.fori_loop(0, n, body, (x, jnp.zeros_like(x)))

    return jax.jit(loop).lower(params, x0).compile(), (params, x0)


class _Embedded(eqx.Module):
    model: mb.Model

    def __call__(self, q):
        return mb.forward_dynamics(self.model, q, jnp.full(1, 0.1))


class _DAE(eqx.Module):
    field: eqx.Module

    def __call__(self, z):
        return self.field.accelerations(z, jnp.full(7, 0.1))[0]


def _describe(hlo):
    rows = loop_bodies(hlo)
    return "; ".join(f"{k} kernels, {b} B{' (sequential)' if b <= SEQUENTIAL_BYTES else ''}"
                     for _, k, b in sorted(rows, key=lambda r: -r[1])[:3])


def _timed_loop(body, x0, n, repeat):
    """``(seconds per iteration, kernels of the loop body)``."""
    fn = jax.jit(lambda x: jax.lax.fori_loop(0, n, lambda i, c: body(c), x)).lower(x0).compile()
    t, _ = best_time(fn, (x0,), repeat, calls=1)
    return t / n, max(k for _, k, _ in loop_bodies(fn.as_text()))


def kernel_costs(repeat, n=20000):
    """Per-iteration CPU time of (a) 6 independent sine pairs, each kept a kernel of its
    own by a product with the 2x2 identity, plus a sum reading one extra buffer of
    64 or 65 float64; (b) one matrix product A @ B per iteration, B from the carry."""
    print("kernel costs in a fori_loop: ns per iteration")
    eye = jnp.eye(2)
    for size in (64, 65):
        big = jnp.linspace(0.0, 1.0, size)

        def body(c, big=big):
            outs = [eye @ jnp.stack([jnp.sin(c * (k + 1.0)), jnp.cos(c + k)]) for k in range(6)]
            return c + 1e-9 * (sum(o[0] + o[1] for o in outs) + jnp.sum(big * c))

        t, kernels = _timed_loop(body, jnp.asarray(0.3), n, repeat)
        print(f"  {kernels} small kernels, one buffer of {size} float64 ({size * 8} B): {t * 1e9:6.1f} ns")
    for sa, sb in [((18, 2), (2, 1)), ((18, 4), (4, 1)), ((18, 48), (48, 1)), ((2, 2), (2, 5)), ((6, 8), (8, 3))]:
        a = jnp.asarray(np.random.default_rng(0).normal(size=sa))
        scale = jnp.arange(1.0, np.prod(sb) + 1.0).reshape(sb)

        def body(c, a=a, scale=scale):
            return c + 1e-9 * jnp.sum(a @ (c * scale))

        t, _ = _timed_loop(body, jnp.asarray(0.3), n, repeat)
        print(f"  product {sa} @ {sb}: {t * 1e9:6.1f} ns")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--evals", type=int, default=2000)
    p.add_argument("--tol", type=float, default=2e-5)
    args = p.parse_args(argv)
    kernel_costs(args.repeat)
    print()
    model = C.andrews_squeezer(throw=False)
    perm = np.asarray([C.ANDREWS_ANGLES.index(name) for name in model.joint_names])
    q0 = jnp.asarray(C.ANDREWS_Y0[:1])
    z0 = jnp.asarray(C.ANDREWS_Y0)[perm]
    routes = {"implicit": model}
    for order in (24, 2, 1):
        routes[f"pre-modeled, order {order}"] = mb.constraints.premodeled(
            model, 0.0, 2 * np.pi, 2 * np.pi / 512, kind="fourier", order=order)[0]

    print("right-hand side in a fori_loop: µs per evaluation; loop body (kernels, largest buffer)")
    for name, m in [*routes.items(), ("index-1 DAE", None)]:
        fn, a = (rhs_loop(_Embedded(m), q0, args.evals) if m is not None
                 else rhs_loop(_DAE(mb.constraints.dae_vector_field(model)), z0, args.evals))
        t, _ = best_time(fn, a, args.repeat, calls=1)
        print(f"  {name:<24} {t / args.evals * 1e6:6.2f} µs   {_describe(fn.as_text())}")

    print(f"\nsimulation 0..0.03 s, rtol = atol = {args.tol:g}: µs per step; the three largest loop bodies")
    tol = jnp.asarray(args.tol)
    for sname in ("Tsit5", "Dopri8"):
        solver = getattr(diffrax, sname)
        for name, m in [*routes.items(), ("index-1 DAE", None)]:
            if m is not None:
                flat, rebuild = model_as_vector(m)

                def run(p, tol, rebuild=rebuild):
                    sol = mb.simulate(rebuild(p), q0, jnp.zeros(1), 0.03, rtol=tol, atol=tol, solver=solver(),
                                      throw=False)
                    return sol.stats["num_steps"]
            else:
                flat, rebuild = model_as_vector(model)

                def run(p, tol, rebuild=rebuild):
                    sol = mb.constraints.simulate_dae(rebuild(p), z0, jnp.zeros(7), 0.03, alpha=100.0, beta=100.0,
                                                      rtol=tol, atol=tol, solver=solver())
                    return sol.stats["num_steps"]
            fn = jax.jit(run).lower(flat, tol).compile()
            t, steps = best_time(fn, (flat, tol), args.repeat)
            print(f"  {sname:<7} {name:<24} {t / int(steps) * 1e6:6.2f} µs/step ({int(steps)} steps)   "
                  f"{_describe(fn.as_text())}")


if __name__ == "__main__":
    main()
