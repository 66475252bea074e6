#!/usr/bin/env python
"""Cost of the joint-function evaluations outside the dynamics on the pre-modeled
Andrews squeezer (six Fourier series of order 24): `joint_values`, `joint_gradients`,
`joint_hessians`, each 2000 times inside one `lax.fori_loop`, CPU time, best of 9.

Run: ``taskset -c 1 .venv/bin/python scripts/check_joint_values_cost.py``. For a
before/after comparison, put an earlier ``jaxmb/`` first on ``PYTHONPATH`` and run it
from outside the repository. docs/engine.md ("Cost on CPU") quotes it.
"""

import os
import sys
import time
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
from jaxmb import models as C  # noqa: E402

from bench_andrews import premodeled_andrews  # noqa: E402


def main(n=2000):
    model = C.andrews_squeezer(throw=False)
    fourier, _ = premodeled_andrews(model)
    q0 = jnp.asarray(C.ANDREWS_Y0[:1])
    params, static = eqx.partition(fourier, eqx.is_array)
    print(f"jaxmb from {os.path.dirname(mb.__file__)}")
    for fn in (mb.joint_values, mb.joint_gradients, mb.joint_hessians):
        def loop(params, q, fn=fn):
            m = eqx.combine(params, static)

            def body(i, c):
                s = jnp.sum(fn(m, c[0]))
                return c[0] + 1e-9 * s, c[1] + s

            return jax.lax.fori_loop(0, n, body, (q, jnp.zeros(())))

        run = jax.jit(loop)
        jax.block_until_ready(run(params, q0))
        best = np.inf
        for _ in range(9):
            t = time.process_time()
            jax.block_until_ready(run(params, q0))
            best = min(best, time.process_time() - t)
        print(f"{fn.__name__:<16} {best / n * 1e6:6.2f} µs")


if __name__ == "__main__":
    main()
