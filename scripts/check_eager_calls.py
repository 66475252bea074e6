#!/usr/bin/env python
"""What a repeated call outside ``jit`` costs: the four-bar's ``closure.solve(q)``,
``mb.joint_values(model, q)`` and ``mb.simulate`` (throw=False loop, 0.5 s, Dopri8), each
called three times with different ``q``; the first call compiles.

docs/closed_chains.md quotes it. To see the cost before these calls were cached, run
it with a jaxmb from f406490 on ``PYTHONPATH``.

Run: ``taskset -c 1 .venv/bin/python scripts/check_eager_calls.py`` (about 30 s).
"""

import time
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402

import jaxmb as mb  # noqa: E402


def main():
    model = mb.models.four_bar(throw=False)
    closure = model.joints[0].function.closure
    calls = {
        "closure.solve(q)": lambda q: closure.solve(q).f,
        "mb.joint_values(model, q)": lambda q: mb.joint_values(model, q),
        "mb.simulate(model, q, 0, 0.5)": lambda q: mb.simulate(model, q, jnp.zeros(1), 0.5, solver="dopri8").q,
    }
    print(f"jaxmb from {Path(mb.__file__).parent}")
    for name, call in calls.items():
        seconds = []
        for k in range(3):
            t = time.perf_counter()
            jax.block_until_ready(call(jnp.array([0.1 * k])))
            seconds.append(time.perf_counter() - t)
        print(f"{name:<32}" + "".join(f"{s:>10.4f} s" for s in seconds))


if __name__ == "__main__":
    main()
