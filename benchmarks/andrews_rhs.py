#!/usr/bin/env python
"""Andrews' squeezer: cost of one right-hand side of each route, and its XLA kernel count.

A simulation's time is (steps) x (stages per step) x (cost of a right-hand side) plus
the solver's own work; this measures the third factor for

* the embedded ODE with implicit joint functions (`mb.forward_dynamics`, Newton from a
  closed-form guess, one LU of ∂g/∂f),
* the embedded ODE with the six dependent angles pre-modeled by Fourier series
  (order 24, `mb.constraints.premodeled`),
* the index-1 DAE in the seven angles (`DAEVectorField.accelerations`, the 13 x 13
  KKT solve),

each as `--evals` evaluations inside one `lax.fori_loop` (a state that changes from
call to call, so nothing is hoisted), CPU time, best of `--repeat`, interleaved. It
also counts the kernels XLA launches per evaluation (fusions, dots, custom calls and
the like in the compiled loop body and its nested loops, each nested loop counted
once), the quantity that the CPU cost follows at these sizes.

Run: `taskset -c 1 .venv/bin/python benchmarks/andrews_rhs.py`; writes
benchmarks/results/andrews_rhs.json. `--batch N --evals 100` evaluates each right-hand
side under `jax.vmap` over N states and reports µs per state (throughput). The
script only uses API that older versions of jaxmb also have, so `git stash; git
checkout <rev> -- jaxmb` runs it on earlier code for a before/after comparison.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import time
from pathlib import Path

from _xla_flags import fusion_emitters_off  # noqa: E402

fusion_emitters_off()

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
# Compile times are reported: no persistent compilation cache (JAX_COMPILATION_CACHE_DIR).
jax.config.update("jax_compilation_cache_dir", None)

import equinox as eqx  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxmb as mb  # noqa: E402
from jaxmb import models as C  # noqa: E402
from bench_andrews import premodeled_andrews, quintic_andrews  # noqa: E402

_FREE = {"parameter", "get-tuple-element", "bitcast", "constant", "tuple"}


def computations(hlo_text: str):
    """``(name, header, body lines)`` of every computation of a compiled module that XLA
    runs kernel by kernel: the fused computations (each one kernel) and the entry left out."""
    for m in re.finditer(r"\n(%[^\n]*\{)\n(.*?)\n\}", hlo_text, re.S):
        head, body = m.group(1), m.group(2)
        name = head.split("(")[0].strip()
        if head.startswith("%fused") or "fusion" in name or "computation" in name:
            continue
        yield name, head, body.split("\n")


def kernel_count(hlo_text: str) -> int:
    """Operations XLA runs as kernels in the non-fused computations of a compiled
    module (the fused computations' insides are one kernel each), entry excluded."""
    total = 0
    for _, _, lines in computations(hlo_text):
        for line in lines:
            op = re.search(r"= \S+ ([a-z\-]+)\(", line)
            if op and op.group(1) not in _FREE:
                total += 1
    return total


def rhs_loop(rhs, n: int, step: float = 1e-6):
    """``jit(loop)`` with ``loop(params, x0)`` evaluating ``r = rhs(params, x)`` `n` times in
    one ``lax.fori_loop``, the state moved by ``step * r`` each time (so that nothing
    is hoisted out of the loop) and the results summed (so that none is dropped)."""
    def loop(params, x0):
        def body(i, c):
            x, acc = c
            r = rhs(params, x)
            return x + step * r, acc + r

        return jax.lax.fori_loop(0, n, body, (x0, jnp.zeros_like(x0)))

    return jax.jit(loop)


def best_times(runs: dict, repeat: int, calls: int = 1) -> dict:
    """``{name: best CPU seconds}`` of ``fn(*args)`` for ``runs = {name: (fn, args)}``,
    each called once first (compiling it), then `repeat` rounds over all of them
    interleaved, `calls` back-to-back calls per run and round."""
    for fn, args in runs.values():
        jax.block_until_ready(fn(*args))
    best = dict.fromkeys(runs, np.inf)
    for _ in range(repeat):
        for name, (fn, args) in runs.items():
            for _ in range(calls):
                t = time.process_time()
                jax.block_until_ready(fn(*args))
                best[name] = min(best[name], time.process_time() - t)
    return best


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--evals", type=int, default=2000)
    p.add_argument("--repeat", type=int, default=9)
    p.add_argument("--batch", type=int, default=0,
                   help="evaluate each right-hand side under jax.vmap over this many states (crank angles "
                        "spread over 0.1 rad) and report µs per state")
    p.add_argument("--order", type=int, default=24, help="order of the pre-modeled Fourier series")
    p.add_argument("--intervals", type=int, default=512,
                   help="intervals per crank revolution of the pre-modeled quintic splines")
    p.add_argument("--out", default=str(Path(__file__).parent / "results" / "andrews_rhs.json"))
    args = p.parse_args(argv)
    n = args.evals
    model = C.andrews_squeezer(throw=False)
    fourier, _ = premodeled_andrews(model, args.order)
    quintic, _ = quintic_andrews(model, args.intervals)
    perm = np.asarray([C.ANDREWS_ANGLES.index(name) for name in model.joint_names])
    q0 = jnp.asarray(C.ANDREWS_Y0[:1])
    z0 = jnp.asarray(C.ANDREWS_Y0)[perm]
    field = mb.constraints.dae_vector_field(model)
    per = max(args.batch, 1)  # states per evaluation
    if args.batch > 0:
        # Nearby states (the DAE's angles are not re-assembled; the cost does not depend on it).
        q0 = q0 + jnp.linspace(0.0, 0.1, args.batch)[:, None]
        z0 = z0 + jnp.zeros((args.batch, 1))

    def batched(fn):
        return jax.vmap(fn, in_axes=(None, 0)) if args.batch > 0 else fn

    def embedded(m):
        params, static = eqx.partition(m, eqx.is_array)
        rhs = batched(lambda p, x: mb.forward_dynamics(eqx.combine(p, static), x, jnp.full(1, 0.1)))
        return rhs_loop(rhs, n), (params, q0)

    def dae():
        params, static = eqx.partition(field, eqx.is_array)
        rhs = batched(lambda p, z: eqx.combine(p, static).accelerations(z, jnp.full(7, 0.1))[0])
        return rhs_loop(rhs, n), (params, z0)

    routes = {"embedded, implicit": embedded(model), "embedded, pre-modeled": embedded(fourier),
              "embedded, quintic": embedded(quintic), "index-1 DAE": dae()}
    kernels = {name: kernel_count(fn.lower(*a).compile().as_text()) for name, (fn, a) in routes.items()}
    best = best_times(routes, args.repeat)
    rows = [dict(route=name, us_per_rhs=best[name] / n / per * 1e6, kernels=kernels[name]) for name in routes]
    dae_us = best["index-1 DAE"] / n / per * 1e6
    if args.batch > 0:
        print(f"vmap over {args.batch} states: µs per state")
    print(f"{'route':<24} {'µs / RHS':>9} {'kernels':>8} {'DAE / route':>12}")
    for r in rows:
        print(f"{r['route']:<24} {r['us_per_rhs']:9.2f} {r['kernels']:8d} {dae_us / r['us_per_rhs']:11.2f}x")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(dict(problem="andrews_squeezer", dtype="float64", timing="CPU time",
                                   evals=n, repeat=args.repeat, batch=args.batch, machine=platform.platform(),
                                   cpu_count=os.cpu_count(), rows=rows), indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
