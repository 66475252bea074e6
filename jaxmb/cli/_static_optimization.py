"""``jaxmb static-optimization MODEL.osim MOTION.mot --out DIR`` (or ``--setup SETUP.xml``):
OpenSim's Static Optimization.

Writes ``<name>_StaticOptimization_activation.sto`` (activations of the muscles, controls of
the actuators) and ``<name>_StaticOptimization_force.sto`` (muscle forces, N; actuator
forces, N or N m) in DIR, one column per muscle and actuator by name, as OpenSim does.
"""

from __future__ import annotations

import pathlib
import warnings

from ._cache import CacheCounter
from ._errors import CommandError
from ._inverse_dynamics import add_motion_arguments, check_motion_arguments
from ._moment_arms import add_function_paths_argument, add_wrap_geometry_argument
from ._paths import check_model_file, check_out_folder
from ._progress import Stages

_STAGES = ["reading the model, the motion and the actuators", "smoothing, compiling and solving", "writing"]


def add_parser(sub, parents, non_negative_float) -> None:
    """Register ``static-optimization`` on the subparsers `sub`."""
    p = sub.add_parser("static-optimization", parents=parents,
                       help="muscle activations of a motion, as OpenSim's Static Optimization")
    add_motion_arguments(p, non_negative_float, "an OpenSim AnalyzeTool setup file with a StaticOptimization analysis")
    p.add_argument("--actuators", metavar="FILE.xml", action="append", default=None,
                   help="OpenSim ForceSet file of reserve and residual actuators, appended to the model's "
                        "(repeatable; default: none, or the setup file's force_set_files)")
    p.add_argument("--exponent", type=float, default=None,
                   help="exponent p of the activations in the cost (default 2, or the setup file's)")
    p.add_argument("--solver", choices=("newton", "optax"), default="newton",
                   help="per-frame solver: newton (default; the dual by a semismooth Newton method, frames "
                        "batched) or optax (an augmented Lagrangian around projected optax.sgd, frames warm-started "
                        "in order; slower)")
    p.add_argument("--matching", choices=("moments", "accelerations"), default="moments",
                   help="constraint written as the torque balance (moments, default) or as OpenSim's acceleration "
                        "matching; the same solution unless --residual-weight is given")
    p.add_argument("--residual-weight", type=float, default=None, metavar="C",
                   help="penalise the constraint's residual with weight C instead of imposing it (frames the "
                        "muscles cannot balance get the closest activations)")
    p.add_argument("--frozen-path", action="store_true",
                   help="the muscles pull and lengthen along their paths frozen at each frame, as in OpenSim "
                        "(its computeMomentArm) instead of R = -dL/dq; with --wrap-geometry opensim this is "
                        "OpenSim's problem where paths wrap")
    p.add_argument("--opensim-active-force", action="store_true",
                   help="each muscle's strength F_A as OpenSim 4.6's static optimization takes it (for "
                        "DeGrooteFregly2016Muscle and Millard2012EquilibriumMuscle, more than the force along "
                        "the tendon where the fibres are pennated) instead of the active fibre force along the "
                        "tendon")
    add_wrap_geometry_argument(p)
    add_function_paths_argument(p)


def _inputs(args):
    from ..io._setup import read_static_optimization_setup

    if check_motion_arguments(args):
        s = read_static_optimization_setup(check_model_file(args.setup))
        if not s.use_model_force_set:
            raise CommandError(f"{args.setup}: use_model_force_set false solves for one coordinate actuator per "
                               "coordinate, whose solution is the inverse dynamics: run jaxmb inverse-dynamics, "
                               "or set it to true")
        if s.replace_force_set:
            raise CommandError(f"{args.setup}: replace_force_set true is not supported (jaxmb appends the "
                               "force_set_files to the model's actuators); set it to false")
        return dict(model=s.model_file, motion=s.coordinates_file,
                    loads=args.external_loads or s.external_loads_file,
                    actuators=tuple(args.actuators or s.force_set_files),
                    lowpass=args.lowpass if args.lowpass is not None else s.lowpass_hz, time_range=s.time_range,
                    exponent=args.exponent if args.exponent is not None else s.exponent,
                    name=s.name)
    return dict(model=args.model, motion=args.motion, loads=args.external_loads, actuators=tuple(args.actuators or ()),
                lowpass=args.lowpass, time_range=None, exponent=2.0 if args.exponent is None else args.exponent,
                name=pathlib.Path(args.model).stem)


