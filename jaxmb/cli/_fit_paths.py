"""``jaxmb fit-paths MODEL.osim MOTION.mot --out DIR``: OpenSim's ``PolynomialPathFitter``.

Samples states around the motion (`jaxmb.sample_around_motion`), fits every muscle's and
ligament's path by a polynomial of the coordinates it spans (`jaxmb.fit_function_paths`)
and writes, in DIR:

- ``<name>_FunctionBasedPathSet.xml``: the path set, as OpenSim's fitter names it; OpenSim's
  ``ModOpReplacePathsWithFunctionBasedPaths`` and jaxmb's ``--function-paths`` (of
  ``moment-arms`` and ``static-optimization``, and `jaxmb.load_osim`) read it;
- ``<name>_coordinate_values_sampled.sto``: the states sampled (rad and m), each frame
  followed by its samples, timed between the frames as OpenSim's fitter times them;
- ``<name>_path_fit.csv``: per path (muscles, then ligaments), the order fitted, the
  samples used and the RMS and largest errors of its length (m) and moment arms at the
  samples.
"""

from __future__ import annotations

import math
import pathlib

from ._cache import CacheCounter
from ._errors import CommandError
from ._moment_arms import add_wrap_geometry_argument
from ._paths import check_model_file, check_out_folder
from ._progress import Stages

_STAGES = ["reading the model and the motion", "compiling and computing the paths at the samples", "fitting",
           "writing"]


def add_parser(sub, parents, positive_float, int_at_least) -> None:
    """Register ``fit-paths`` on the subparsers `sub`."""
    p = sub.add_parser("fit-paths", parents=parents,
                       help="muscle paths fitted by polynomials around a motion, as OpenSim's PolynomialPathFitter")
    p.add_argument("model", help="OpenSim .osim model")
    p.add_argument("motion", help="coordinates (.mot or .sto) the samples are drawn around")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--samples-per-frame", type=int_at_least(1), default=25,
                   help="states sampled around each frame of the motion (default 25)")
    p.add_argument("--bounds", type=positive_float, default=10.0, metavar="DEG",
                   help="the samples lie within +-DEG degrees of the frame, clipped to the coordinates' ranges "
                        "(default 10, OpenSim's; as in OpenSim, translational coordinates take the same number "
                        "in radians as metres)")
    p.add_argument("--coordinate-bounds", action="append", default=[], type=_coordinate_bounds, metavar="NAME=LO,HI",
                   help="the samples' offsets for one coordinate, in place of --bounds: degrees for a rotational "
                        "coordinate, metres for a translational one (repeatable; OpenSim's coordinate_sampling_bounds)")
    p.add_argument("--max-order", type=int_at_least(1, 9), default=6,
                   help="the largest polynomial order tried, 1 to 9 (default 6)")
    p.add_argument("--length-tolerance", type=positive_float, default=1e-3, metavar="M",
                   help="RMS length error an order must meet [m] (default 1e-3, OpenSim's)")
    p.add_argument("--moment-arm-tolerance", type=positive_float, default=1e-4, metavar="M",
                   help="RMS moment arm error an order must meet [m] (default 1e-4, OpenSim's)")
    p.add_argument("--keep-outliers", action="store_true",
                   help="fit every sample where the geometry resolved, as OpenSim's fitter does (default: leave out "
                        "the samples the fit misses by more than ten robust standard deviations and ten times the "
                        "length tolerance, geometry gone astray, and fit again)")
    p.add_argument("--seed", type=int_at_least(0), default=0, help="seed of the random samples (default 0)")
    add_wrap_geometry_argument(p)


