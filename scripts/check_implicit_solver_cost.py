#!/usr/bin/env python
"""What an implicit solver's Jacobians cost through the unrolled projected pass.

Times Andrews' squeezer 0..0.03 s with ``diffrax.Kvaerno5()`` at rtol = atol = 1e-4 (349
steps; its Newton iterations take ``jax.jacfwd`` of the right-hand side), embedded
ODE with implicit and with pre-modeled (order 24) joint functions, CPU time best of 5
and compile time, with the unrolled pass's derivatives taken:

- ``--derivatives level-wise`` (default, the library): from the level-wise pass
  (``jaxmb._dynamics._unrolled_with_level_wise_derivatives``);
- ``--derivatives unrolled``: by differentiating the unrolled scalar pass itself, as
  before that custom JVP (patched over the library for the run);
- ``--derivatives no-unrolling``: no unrolled pass at all, values and derivatives from
  the level-wise pass (``jaxmb._dynamics._unrolls`` patched to refuse every model).

Run: ``taskset -c 1 .venv/bin/python scripts/check_implicit_solver_cost.py
[--derivatives unrolled|no-unrolling]`` (about 1.5 min). jaxmb/_dynamics.py quotes it.

The solver object is diffrax's own, with its default stage iteration, on purpose: the
figures quoted were taken with it. ``simulate(solver="kvaerno5")`` now stops that
iteration by its contraction rate and takes a tenth of the steps (docs/engine.md,
"Simulation"), so the Jacobians' share of a run is smaller there.
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
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxmb as mb  # noqa: E402
from jaxmb import _dynamics  # noqa: E402
from jaxmb import models as C  # noqa: E402

from andrews_rhs import best_times  # noqa: E402
from bench_andrews import compiled, premodeled_andrews  # noqa: E402


DERIVATIVES = ("level-wise", "unrolled", "no-unrolling")


def use_derivatives(choice):
    """Patch the library, for this process, to take the projected pass's values and
    derivatives as `choice` in :data:`DERIVATIVES` says (the module docstring)."""
    if choice == "unrolled":
        _dynamics._unrolled_with_level_wise_derivatives = _dynamics._projected_terms_unrolled
    elif choice == "no-unrolling":
        _dynamics._unrolls = lambda model: False


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--derivatives", choices=DERIVATIVES, default="level-wise")
    args = p.parse_args(argv)
    use_derivatives(args.derivatives)
    model = C.andrews_squeezer(throw=False)
    fourier, _ = premodeled_andrews(model)
    q0 = jnp.asarray(C.ANDREWS_Y0[:1])
    print(f"Kvaerno5, rtol = atol = 1e-4, derivatives of the unrolled pass: {args.derivatives}")
    def run(m):
        sol = mb.simulate(m, q0, jnp.zeros(1), 0.03, rtol=1e-4, atol=1e-4, solver=diffrax.Kvaerno5(), throw=False)
        return sol.q[-1], sol.stats["num_steps"]

    runs, compile_s = {}, {}
    for name, m in (("implicit", model), ("pre-modeled", fourier)):
        fn, compile_s[name] = compiled(run, m)
        runs[name] = (fn, ())
    seconds = best_times(runs, repeat=5)
    for name, (fn, _) in runs.items():
        q, steps = fn()
        print(f"{name:<12} {seconds[name] * 1e3:7.1f} ms  {int(steps)} steps  compile {compile_s[name]:5.1f} s  "
              f"beta(0.03) = {float(q[0]):.12f}", flush=True)

if __name__ == "__main__":
    main()
