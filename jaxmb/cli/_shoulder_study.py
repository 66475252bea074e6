"""``jaxmb shoulder-study --out DIR``: the shoulder study of Ehsani (2016), section 4-4 C.

Tracks the desired elevation with computed-torque control on MoBL-ARMS's shoulder and
writes, in DIR: ``fig19_elevation.png``, ``fig20_torques.png``, ``tracking.csv`` and
``report.md`` (with ``--dae``, the DAE route's comparison too; with ``--muscles``, Fig. 21:
the 14 muscles' forces by static optimization with compliant tendons,
``fig21_muscle_forces.png`` and ``muscle_forces.csv``).
"""

from __future__ import annotations

import os
import pathlib
import time

from ._cache import CacheCounter
from ._errors import CommandError
from ._paths import check_model_file, check_out_folder
from ._progress import Stages

_ENV = "JAXMB_MOBL_ARMS"


def add_parser(sub, parents, positive_float, relative_tolerance) -> None:
    """Register ``shoulder-study`` on the subparsers `sub`."""
    p = sub.add_parser("shoulder-study", parents=parents,
                       help="Ehsani's shoulder study: computed-torque tracking of MoBL-ARMS's shoulder, its "
                            "torques, figures and a report")
    p.add_argument("--model", default=None,
                   help=f"MoBL-ARMS .osim file (MOBL_ARMS_fixed_41.osim; default: ${_ENV})")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--period", type=positive_float, default=2.0,
                   help="duration of the elevation's raise and lowering [s] (default 2)")
    p.add_argument("--fps", type=positive_float, default=100.0, help="frames per second [1/s] (default 100)")
    p.add_argument("--rtol", type=relative_tolerance, default=1e-10,
                   help="integrator tolerance rtol = atol (default 1e-10)")
    p.add_argument("--dae", action="store_true",
                   help="also run the DAE route (the rhythm as constraints) and compare costs")
    p.add_argument("--muscles", action="store_true",
                   help="also share the torques among the 14 muscles (Fig. 21: static optimization with "
                        "compliant tendons; compiles the muscles' paths, minutes and several GB)")


def _model_path(args) -> pathlib.Path:
    path = args.model or os.environ.get(_ENV)
    if not path:
        raise CommandError(f"give MoBL-ARMS's .osim with --model PATH (or set ${_ENV}); MOBL_ARMS_fixed_41.osim "
                           "is distributed by the MoBL-ARMS project (Saul et al. 2015), not with jaxmb")
    return check_model_file(path)


def shoulder_study(args) -> int:
    import warnings

    import equinox as eqx
    import jax
    import numpy as np

    from .. import studies
    from ..io import read_osim

    out = check_out_folder(args.out)
    path = _model_path(args)
    stages = ["reading the model", "compiling and tracking (embedded ODE)"]
    stages += ["compiling and tracking (DAE)"] if args.dae else []
    stages += ["reading the muscles, compiling and sharing the torques (Fig. 21)"] if args.muscles else []
    stages += ["writing figures and report"]
    n_frames = int(round(args.period * args.fps)) + 1
    if n_frames < 2:
        raise CommandError(f"--fps {args.fps:g} over --period {args.period:g} s gives fewer than 2 frames")
    timings = {}
    with CacheCounter() as cache, Stages(stages, args.progress) as progress:
        progress.start(stages[0])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # MoBL's impossible inertias: reported by `jaxmb info`
            model = studies.shoulder_model(read_osim(path, muscles=False, locked=studies.locked_coordinates()).model)
        trajectory = studies.ElevationTrajectory(period=args.period)
        runs = {"embedded ODE": studies.track_shoulder}
        if args.dae:
            runs["DAE"] = studies.track_shoulder_dae
        results = {}
        for k, (name, fn) in enumerate(runs.items()):
            progress.start(stages[1 + k])
            f = eqx.filter_jit(lambda m, tr, fn=fn: fn(m, tr, n_frames=n_frames, rtol=args.rtol, atol=args.rtol))
            t = time.perf_counter()
            jax.block_until_ready(f(model, trajectory))
            timings[f"{name} compile and run"] = time.perf_counter() - t
            t = time.perf_counter()
            results[name] = jax.block_until_ready(f(model, trajectory))
            timings[f"{name} run"] = time.perf_counter() - t
        tracking = results["embedded ODE"]
        forces = None
        if args.muscles:
            progress.start(stages[-2])
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # MoBL's impossible inertias and skipped forces
                muscled = studies.shoulder_model(read_osim(path, muscles=studies.SHOULDER_MUSCLES,
                                                           locked=studies.locked_coordinates()).model)
            t = time.perf_counter()
            forces = studies.shoulder_muscle_forces(muscled, tracking, studies.compliant_static_optimization)
            timings["Fig. 21 compile and run"] = time.perf_counter() - t
            t = time.perf_counter()
            forces = studies.shoulder_muscle_forces(muscled, tracking, studies.compliant_static_optimization)
            timings["Fig. 21 run"] = time.perf_counter() - t
        progress.start(stages[-1])
        out.mkdir(parents=True, exist_ok=True)
        figures = {"Fig. 19: desired and achieved elevation": "fig19_elevation.png",
                   "Fig. 20: required torques": "fig20_torques.png"}
        studies.plot_elevation(tracking, out / figures["Fig. 19: desired and achieved elevation"])
        studies.plot_torques(tracking, out / figures["Fig. 20: required torques"])
        if forces is not None:
            figures["Fig. 21: muscle forces"] = "fig21_muscle_forces.png"
            studies.plot_muscle_forces(tracking.ts, forces, path=out / "fig21_muscle_forces.png")
            np.savetxt(out / "muscle_forces.csv", np.column_stack([np.asarray(tracking.ts), forces]), delimiter=",",
                       header=",".join(["time_s"] + [f"{m}_N" for m in studies.SHOULDER_MUSCLES]), comments="",
                       fmt="%.17g")
        studies.write_csv(tracking, out / "tracking.csv")
        report = studies.report_markdown(tracking, dae=results.get("DAE"), timings=timings, figures=figures,
                                         forces=forces)
        (out / "report.md").write_text(report)
    err = abs(tracking.q - tracking.q_ref).max(axis=0)
    print(f"wrote {out / 'report.md'}, {', '.join(figures.values())} and tracking.csv ({n_frames} frames; max "
          f"tracking error {float(err[0]):.2g}, {float(err[1]):.2g}, {float(err[2]):.2g} rad)")
    if args.dae:
        print(f"DAE / embedded run time: {timings['DAE run'] / timings['embedded ODE run']:.2f}x")
    print(f"compilation cache: {cache.describe(args.compile_cache)}")
    return 0