def fit_paths(args) -> int:
    import numpy as np

    import jaxmb as mb

    check_model_file(args.model)
    check_model_file(args.motion, "motion")
    check_out_folder(args.out)
    name = pathlib.Path(args.model).stem
    with CacheCounter() as cache, Stages(_STAGES, args.progress) as progress:
        progress.start(_STAGES[0])
        imported = mb.io.read_osim(args.model, wrap_geometry=args.wrap_geometry)
        model = imported.model
        motion = mb.io.read_storage(args.motion)
        q = mb.io.coordinates_from_motion(model, motion, ignore=imported.all_coordinate_names, missing="default")
        samples = mb.sample_around_motion(model, q, samples_per_frame=args.samples_per_frame,
                                          bounds=_bounds(mb, model, args), seed=args.seed)
        progress.start(_STAGES[1])

        def report(done, total):
            progress.detail(f"{done}/{total} states")
            if done == total:  # the fit itself follows the last chunk
                progress.start(_STAGES[2])

        fit = mb.fit_function_paths(model, samples, max_order=args.max_order,
                                    length_tolerance=args.length_tolerance,
                                    moment_arm_tolerance=args.moment_arm_tolerance,
                                    reject_outliers=not args.keep_outliers, progress=report)
        progress.start(_STAGES[3])
        out = pathlib.Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        path_set = out / f"{name}_FunctionBasedPathSet.xml"
        mb.io.write_function_paths(fit.model, path_set, imported.coordinates)
        mb.io.write_storage(out / f"{name}_coordinate_values_sampled.sto",
                            mb.io.MotionData(_sample_times(np.asarray(motion.time), args.samples_per_frame),
                                             model.coordinate_names, samples, in_degrees=False,
                                             name="coordinate values sampled"))
        with open(out / f"{name}_path_fit.csv", "w") as f:
            f.write("path,order,samples,outliers,length_rms_m,length_max_m,moment_arm_rms_m,moment_arm_max_m\n")
            for k, path_name in enumerate(fit.names):
                f.write(f"{path_name},{fit.orders[k]},{fit.samples[k]},{fit.outliers[k]},{fit.length_rms[k]:.6e},"
                        f"{fit.length_max[k]:.6e},{fit.moment_arm_rms[k]:.6e},{fit.moment_arm_max[k]:.6e}\n")
    met = np.sum((fit.length_rms <= args.length_tolerance) & (fit.moment_arm_rms <= args.moment_arm_tolerance))
    worst = int(np.argmax(fit.length_rms))
    # Path-samples where the geometry failed (`path_status`) are in neither count.
    failed = len(fit.names) * samples.shape[0] - int(fit.samples.sum()) - int(fit.outliers.sum())
    print(f"wrote {path_set} and {name}_path_fit.csv ({len(fit.names)} paths, {samples.shape[0]} states "
          f"around {q.shape[0]} frames); {met} paths meet both tolerances; {failed} path-samples left out "
          f"where the geometry failed (path_status), {int(fit.outliers.sum())} as outliers; largest RMS "
          f"length error "
          f"{fit.length_rms[worst] * 1e3:.3g} mm ({fit.names[worst]})")
    print(f"compilation cache: {cache.describe(args.compile_cache)}")
    return 0


def _coordinate_bounds(text: str) -> tuple[str, float, float]:
    """``NAME=LO,HI`` as ``(NAME, LO, HI)`` with LO < HI, else an argparse error."""
    import argparse

    name, _, values = text.partition("=")
    try:
        lo, hi = (float(v) for v in values.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected NAME=LO,HI, got {text!r}") from None
    if not name or not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise argparse.ArgumentTypeError(f"expected NAME=LO,HI with finite LO < HI, got {text!r}")
    return name, lo, hi


def _bounds(mb, model, args):
    """The samples' offsets per coordinate (nq, 2): ``--bounds`` in radians for every
    coordinate (metres for translations, as OpenSim takes them), then each
    ``--coordinate-bounds`` in its coordinate's unit."""
    import numpy as np

    bound = math.radians(args.bounds)
    out = np.tile([-bound, bound], (model.nq, 1))
    rotational = mb.io.rotational_coordinates(model)
    for name, lo, hi in args.coordinate_bounds:
        if name not in model.coordinate_names:
            raise CommandError(f"--coordinate-bounds: {name!r} is not an independent coordinate of {args.model}; "
                               f"its coordinates are {', '.join(model.coordinate_names)}")
        k = model.coordinate_names.index(name)
        out[k] = np.radians([lo, hi]) if rotational[k] else (lo, hi)
    return out


def _sample_times(time, n):
    """Each frame's time, then its `n` samples' between it and the next frame (OpenSim's
    fitter spaces them by a step of ``(t_{f+1} - t_f) / (n + 2)``, the last frame's by the
    step before)."""
    import numpy as np

    steps = np.diff(time, append=time[-1] + (time[-1] - time[-2] if time.size > 1 else 1.0)) / (n + 2)
    return (time[:, None] + np.arange(n + 1)[None, :] * steps[:, None]).reshape(-1)
