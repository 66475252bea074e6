#!/usr/bin/env python
"""Where one pre-modeled Andrews right-hand side's time goes, part by part.

Times (CPU, best of `--repeat`, `--evals` evaluations inside one ``lax.fori_loop`` as in
benchmarks/andrews_rhs.py) cumulative prefixes of ``forward_dynamics`` on the
pre-modeled Andrews squeezer (Fourier order `--order`, or with `--quintic N` periodic
quintic splines of N intervals), and XLA's kernel count for each:

1. ``empty``: the loop around one sine (what a kernel costs when it does next to nothing);
2. ``joint values``: one joint variable f_i(q) (the Fourier harmonics and their product);
3. ``joint rates``: f, f', q'ᵀHq' and ∇f of every joint, summed;
4. ``+ frames``: and the joints' local frames (R, p);
5. ``+ tree pass``: and the projected pass's M and bias (no loads);
6. ``forward dynamics``: the whole right-hand side, loads and the division included.

The differences between neighbouring rows are what each part adds (the sums that
consume a part's outputs add a little of their own). docs/engine.md ("Cost on CPU")
quotes it. Run: ``taskset -c 1 .venv/bin/python scripts/check_rhs_parts.py``
(about 30 s).
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

import equinox as eqx  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxmb as mb  # noqa: E402
from jaxmb import _dynamics, _kinematics  # noqa: E402
from jaxmb import models as C  # noqa: E402

from bench_andrews import premodeled_andrews, quintic_andrews  # noqa: E402
from andrews_rhs import best_times, kernel_count, rhs_loop  # noqa: E402


def parts(model, qd):
    def empty(q):
        return jnp.sin(q[:1])

    def joint_values(q):
        return _kinematics.joint_values(model, q)[3:4]

    def joint_rates(q):
        f, fd, fdd, jac = _kinematics._joint_rates_and_gradients(model, q, qd)
        return (jnp.sum(f) + jnp.sum(fd) + jnp.sum(fdd) + jnp.sum(jac))[None]

    def frames(q):
        f, fd, fdd, jac = _kinematics._joint_rates_and_gradients(model, q, qd)
        rot, trans = _kinematics._local_frames(model, f)
        return (jnp.sum(rot) + jnp.sum(trans) + jnp.sum(fd) + jnp.sum(fdd) + jnp.sum(jac))[None]

    def tree(q):
        f, fd, fdd, jac = _kinematics._joint_rates_and_gradients(model, q, qd)
        mass, bias, _ = _dynamics._projected_terms(model, f, fd, fdd, jac)
        return (jnp.sum(mass) + jnp.sum(bias))[None]

    def full(q):
        return mb.forward_dynamics(model, q, qd)

    return {"empty": empty, "joint values": joint_values, "joint rates": joint_rates, "+ frames": frames,
            "+ tree pass": tree, "forward dynamics": full}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--evals", type=int, default=4000)
    p.add_argument("--repeat", type=int, default=9)
    p.add_argument("--order", type=int, default=24)
    p.add_argument("--quintic", type=int, default=0,
                   help="pre-model by periodic quintic splines of this many intervals instead of Fourier series")
    args = p.parse_args(argv)
    model = C.andrews_squeezer(throw=False)
    fourier, _ = quintic_andrews(model, args.quintic) if args.quintic else premodeled_andrews(model, args.order)
    q0 = jnp.asarray(C.ANDREWS_Y0[:1])
    params, static = eqx.partition(fourier, eqx.is_array)

    names = list(parts(fourier, q0))
    runs = {name: (rhs_loop(lambda p, q, name=name: parts(eqx.combine(p, static), jnp.full(1, 0.1))[name](q),
                            args.evals), (params, q0))
            for name in names}
    kernels = {name: kernel_count(fn.lower(*a).compile().as_text()) for name, (fn, a) in runs.items()}
    best = best_times(runs, args.repeat)
    fit = f"quintic splines, {args.quintic} intervals" if args.quintic else f"Fourier order {args.order}"
    print(f"pre-modeled Andrews ({fit}), float64, CPU time per evaluation")
    print(f"{'part':<18} {'µs':>7} {'kernels':>8}")
    for name in names:
        print(f"{name:<18} {best[name] / args.evals * 1e6:7.3f} {kernels[name]:8d}")


if __name__ == "__main__":
    main()
