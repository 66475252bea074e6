#!/usr/bin/env python
"""Does the shape of the tolerance (rtol against atol) change how many more steps the
DAE needs than the embedded ODE at equal accuracy?

Andrews' squeezer 0..0.03 s, Dopri8, the pre-modeled embedded ODE (order 24) and the
index-1 DAE (Baumgarte 0, 100, 1000), atol = 1e-5 ... 1e-10 and rtol = ratio x atol
for each `--ratios` value. Accuracy is `trajectory_digits` (the worst angle's RMS error
over 1000 times, relative, against the embedded route at 1e-13). Printed per ratio and
target: the embedded route's steps and the DAE's fewest (over its Baumgarte settings),
each interpolated linearly in digits between tolerances, and their ratio. Steps only,
no timing: the cost per step does not depend on the tolerance.

Run: ``.venv/bin/python scripts/check_tolerance_shape.py`` (about 20 s). The closing
note of 2026-11-24 (fifth session) quotes it.
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
from jaxmb import models as C  # noqa: E402

from andrews_work_precision import N_TRAJECTORY, _at_target, trajectory_digits  # noqa: E402
from bench_andrews import T1, premodeled_andrews  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ratios", default="1,0.1,0.01,0")
    p.add_argument("--targets", default="6,7,8,9")
    args = p.parse_args(argv)
    model = C.andrews_squeezer(throw=False)
    fourier, _ = premodeled_andrews(model)
    perm = np.asarray([C.ANDREWS_ANGLES.index(n) for n in model.joint_names])
    inv = np.argsort(perm)
    q0, z0 = jnp.asarray(C.ANDREWS_Y0[:1]), jnp.asarray(C.ANDREWS_Y0)[perm]
    ts = jnp.linspace(0.0, T1, N_TRAJECTORY + 1)[1:]

    @jax.jit
    def embedded(rtol, atol):
        sol = mb.simulate(fourier, q0, jnp.zeros(1), T1, ts=ts, rtol=rtol, atol=atol, solver=diffrax.Dopri8(),
                          throw=False)
        return jax.vmap(lambda q: C.andrews_angles(fourier, q))(sol.q), sol.stats["num_steps"]

    def dae(ab):
        @jax.jit
        def run(rtol, atol):
            s = mb.constraints.simulate_dae(model, z0, jnp.zeros(7), T1, ts=ts, alpha=ab, beta=ab, rtol=rtol,
                                            atol=atol, solver=diffrax.Dopri8())
            return s.z[:, inv], s.stats["num_steps"]
        return run

    reference = np.asarray(embedded(1e-13, 1e-13)[0])
    routes = {"embedded": embedded, **{f"DAE, Baumgarte {ab:g}": dae(ab) for ab in (0.0, 100.0, 1000.0)}}
    targets = [float(t) for t in args.targets.split(",")]
    print(f"{'rtol / atol':>11} {'digits':>6} {'embedded':>9} {'DAE':>6} {'DAE / embedded':>15}")
    for ratio in (float(r) for r in args.ratios.split(",")):
        sweeps = {}
        for name, fn in routes.items():
            sweeps[name] = []
            for atol in (1e-5, 1e-6, 1e-7, 1e-8, 1e-9, 1e-10):  # loosest first, as _at_target wants
                path, steps = fn(jnp.asarray(ratio * atol), jnp.asarray(atol))
                sweeps[name].append(dict(digits=trajectory_digits(np.asarray(path), reference), steps=int(steps)))
        for target in targets:
            e = _at_target(sweeps["embedded"], target, lambda r: r["steps"])
            d = [_at_target(runs, target, lambda r: r["steps"]) for name, runs in sweeps.items() if name != "embedded"]
            d = min((x for x in d if x is not None), default=None)
            if e is not None and d is not None:
                print(f"{ratio:11g} {target:6.1f} {e:9.0f} {d:6.0f} {d / e:14.2f}x")


if __name__ == "__main__":
    main()
