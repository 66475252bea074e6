#!/usr/bin/env python
"""CPU time of one pre-modeled Andrews simulation (0..0.03 s, Dopri8, rtol = atol = 1e-9)
with each of diffrax's `scan_kind`s for the Runge-Kutta stage loop (docs/engine.md,
"Tried and not kept"). Best of 20 rounds, the variants interleaved.

Run: `taskset -c 1 .venv/bin/python scripts/check_stage_loop.py`
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

import diffrax  # noqa: E402
import equinox as eqx  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxmb as mb  # noqa: E402
from jaxmb import models as C  # noqa: E402

from bench_andrews import premodeled_andrews  # noqa: E402


def main():
    model = C.andrews_squeezer(throw=False)
    fourier, _ = premodeled_andrews(model)
    q0, tol = jnp.asarray(C.ANDREWS_Y0[:1]), jnp.asarray(1e-9)

    def variant(scan_kind):
        @eqx.filter_jit
        def run(m, tol):
            sol = mb.simulate(m, q0, jnp.zeros(1), 0.03, rtol=tol, atol=tol,
                              solver=diffrax.Dopri8(scan_kind=scan_kind), throw=False)
            return sol.q[-1], sol.stats["num_steps"]
        return run

    runs = {kind: variant(kind) for kind in (None, "lax", "bounded")}
    outs = {kind: jax.block_until_ready(fn(fourier, tol)) for kind, fn in runs.items()}
    best = dict.fromkeys(runs, np.inf)
    for _ in range(20):
        for kind, fn in runs.items():
            t = time.process_time()
            jax.block_until_ready(fn(fourier, tol))
            best[kind] = min(best[kind], time.process_time() - t)
    for kind in runs:
        print(f"scan_kind={kind!s:<8} {best[kind] * 1e3:6.2f} ms  steps {int(outs[kind][1])}  "
              f"beta(0.03) {float(outs[kind][0][0]):.15f}")


if __name__ == "__main__":
    main()
