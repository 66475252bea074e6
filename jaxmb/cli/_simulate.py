"""``jaxmb simulate MODEL --t1 T --out DIR``: the README's main job.

Simulates a built-in model (float64, Dopri8 and tight tolerances by default) and
writes a figure, the trajectory as CSV (units in the header) and a short summary
(energy drift, solver statistics, timings, compilation cache use).
"""

from __future__ import annotations

import json
import math
import time

from ._cache import CacheCounter
from ._errors import CommandError, UsageError
from ._paths import chain_links, check_out_folder
from ._progress import Stages

# Saved samples: more would make a CSV of gigabytes.
_MAX_SAMPLES = 10_000_000
_STAGES = ["building the model", "tracing and compiling", "integrating", "writing"]


def check_arguments(args) -> int:
    """Check what argparse cannot check one argument at a time, before anything is
    made. **Returns:** the number of saved samples."""
    t0 = 0.0
    if not args.t1 > t0:
        raise UsageError(f"argument --t1: the final time must be after the start t0 = {t0:g} s, got {args.t1:g}")
    # 0.29 s at 100 per second is 28.999999999999996 samples in floating point: count with a margin
    span = args.t1 * args.fps
    samples = int(math.floor(span * (1.0 + 1e-12))) + 1 if span < 10 * _MAX_SAMPLES else 10 * _MAX_SAMPLES
    if samples < 2:
        raise UsageError(f"argument --fps: {args.fps:g} samples per second over {args.t1:g} s save fewer than "
                         "2 samples; raise --fps or --t1")
    if samples > _MAX_SAMPLES:
        raise UsageError(f"argument --fps: {args.fps:g} samples per second over {args.t1:g} s are {span:.4g} "
                         f"samples, more than {_MAX_SAMPLES}; lower --fps")
    if args.pid and args.model != "double-pendulum":
        raise UsageError(f"argument --pid: the PID controller is for double-pendulum, not {args.model}")
    chain_links(args)
    check_out_folder(args.out)
    return samples


def _model_and_start(args):
    """The built-in model, its initial state (q0, q0') and its controller (or None)."""
    import jax.numpy as jnp
    import numpy as np

    import jaxmb as mb

    controller = None
    if args.model == "double-pendulum":
        model = mb.models.double_pendulum()
        # Watanabe and Duarte's notebook: theta1 = pi/10, theta2 = pi/3, omega1 = 2 pi, omega2 = -6 pi.
        q0 = jnp.array([np.pi / 10, np.pi / 3])
        qd0 = jnp.array([2 * np.pi, -6 * np.pi])
        if args.pid:
            # Watanabe and Duarte's commented PID: M12 = 30 (pi/3 - theta2) - 2 theta2' + 3 ∫(pi/3 - theta2);
            # the elbow torque M12 enters the generalized forces as (-M12, M12).
            selection = jnp.array([[-1.0], [1.0]])
            controller = mb.control.PID((1,), np.pi / 3, kp=30.0, ki=3.0, kd=2.0, selection=selection)
    elif args.model == "three-link-arm":
        model = mb.models.three_link_arm()
        q0 = jnp.array([-np.pi / 2, 0.3, 0.2])
        qd0 = jnp.zeros(3)
    else:
        n = chain_links(args)
        model = mb.models.planar_chain(n)
        q0 = jnp.full(n, 0.3)
        qd0 = jnp.zeros(n)
    return model, q0, qd0, controller


def _plot(path, args, model, ts, q, energy, units):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..io._report import curve_groups, plot_groups

    groups = curve_groups(model.nq)
    fig, axes = plt.subplots(len(groups) + 1, 1, figsize=(9, 1.5 + 2.4 * (len(groups) + 1)), sharex=True)
    for group, ax in zip(groups, axes):
        unit = "rad" if all(units[k] == "rad" for k in group) else "rad or m"
        plot_groups([ax], ts, q, model.coordinate_names, [group], f"q [{unit}]")
    axes[-1].plot(ts, (energy - energy[0]) / max(abs(energy[0]), 1e-300))
    axes[-1].set_ylabel("relative energy change")
    axes[-1].grid(True, alpha=0.3)
    axes[-1].set_xlabel("t [s]")
    fig.suptitle(f"jaxmb: {args.model}, {args.solver}, rtol={args.rtol:g}")
    fig.tight_layout()
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)


