"""``jaxmb moment-arms MODEL.osim --coordinate NAME --out DIR``."""

from __future__ import annotations

from ._cache import CacheCounter
from ._paths import check_model_file, check_out_folder
from ._progress import Stages


def moment_arms(args) -> int:
    from ..io import moment_arm_report

    model = check_model_file(args.model)
    check_out_folder(args.out)
    stages = ["loading the model", "compiling and computing the moment arms", "writing"]
    with CacheCounter() as cache, Stages(stages, args.progress) as progress:
        moment_arm_report(model, args.coordinate, args.out, n=args.n, stages=progress,
                          wrap_geometry=args.wrap_geometry, frozen_path=args.frozen_path,
                          function_paths=args.function_paths and check_model_file(args.function_paths, "path set"))
    print(f"compilation cache: {cache.describe(args.compile_cache)}")
    return 0


def add_wrap_geometry_argument(parser) -> None:
    """``--wrap-geometry``, for the commands that compute muscle paths of an OpenSim model."""
    from .._muscles._geometry import DEFAULT_WRAP_GEOMETRY, WRAP_GEOMETRIES

    parser.add_argument("--wrap-geometry", default=DEFAULT_WRAP_GEOMETRY, choices=WRAP_GEOMETRIES,
                        help="converged (default): the multi-wrap cylinders' sliding converged, in closed form "
                             "(faster; within tenths of a millimetre of OpenSim, docs/opensim-parity.md); "
                             "opensim: OpenSim 4.6's wrap iterates, its lengths and moment arms to round-off")


def add_function_paths_argument(parser) -> None:
    """``--function-paths``, for the commands that compute muscle paths of an OpenSim model."""
    parser.add_argument("--function-paths", metavar="FILE.xml", default=None,
                        help="OpenSim path set (a FunctionBasedPathSet, as jaxmb fit-paths or OpenSim's "
                             "PolynomialPathFitter writes it) whose paths replace those of the muscles it names")
