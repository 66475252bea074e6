#!/usr/bin/env python
"""Compile and run time of the five-bar's θ4 over an n x n grid of q (one `jax.vmap` of
implicit joint values, `throw=True`), and the host callbacks in the program: the
failure check is one callback per batch, so neither grows with n
(docs/closed_chains.md, "Errors").

Run: `.venv/bin/python scripts/check_loop_batch_compile.py [n ...]` (default 21 41 61).
"""

import sys
import time

import jax

jax.config.update("jax_enable_x64", True)
# Compile times are reported: no persistent compilation cache (JAX_COMPILATION_CACHE_DIR).
jax.config.update("jax_compilation_cache_dir", None)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxmb as mb  # noqa: E402


def main(sizes):
    model = mb.models.five_bar()
    theta4 = jax.jit(jax.vmap(lambda q: mb.joint_values(model, q)[3]))
    for n in sizes:
        g = jnp.linspace(-np.pi, np.pi, n)
        qs = jnp.stack([x.ravel() for x in jnp.meshgrid(g, g, indexing="ij")], axis=1)
        lowered = theta4.lower(qs)
        t = time.perf_counter()
        compiled = lowered.compile()
        t_compile = time.perf_counter() - t
        jax.block_until_ready(compiled(qs))
        t = time.perf_counter()
        jax.block_until_ready(compiled(qs))
        t_run = time.perf_counter() - t
        callbacks = lowered.as_text().count("python_cpu_callback")
        print(f"{n} x {n}: compile {t_compile:.1f} s, run {t_run * 1e3:.1f} ms, host callbacks {callbacks}")


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [21, 41, 61])