def simulate(args) -> int:
    samples = check_arguments(args)
    import jax
    import jax.numpy as jnp
    import numpy as np

    import jaxmb as mb

    from ..io._report import coordinate_units, write_csv

    with CacheCounter() as cache, Stages(_STAGES, args.progress) as stages:
        stages.start("building the model")
        model, q0, qd0, controller = _model_and_start(args)
        ts = jnp.linspace(0.0, args.t1, samples)

        def run(m, a, b):
            return mb.simulate(m, a, b, args.t1, ts=ts, controller=controller, rtol=args.rtol, atol=args.atol,
                               solver=args.solver, max_steps=args.max_steps, throw=False,
                               progress=stages.enabled)

        stages.start("tracing and compiling")
        start = time.perf_counter()
        compiled = jax.jit(run).lower(model, q0, qd0).compile()
        compile_s = time.perf_counter() - start
        stages.start("integrating")
        start = time.perf_counter()
        sol = compiled(model, q0, qd0)
        jax.block_until_ready(sol.q)
        run_s = time.perf_counter() - start
        stages.start("writing")
        energy = jax.jit(jax.vmap(lambda q, qd: mb.kinetic_energy(model, q, qd) + mb.potential_energy(model, q)))(
            sol.q, sol.qd)
        energy = np.asarray(energy)
        success = bool(sol.success)
        finite = np.isfinite(np.asarray(sol.ts))
        ts_np, q_np, qd_np, energy = (np.asarray(sol.ts)[finite], np.asarray(sol.q)[finite],
                                      np.asarray(sol.qd)[finite], energy[finite])
        # None where nothing was saved (a failed run): JSON has no NaN, and strict readers refuse it
        drift = (float(np.max(np.abs(energy - energy[0])) / max(abs(energy[0]), 1e-300))
                 if len(energy) else None)

        out = check_out_folder(args.out)
        out.mkdir(parents=True, exist_ok=True)
        units = coordinate_units(model)
        names = model.coordinate_names
        write_csv(out / "trajectory.csv",
                  [("time", "s")] + [(c, u) for c, u in zip(names, units)]
                  + [(f"{c}_dot", f"{u}/s") for c, u in zip(names, units)] + [("energy", "J")],
                  np.column_stack([ts_np, q_np, qd_np, energy]))
        if len(ts_np):
            _plot(out / "trajectory.png", args, model, ts_np, q_np, energy, units)

    num_steps = int(sol.stats["num_steps"])
    t_end = float(sol.t_end)
    summary = {
        "model": args.model,
        "coordinates": list(names),
        "units": {"time": "s", "q": list(units), "qd": [f"{u}/s" for u in units], "energy": "J"},
        "t1": args.t1,
        "solver": args.solver,
        "rtol": args.rtol,
        "atol": args.atol,
        "max_steps": args.max_steps,
        "controller": "PID (Watanabe and Duarte)" if controller is not None else None,
        "success": success,
        "t_end": t_end,
        "num_steps": num_steps,
        "compile_seconds": compile_s,
        "run_seconds": run_s,
        "q_final": np.asarray(sol.q_end).tolist(),
        "qd_final": np.asarray(sol.qd_end).tolist(),
        "energy_initial": float(energy[0]) if len(energy) else None,
        "max_relative_energy_drift": drift if controller is None else None,  # None: no samples, or a controller
        "device": str(jax.devices()[0]),
        "dtype": str(sol.q.dtype),
        "compile_cache": args.compile_cache,
        "compile_cache_loaded": cache.loaded,
        "compile_cache_stored": cache.stored,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    lines = [
        f"jaxmb simulate {args.model}: t in [0, {args.t1:g}] s, {args.solver}, rtol={args.rtol:g}, atol={args.atol:g}",
        f"  success: {success}, steps: {num_steps}",
        f"  compile: {compile_s:.2f} s, run: {run_s * 1e3:.1f} ms on {summary['device']} ({summary['dtype']}); "
        f"compilation cache: {cache.describe(args.compile_cache)}",
        f"  q(t = {t_end:g} s) = {np.array2string(np.asarray(sol.q_end), precision=10)}",
    ]
    if controller is None and drift is not None:
        lines.append(f"  max relative energy drift: {drift:.3e}")
    written = [out / "trajectory.png"] if len(ts_np) else []  # no figure of a run that saved no sample
    lines.append(f"  wrote {', '.join(str(p) for p in written + [out / 'trajectory.csv', out / 'summary.json'])}")
    text = "\n".join(lines)
    (out / "summary.txt").write_text(text + "\n")
    print(text)
    if not success:
        hint = (f"raise --max-steps (now {args.max_steps})" if num_steps >= args.max_steps
                else "try --solver kvaerno5 or a looser --rtol")
        raise CommandError(f"the simulation failed at t = {t_end:.6g} s of {args.t1:g} s after {num_steps} steps; "
                           f"{hint} (partial results in {out})")
    return 0
