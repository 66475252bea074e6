"""The ``jaxmb`` command line.

``jaxmb simulate double-pendulum --t1 20 --out DIR`` simulates seed 000's double
pendulum (float64, Dopri8, tight tolerances) and writes a figure, the trajectory
as CSV and a short text summary (energy drift, solver statistics, timings).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import time


def _enable_x64():
    import jax

    jax.config.update("jax_enable_x64", True)


def _default_compile_cache() -> pathlib.Path:
    base = os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache"
    return pathlib.Path(base) / "jaxmb" / "xla"


def _use_compile_cache(choice: str | None) -> str | None:
    """Point JAX's persistent compilation cache at `choice` for this process.

    A command is a process of its own, so its compiled programs are kept on disk and
    the next run of the same command loads them instead of compiling again (MoBL-ARMS's
    muscle paths compile for minutes; tracing, which no cache saves, is a fraction of
    that; docs/moment_arms.md). `None` takes ``JAX_COMPILATION_CACHE_DIR`` if it is set,
    else ``$XDG_CACHE_HOME/jaxmb/xla`` (``~/.cache/jaxmb/xla``); ``"none"`` switches the
    cache off. A folder the user named that cannot be used is an error; an unusable
    default is a note, and no cache. Returns the folder in use, or None.
    """
    import jax

    if choice is not None and choice.lower() == "none":
        jax.config.update("jax_compilation_cache_dir", None)
        return None
    source = "--compile-cache"
    if choice is None:
        choice, source = jax.config.jax_compilation_cache_dir, "JAX_COMPILATION_CACHE_DIR"
        if not choice:
            choice, source = str(_default_compile_cache()), None
    # JAX would only warn, at every program, when it cannot use the folder: say it once, here.
    try:
        pathlib.Path(choice).mkdir(parents=True, exist_ok=True)
        writable = os.access(choice, os.W_OK)
        reason = "it is not writable"
    except OSError as err:
        writable, reason = False, str(err)
    if not writable:
        if source:
            raise SystemExit(f"jaxmb: {source} {choice}: cannot use this folder ({reason}); "
                             "pass a writable folder to --compile-cache, or 'none' to compile without a cache.")
        print(f"jaxmb: no compilation cache: cannot use {choice} ({reason}); "
              "pass --compile-cache DIR to keep compiled programs elsewhere.", file=sys.stderr)
        jax.config.update("jax_compilation_cache_dir", None)
        return None
    jax.config.update("jax_compilation_cache_dir", choice)
    return choice


def _simulate(args) -> int:
    _enable_x64()
    import jax
    import jax.numpy as jnp
    import numpy as np

    import jaxmb as mb

    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.model == "double-pendulum":
        model = mb.models.double_pendulum()
        # Seed 000's notebook: theta1 = pi/10, theta2 = pi/3, omega1 = 2 pi, omega2 = -6 pi.
        q0 = jnp.array([np.pi / 10, np.pi / 3])
        qd0 = jnp.array([2 * np.pi, -6 * np.pi])
    elif args.model == "three-link-arm":
        model = mb.models.three_link_arm()
        q0 = jnp.array([-np.pi / 2, 0.3, 0.2])
        qd0 = jnp.zeros(3)
    else:
        model = mb.models.planar_chain(args.n)
        q0 = jnp.full(args.n, 0.3)
        qd0 = jnp.zeros(args.n)
    tau = None
    if args.pid and args.model == "double-pendulum":
        # Seed 000's commented PID: M12 = 30 (pi/3 - theta2) - 2 theta2' + 3 ∫(pi/3 - theta2);
        # the elbow torque M12 enters the generalized forces as (-M12, M12).
        selection = jnp.array([[-1.0], [1.0]])
        controller = mb.control.PID((1,), np.pi / 3, kp=30.0, ki=3.0, kd=2.0, selection=selection)
    else:
        controller = None
    ts = jnp.linspace(0.0, args.t1, int(args.t1 * args.fps) + 1)

    def run(m, a, b):
        return mb.simulate(m, a, b, args.t1, ts=ts, tau=tau, controller=controller, rtol=args.rtol,
                           atol=args.atol, solver=args.solver, progress=False)

    start = time.perf_counter()
    compiled = jax.jit(run).lower(model, q0, qd0).compile()
    compile_s = time.perf_counter() - start
    start = time.perf_counter()
    sol = compiled(model, q0, qd0)
    jax.block_until_ready(sol.q)
    run_s = time.perf_counter() - start
    energy = jax.vmap(lambda q, qd: mb.kinetic_energy(model, q, qd) + mb.potential_energy(model, q))(sol.q, sol.qd)
    energy = np.asarray(energy)
    drift = float(np.max(np.abs(energy - energy[0])) / max(abs(energy[0]), 1e-300))

    data = np.column_stack([np.asarray(sol.ts), np.asarray(sol.q), np.asarray(sol.qd), energy])
    header = ",".join(["t"] + [f"q_{c}" for c in model.coordinate_names]
                      + [f"qd_{c}" for c in model.coordinate_names] + ["energy"])
    np.savetxt(out / "trajectory.csv", data, delimiter=",", header=header, comments="")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    for k, name in enumerate(model.coordinate_names):
        axes[0].plot(sol.ts, sol.q[:, k], label=name)
    axes[0].set_ylabel("q [rad]")
    axes[0].legend()
    axes[1].plot(sol.ts, (energy - energy[0]) / abs(energy[0]))
    axes[1].set_ylabel("relative energy change")
    axes[1].set_xlabel("t [s]")
    fig.suptitle(f"jaxmb: {args.model}, {args.solver}, rtol={args.rtol:g}")
    fig.tight_layout()
    fig.savefig(out / "trajectory.png", dpi=120)
    plt.close(fig)

    summary = {
        "model": args.model,
        "coordinates": list(model.coordinate_names),
        "t1": args.t1,
        "solver": args.solver,
        "rtol": args.rtol,
        "atol": args.atol,
        "controller": "PID (seed 000)" if controller is not None else None,
        "success": bool(sol.success),
        "num_steps": int(sol.stats["num_steps"]),
        "compile_seconds": compile_s,
        "run_seconds": run_s,
        "q_final": np.asarray(sol.q[-1]).tolist(),
        "qd_final": np.asarray(sol.qd[-1]).tolist(),
        "energy_initial": float(energy[0]),
        "max_relative_energy_drift": drift if controller is None else None,
        "device": str(jax.devices()[0]),
        "dtype": str(sol.q.dtype),
        "compile_cache": args.compile_cache,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    lines = [
        f"jaxmb simulate {args.model}: t in [0, {args.t1}] s, {args.solver}, rtol={args.rtol:g}, atol={args.atol:g}",
        f"  success: {summary['success']}, steps: {summary['num_steps']}",
        f"  {'compile or load from the cache' if args.compile_cache else 'compile'}: {compile_s:.2f} s, "
        f"run: {run_s * 1e3:.1f} ms on {summary['device']} ({summary['dtype']}); "
        f"compilation cache: {args.compile_cache or 'off'}",
        f"  q(t1) = {np.array2string(np.asarray(sol.q[-1]), precision=10)}",
    ]
    if controller is None:
        lines.append(f"  max relative energy drift: {drift:.3e}")
    lines.append(f"  wrote {out / 'trajectory.png'}, {out / 'trajectory.csv'}, {out / 'summary.json'}")
    text = "\n".join(lines)
    (out / "summary.txt").write_text(text + "\n")
    print(text)
    return 0 if summary["success"] else 1


def _moment_arms(args) -> int:
    _enable_x64()
    from .io import moment_arm_report

    moment_arm_report(args.model, args.coordinate, args.out, n=args.n)
    print(f"compilation cache: {args.compile_cache or 'off'}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="jaxmb", description="jaxmb: differentiable multibody dynamics in JAX.")
    sub = parser.add_subparsers(dest="command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--compile-cache", metavar="DIR", default=None,
                        help="folder of JAX's persistent compilation cache, so that a second run loads "
                             "the compiled programs (default: $JAX_COMPILATION_CACHE_DIR, else "
                             "~/.cache/jaxmb/xla; 'none' switches it off)")
    sim = sub.add_parser("simulate", parents=[common],
                         help="simulate a built-in model and write a figure and a summary")
    sim.add_argument("model", choices=["double-pendulum", "three-link-arm", "planar-chain"])
    sim.add_argument("--t1", type=float, default=20.0, help="final time [s] (default 20)")
    sim.add_argument("--out", default="results", help="output folder (default ./results)")
    sim.add_argument("--solver", default="dopri8", choices=["tsit5", "dopri5", "dopri8", "kvaerno5"])
    sim.add_argument("--rtol", type=float, default=1e-13)
    sim.add_argument("--atol", type=float, default=1e-13)
    sim.add_argument("--fps", type=float, default=100.0, help="saved samples per second")
    sim.add_argument("--n", type=int, default=7, help="number of links of planar-chain")
    sim.add_argument("--pid", action="store_true", help="double pendulum: seed 000's PID holding the elbow at pi/3")
    sim.set_defaults(func=_simulate)
    ma = sub.add_parser("moment-arms", parents=[common],
                        help="moment arms R = -dL/dq of an OpenSim model over one coordinate")
    ma.add_argument("model", help="path to an OpenSim .osim file")
    ma.add_argument("--coordinate", required=True, help="coordinate to sweep (OpenSim name)")
    ma.add_argument("--out", default="results", help="output folder")
    ma.add_argument("--n", type=int, default=181, help="number of sweep points")
    ma.set_defaults(func=_moment_arms)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.compile_cache = _use_compile_cache(args.compile_cache)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
