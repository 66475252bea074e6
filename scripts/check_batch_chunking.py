#!/usr/bin/env python
"""Large batches on CPU: `jax.vmap` over every state at once against `jax.lax.map` over
chunks of them (`batch_size`), for `mb.forward_dynamics` of a planar chain.

Why: under `vmap` each intermediate of the dynamics becomes one array over the whole
batch. For planar_chain(7)'s projected pass the largest is the bodies' stacked
(v, a, J) columns, (batch, 7, 6, 9) float64: 1.5 MB at 512 states, 12 MB at 4096. Past
what the caches hold, each of the pass's kernels streams its arrays from memory, and
the cost per state rises (benchmarks/README.md, bench_core). A `lax.map` over chunks
keeps every intermediate at the chunk's size.

Prints µs per state (CPU time of one call divided by the batch, best of 5) for vmap
and for lax.map with several chunk sizes, at batches of 512, 4096 and 8192; with
``--simulate``, of whole simulations from those states instead.

With ``--andrews``, 1024 simulations of Andrews' squeezer with perturbed spring stiffness,
as ``benchmarks/bench_andrews.py`` batches them (rtol 1e-10, Dopri8): the pre-modeled
embedded ODE and the index-1 DAE (Baumgarte 100, rtol 3.3e-11), ms per simulation.

Run: ``taskset -c 1 .venv/bin/python scripts/check_batch_chunking.py [--n 7]`` (about a
minute; ``--andrews`` about 5 min).
"""

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from _xla_flags import fusion_emitters_off  # noqa: E402

fusion_emitters_off()

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_enable_compilation_cache", False)  # compile times are not the point; keep runs alike

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxmb as mb  # noqa: E402


def per_state_us(fn, args, batch, repeats=5, work=200_000):
    """Best over `repeats` of the mean time of one call, divided by the batch."""
    jax.block_until_ready(fn(*args))
    calls = max(1, work // batch)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            jax.block_until_ready(fn(*args))
        best = min(best, (time.perf_counter() - start) / calls)
    return best / batch * 1e6


def andrews(chunks, batch=1024, tol=1e-10):
    """Per-simulation ms of batched Andrews simulations, vmap against lax.map chunks."""
    from bench_andrews import T1, compiled, premodeled_andrews, scaled_stiffness

    from jaxmb import models as C

    model = C.andrews_squeezer(throw=False)
    fourier, _ = premodeled_andrews(model)
    perm = np.asarray([C.ANDREWS_ANGLES.index(n) for n in model.joint_names])
    z0 = jnp.asarray(C.ANDREWS_Y0)[perm]
    scale = 1.0 + 0.05 * jax.random.normal(jax.random.PRNGKey(0), (batch,))

    def embedded(m, s):
        return mb.simulate(scaled_stiffness(m, s), z0[:1], jnp.zeros(1), T1, rtol=tol, atol=tol, solver="dopri8",
                           throw=False).q[-1]

    def dae(m, s):
        return mb.constraints.simulate_dae(scaled_stiffness(m, s), z0, jnp.zeros(7), T1, alpha=100.0, beta=100.0,
                                           rtol=tol / 3, atol=tol / 3).z[-1]

    print(f"Andrews' squeezer, {batch} spring stiffnesses, ms per simulation ({jax.devices()[0]}, float64)")
    for label, fn, m in (("pre-modeled embedded ODE", embedded, fourier), ("index-1 DAE", dae, model)):
        row = []
        for chunk in [0] + chunks:
            batched = (jax.vmap(fn, in_axes=(None, 0)) if chunk == 0 else
                       lambda mm, s, chunk=chunk, fn=fn: jax.lax.map(lambda x: fn(mm, x), s, batch_size=chunk))
            run, _ = compiled(batched, m, scale)
            ms = per_state_us(run, (), batch, repeats=2, work=batch) / 1e3
            row.append(f"{'vmap' if chunk == 0 else f'lax.map batch_size={chunk}'} {ms:6.3f}")
        print(f"{label:<26}: " + "   ".join(row), flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=7, help="links of the planar chain")
    parser.add_argument("--batches", default="512,4096,8192")
    parser.add_argument("--chunks", default="128,256,512,1024")
    parser.add_argument("--simulate", action="store_true",
                        help="time simulations (0..0.2 s, Tsit5, rtol = atol = 1e-6, from each state at rest) "
                             "instead of one evaluation of the dynamics")
    parser.add_argument("--andrews", action="store_true",
                        help="batched Andrews' squeezer simulations (embedded ODE and DAE) instead")
    args = parser.parse_args(argv)
    if args.andrews:
        return andrews([32, 128])
    model = mb.models.planar_chain(args.n)
    rng = np.random.default_rng(0)

    if args.simulate:
        def dynamics(q, qd, tau):
            return mb.simulate(model, q, jnp.zeros_like(qd), 0.2, rtol=1e-6, atol=1e-6, throw=False).q[-1]
        what = "simulation 0..0.2 s (Tsit5, 1e-6)"
    else:
        def dynamics(q, qd, tau):
            return mb.forward_dynamics(model, q, qd, tau)
        what = "forward dynamics"

    print(f"planar_chain({args.n}) {what}, µs per state ({jax.devices()[0]}, float64)")
    for batch in (int(b) for b in args.batches.split(",")):
        states = tuple(jnp.asarray(rng.uniform(-2.0, 2.0, (batch, args.n))) for _ in range(3))
        row = [f"vmap {per_state_us(jax.jit(jax.vmap(dynamics)), states, batch):6.2f}"]
        for chunk in (int(c) for c in args.chunks.split(",")):
            if chunk < batch:
                mapped = jax.jit(lambda q, qd, tau, chunk=chunk: jax.lax.map(
                    lambda s: dynamics(*s), (q, qd, tau), batch_size=chunk))
                row.append(f"lax.map batch_size={chunk} {per_state_us(mapped, states, batch):6.2f}")
        print(f"batch {batch:5d}: " + "   ".join(row), flush=True)


if __name__ == "__main__":
    main()