def static_optimization(args) -> int:
    import numpy as np

    import jaxmb as mb

    check_out_folder(args.out)
    inp = _inputs(args)
    lowpass = inp["lowpass"] or None
    with CacheCounter() as cache, Stages(_STAGES, args.progress) as progress:
        progress.start(_STAGES[0])
        path_set = args.function_paths and check_model_file(args.function_paths, "path set")
        imported = mb.io.read_osim(inp["model"], wrap_geometry=args.wrap_geometry, function_paths=path_set)
        model = imported.model
        motion = mb.io.read_storage(inp["motion"])
        q = mb.io.coordinates_from_motion(model, motion, ignore=imported.all_coordinate_names)
        loads = mb.io.read_external_loads(inp["loads"], model) if inp["loads"] else ()
        extra = tuple(a for path in inp["actuators"] for a in mb.io.read_actuators(path, model))
        progress.start(_STAGES[1])
        result = mb.static_optimization(model, motion.time, q, lowpass_hz=lowpass, time_range=inp["time_range"],
                                        external_loads=loads, actuators_extra=extra, exponent=inp["exponent"],
                                        solver=args.solver, matching=args.matching,
                                        residual_weight=args.residual_weight,
                                        moment_arms="frozen_path" if args.frozen_path else "closed_form",
                                        active_force="opensim" if args.opensim_active_force else "along_tendon")
        progress.start(_STAGES[2])
        labels = result.muscle_names + result.actuator_names
        time = np.asarray(result.time)
        out = pathlib.Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        paths = []
        for kind, values in (("activation", np.hstack([result.activations, result.controls])),
                             ("force", np.hstack([result.muscle_forces, result.actuator_forces]))):
            path = out / f"{inp['name']}_StaticOptimization_{kind}.sto"
            mb.io.write_storage(path, mb.io.MotionData(time, labels, np.asarray(values), in_degrees=False,
                                                       name="Static Optimization"))
            paths.append(path)
    failed = int(np.sum(~np.asarray(result.result == mb.RESULTS.successful)))
    print(f"wrote {paths[0]} and {paths[1].name} ({time.size} frames, {len(result.muscle_names)} muscles, "
          f"{len(result.actuator_names)} actuators{f', low-pass {lowpass:g} Hz' if lowpass else ''}"
          f"{f', {len(loads)} external forces' if loads else ''}); largest torque residual "
          f"{float(np.max(np.asarray(result.torque_residual))):.1e}")
    if failed:
        bad = time[~np.asarray(result.result == mb.RESULTS.successful)]
        what = (f"{failed} of {time.size} frames (t = {', '.join(f'{t:g}' for t in bad[:4])}"
                f"{', ...' if failed > 4 else ''} s) have no activations within the bounds that balance the forces, "
                "or their solve did not converge: add reserve actuators or widen their bounds, or check the motion "
                "and the exponent; their rows in the files are the solver's last iterate")
        if failed == time.size:
            raise CommandError(f"static optimization failed at every frame: {what}.")
        warnings.warn(what)
    stronger = _stronger_in_opensim(model)
    if stronger and not args.opensim_active_force:
        print(f"note: {len(stronger)} of {len(model.muscles)} muscles ({', '.join(stronger[:3])}"
              f"{', ...' if len(stronger) > 3 else ''}) are pennated De Groote or Millard muscles, whose F_A OpenSim "
              "4.6's static optimization takes larger than the force along the tendon used here; "
              "--opensim-active-force reproduces OpenSim's")
    print(f"compilation cache: {cache.describe(args.compile_cache)}")
    return 0


def _stronger_in_opensim(model) -> list[str]:
    """The muscles whose F_A OpenSim 4.6's static optimization takes differently from the
    force along the tendon (`static_optimization`'s ``active_force``): pennated
    DeGrooteFregly2016Muscle and Millard2012EquilibriumMuscle."""
    import jaxmb as mb  # as the command itself: `jaxmb --help` does not import JAX

    kinds = (mb.DeGrooteFregly2016Muscle, mb.Millard2012EquilibriumMuscle)
    return [m.name for m in model.muscles
            if isinstance(m.force_model, kinds) and float(m.force_model.pennation_angle_at_optimal) > 0.0]
