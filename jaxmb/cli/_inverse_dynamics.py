"""``jaxmb inverse-dynamics MODEL.osim MOTION.mot --out DIR`` (or ``--setup SETUP.xml``):
OpenSim's Inverse Dynamics tool.

Writes one ``.sto`` in DIR: ``time`` and ``<coordinate>_moment`` (rotational) or
``<coordinate>_force`` (translational) per independent coordinate, in the model's
coordinate order (OpenSim writes its multibody-tree order; the names are the same).
"""

from __future__ import annotations

import os
import pathlib

from ._cache import CacheCounter
from ._errors import CommandError, UsageError
from ._paths import check_model_file, check_out_folder
from ._progress import Stages

_STAGES = ["reading the model and the motion", "smoothing, compiling and solving", "writing"]


def add_parser(sub, parents, non_negative_float) -> None:
    """Register ``inverse-dynamics`` on the subparsers `sub` (`non_negative_float`: the
    command line's argument type for a number >= 0)."""
    p = sub.add_parser("inverse-dynamics", parents=parents,
                       help="generalized forces of a motion, as OpenSim's Inverse Dynamics tool")
    add_motion_arguments(p, non_negative_float, "an OpenSim InverseDynamicsTool setup file")


def add_motion_arguments(p, non_negative_float, setup: str) -> None:
    """The arguments the motion commands share: MODEL MOTION or ``--setup`` (`setup` says
    which file), ``--out``, ``--lowpass``, ``--external-loads``."""
    p.add_argument("model", nargs="?", help="OpenSim .osim model (not with --setup)")
    p.add_argument("motion", nargs="?", help="coordinates (.mot or .sto; not with --setup)")
    p.add_argument("--setup", help=f"{setup}, as it is; its paths are relative to its folder")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--lowpass", type=non_negative_float, default=None, metavar="HZ",
                   help="low-pass cutoff [Hz] of OpenSim's filter for the coordinates (default: none, or the "
                        "setup file's)")
    p.add_argument("--external-loads", metavar="FILE.xml", default=None,
                   help="OpenSim ExternalLoads file (default: none, or the setup file's)")


def _inputs(args):
    """``(model, motion, loads, lowpass, time_range, output name)`` from the arguments or the setup file."""
    from ..io._setup import read_inverse_dynamics_setup

    if check_motion_arguments(args):
        setup = read_inverse_dynamics_setup(check_model_file(args.setup))
        import warnings

        unsupported = [f for f in setup.forces_to_exclude if f.lower() != "muscles"]
        if unsupported:
            warnings.warn(f"{args.setup}: forces_to_exclude {unsupported}: jaxmb excludes the muscles only "
                          "(the model's other forces are included).", stacklevel=2)
        if len(unsupported) == len(setup.forces_to_exclude):
            warnings.warn(f"{args.setup}: forces_to_exclude does not name Muscles, but jaxmb's inverse dynamics "
                          "leaves the muscles out all the same (OpenSim would apply their forces at the model's "
                          "default states).", stacklevel=2)
        loads = args.external_loads or setup.external_loads_file
        lowpass = args.lowpass if args.lowpass is not None else setup.lowpass_hz
        return (setup.model_file, setup.coordinates_file, loads, lowpass, setup.time_range,
                setup.output_gen_force_file)
    return args.model, args.motion, args.external_loads, args.lowpass, None, "inverse_dynamics.sto"


def check_motion_arguments(args) -> bool:
    """True for ``--setup`` (refusing MODEL MOTION beside it); else check MODEL and MOTION exist."""
    if args.setup:
        if args.model or args.motion:
            raise UsageError("give either MODEL MOTION or --setup, not both")
        return True
    if not (args.model and args.motion):
        raise UsageError("give MODEL.osim and MOTION.mot (or --setup SETUP.xml)")
    check_model_file(args.model)
    if not os.path.isfile(args.motion):
        raise CommandError(f"{args.motion}: no such motion file")
    return False


def inverse_dynamics(args) -> int:
    import numpy as np

    import jaxmb as mb

    check_out_folder(args.out)
    model_path, motion_path, loads_path, lowpass, time_range, out_name = _inputs(args)
    if lowpass == 0:
        lowpass = None
    with CacheCounter() as cache, Stages(_STAGES, args.progress) as progress:
        progress.start(_STAGES[0])
        imported = mb.io.read_osim(model_path)
        model = imported.model
        motion = mb.io.read_storage(motion_path)
        q = mb.io.coordinates_from_motion(model, motion, ignore=imported.all_coordinate_names)
        loads = mb.io.read_external_loads(loads_path, model) if loads_path else ()
        progress.start(_STAGES[1])
        result = mb.inverse_dynamics_motion(model, motion.time, q, lowpass_hz=lowpass, time_range=time_range,
                                            external_loads=loads)
        forces = np.asarray(result.forces)
        progress.start(_STAGES[2])
        labels = tuple(f"{c}_{'moment' if rot else 'force'}"
                       for c, rot in zip(model.coordinate_names, mb.io.rotational_coordinates(model)))
        out = pathlib.Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        path = out / out_name
        mb.io.write_storage(path, mb.io.MotionData(np.asarray(result.time), labels, forces, in_degrees=False,
                                                   name="Inverse Dynamics Generalized Forces"))
    print(f"wrote {path} ({forces.shape[0]} frames, {forces.shape[1]} coordinates"
          f"{f', low-pass {lowpass:g} Hz' if lowpass else ''}{f', {len(loads)} external forces' if loads else ''})")
    print(f"compilation cache: {cache.describe(args.compile_cache)}")
    return 0
