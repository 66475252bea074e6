#!/usr/bin/env python
"""What checking a loop's solves costs in a simulation of Andrews' squeezer.

Times `mb.simulate` of the squeezer with implicit joint functions over 0..0.03 s
(Dopri8, rtol = atol = 1e-10, as `benchmarks/bench_andrews.py` runs it; best of 7 warm
calls, compile apart) with its loop built

- ``throw=True``: every right-hand side checks its solve (reciprocal condition number,
  branch sign) and raises through ``eqx.branched_error_if``;
- ``throw=False``: nothing inside the right-hand side; `simulate` checks the solve at
  the end of every step instead (a diffrax event; ``Solution.loop_results``).

and prints steps, the time per run and the digits at t = 0.03 against the Test Set's
reference. docs/closed_chains.md ("Errors") quotes it. To time the right-hand side with
no check at all, run it with a jaxmb from before the step-end check (f406490 or older)
on ``PYTHONPATH``: there ``throw=False`` checked nothing.

Run: ``taskset -c 1 .venv/bin/python scripts/check_loop_check_cost.py`` (about 1 min).
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from _xla_flags import fusion_emitters_off  # noqa: E402

fusion_emitters_off()

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402

import jaxmb as mb  # noqa: E402
from jaxmb import models as C  # noqa: E402

from bench_andrews import T1, compiled, digits, timed  # noqa: E402


def main():
    q0 = jnp.asarray(C.ANDREWS_Y0[:1])

    def run(m):
        sol = mb.simulate(m, q0, jnp.zeros(1), T1, rtol=1e-10, atol=1e-10, solver="dopri8")
        return C.andrews_angles(m, sol.q[-1]), sol.stats["num_steps"]

    print(f"jaxmb from {Path(mb.__file__).parent}")
    print(f"{'loop':<14}{'steps':>7}{'run ms':>9}{'compile s':>11}{'digits':>8}")
    for rnd in range(2):
        for throw in (True, False):
            comp, t_comp = compiled(run, C.andrews_squeezer(throw=throw))
            t_run, (angles, steps) = timed(comp, 7)
            print(f"{f'throw={throw}':<14}{int(steps):>7}{t_run * 1e3:>9.2f}{t_comp:>11.1f}{digits(angles):>8.2f}",
                  flush=True)


if __name__ == "__main__":
    main()
