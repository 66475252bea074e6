#!/usr/bin/env python
"""Andrews' squeezer: embedded ODE vs index-1 DAE at matched accuracy, as a ratio
that survives a loaded machine.

Both routes are compiled once and then timed interleaved in one process, by CPU
time (``time.process_time``), best of `--repeat` runs, so that other jobs on the
machine slow both alike. Single simulations: embedded (rtol 1e-10, 9.47 digits)
against the DAE at Baumgarte 0 / rtol 1e-11 (9.44) and Baumgarte 100 / rtol 3e-11
(9.49); batch: `--batch` perturbed-stiffness simulations under vmap, embedded vs the
DAE at Baumgarte 100 / rtol 3e-11. For absolute times on a quiet machine use
bench_andrews.py.

Run: `.venv/bin/python benchmarks/andrews_ratio.py [--batch 256] [--repeat 15]`
"""

import argparse
import os
import time

os.environ.setdefault("XLA_FLAGS", "--xla_cpu_use_fusion_emitters=false")

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import equinox as eqx  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxmb as mb  # noqa: E402
from jaxmb import models as C  # noqa: E402
from bench_andrews import scaled_stiffness  # noqa: E402

T1 = 0.03


def best_cpu_times(fns, repeat):
    for f in fns.values():
        jax.block_until_ready(f())
    best = {k: np.inf for k in fns}
    for _ in range(repeat):
        for k, f in fns.items():
            t = time.process_time()
            jax.block_until_ready(f())
            best[k] = min(best[k], time.process_time() - t)
    return best


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--repeat", type=int, default=15)
    args = p.parse_args(argv)
    model = C.andrews_squeezer(throw=False)
    perm = np.asarray([C.ANDREWS_ANGLES.index(n) for n in model.joint_names])
    q0 = jnp.asarray(C.ANDREWS_Y0[:1])
    z0 = jnp.asarray(C.ANDREWS_Y0)[perm]

    def embedded(m):
        return mb.simulate(m, q0, jnp.zeros(1), T1, rtol=1e-10, atol=1e-10, solver="dopri8", throw=False).q[-1]

    def dae(m, ab, tol):
        return mb.constraints.simulate_dae(m, z0, jnp.zeros(7), T1, alpha=ab, beta=ab, rtol=tol, atol=tol).z[-1]

    emb_1, dae_1 = eqx.filter_jit(embedded), eqx.filter_jit(dae)
    single = {"embedded, rtol 1e-10": lambda: emb_1(model)}
    for ab, tol in ((0.0, 1e-11), (100.0, 3e-11)):
        single[f"DAE, Baumgarte {ab:g}, rtol {tol:g}"] = lambda ab=ab, tol=tol: dae_1(model, ab, tol)
    best = best_cpu_times(single, args.repeat)
    emb = best.pop("embedded, rtol 1e-10")
    print(f"single: embedded {emb * 1e3:.2f} ms; " + "; ".join(
        f"{k} {v * 1e3:.2f} ms ({v / emb:.2f}x)" for k, v in best.items()))

    scale = 1.0 + 0.05 * jax.random.normal(jax.random.PRNGKey(0), (args.batch,))

    emb_b = eqx.filter_jit(eqx.filter_vmap(lambda m, s: embedded(scaled_stiffness(m, s)), in_axes=(None, 0)))
    dae_b = eqx.filter_jit(eqx.filter_vmap(lambda m, s: dae(scaled_stiffness(m, s), 100.0, 3e-11), in_axes=(None, 0)))
    best = best_cpu_times({"emb": lambda: emb_b(model, scale), "dae": lambda: dae_b(model, scale)},
                          max(args.repeat // 5, 1))
    print(f"batch {args.batch}: embedded {best['emb'] * 1e3 / args.batch:.2f} ms/sim, DAE (Baumgarte 100, rtol "
          f"3e-11) {best['dae'] * 1e3 / args.batch:.2f} ms/sim ({best['dae'] / best['emb']:.2f}x)")


if __name__ == "__main__":
    main()
