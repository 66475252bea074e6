#!/usr/bin/env python
"""Level-wise against unrolled projected pass, per model: the measurements behind
``jaxmb._dynamics._unrolls``.

For each model, `forward_dynamics` inside a ``lax.fori_loop`` (one state per call, or
``--batch N`` states under ``jax.vmap``), CPU time per state, best of 7 rounds, with the
projected pass forced level-wise and then unrolled (``_dynamics._unrolls`` replaced for
the run); also each model's pattern size (Σ over bodies of the coordinates its Jacobian
can depend on, squared), which `_unrolls` compares with 30.

Run: ``taskset -c 1 .venv/bin/python scripts/check_unrolled_pass.py [--batch 256]``
(about 2 min).
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
from jaxmb import _dynamics  # noqa: E402
from jaxmb import models as C  # noqa: E402

from andrews_rhs import best_times, rhs_loop  # noqa: E402


def models():
    andrews = C.andrews_squeezer(throw=False)
    fourier, _ = mb.constraints.premodeled(andrews, 0.0, 2 * np.pi, 2 * np.pi / 512, kind="fourier", order=24)
    out = {f"planar chain {n}": C.planar_chain(n) for n in (2, 3, 4, 5, 7)}
    out.update({"three-link arm": C.three_link_arm(), "five-bar": C.five_bar(),
                "Andrews, pre-modeled": fourier, "Andrews, implicit": andrews,
                "Andrews, DAE's 7-angle tree": mb.constraints.dae_vector_field(andrews).tree})
    return out


def timed_loops(all_models, batch, n):
    runs = {}
    for name, m in all_models.items():
        params, static = eqx.partition(m, eqx.is_array)
        q0 = jnp.full(m.nq, 0.3) + (jnp.linspace(0.0, 0.1, batch)[:, None] if batch else 0.0)

        def rhs(p, x, static=static, nq=m.nq):
            return mb.forward_dynamics(eqx.combine(p, static), x, jnp.full(nq, 0.1))

        runs[name] = (rhs_loop(jax.vmap(rhs, in_axes=(None, 0)) if batch else rhs, n, step=1e-7), (params, q0))
    best = best_times(runs, 7)
    return {name: best[name] / n / max(batch, 1) * 1e6 for name in runs}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch", type=int, default=0)
    args = p.parse_args()
    n = 2000 if args.batch == 0 else 50
    all_models = models()
    chosen = {name: _dynamics._unrolls(m) for name, m in all_models.items()}
    original = _dynamics._unrolls
    times = {}
    for form, force in (("level-wise", False), ("unrolled", True)):
        _dynamics._unrolls = lambda model, force=force: force  # noqa: E731
        times[form] = timed_loops(all_models, args.batch, n)
    _dynamics._unrolls = original
    print(f"forward_dynamics, µs per state ({'vmap over ' + str(args.batch) if args.batch else 'one state per call'}), "
          "float64, CPU time")
    print(f"{'model':<30} {'nq':>3} {'bodies':>6} {'size':>5} {'level-wise':>11} {'unrolled':>9}  chosen")
    for name, m in all_models.items():
        size = sum(len(c) ** 2 for c in _dynamics._coordinate_pattern(m))
        print(f"{name:<30} {m.nq:3d} {m.n_bodies:6d} {size:5d} {times['level-wise'][name]:11.2f} "
              f"{times['unrolled'][name]:9.2f}  {'unrolled' if chosen[name] else 'level-wise'}")


if __name__ == "__main__":
    main()
