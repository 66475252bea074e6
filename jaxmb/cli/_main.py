"""The ``jaxmb`` command: argument parsing, the entry point and its one-line errors.

Every user error (bad arguments, a missing or broken model file, a
:class:`jaxmb.ModelError` or other ``ValueError`` from the library, a failed
simulation) prints ``jaxmb: error: <message>`` on stderr and exits with status 2
(usage) or 1 (anything else); ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import math
import sys
import warnings

from .. import __version__
from ._errors import CommandError, UsageError
from ._paths import BUILT_IN_MODELS

class _Parser(argparse.ArgumentParser):
    """argparse, whose usage errors become :class:`UsageError` (one line, status 2)."""

    def error(self, message):
        raise UsageError(f"{message} (see '{self.prog} --help')")


# ---- argument types: each names the rule it checks; argparse adds the argument's name ----


def _float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be finite, got {text}")
    return value


def positive_float(text: str) -> float:
    value = _float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def non_negative_float(text: str) -> float:
    value = _float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def relative_tolerance(text: str) -> float:
    """A relative tolerance float64 can reach: in [1e-15, 1)."""
    value = _float(text)
    if not 1e-15 <= value < 1:
        raise argparse.ArgumentTypeError(
            f"must lie in [1e-15, 1), got {text} (float64 carries about 16 digits; a relative tolerance "
            "below 1e-15 cannot be met)")
    return value


def _int_at_least(lowest: int, highest: int | None = None):
    def check(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < lowest or (highest is not None and value > highest):
            bound = f">= {lowest}" if highest is None else f"between {lowest} and {highest}"
            raise argparse.ArgumentTypeError(f"must be {bound}, got {text}")
        return value

    check.__name__ = "integer"
    return check


def build_parser() -> argparse.ArgumentParser:
    """The ``jaxmb`` argument parser (subcommands ``simulate``, ``moment-arms``, ``inverse-dynamics``,
    ``static-optimization``, ``fit-paths``, ``shoulder-study``, ``info``)."""
    parser = _Parser(prog="jaxmb", description="jaxmb: differentiable multibody dynamics in JAX.")
    parser.add_argument("--version", action="version", version=f"jaxmb {__version__}")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    common = _Parser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="show the traceback of an error")
    jitted = _Parser(add_help=False, parents=[common])
    jitted.add_argument("--compile-cache", metavar="DIR", default=None,
                        help="folder of JAX's persistent compilation cache, so that a second run loads "
                             "the compiled programs (default: $JAX_COMPILATION_CACHE_DIR, else "
                             "~/.cache/jaxmb/xla; 'none' switches it off)")
    jitted.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                        help="show progress on stderr (default: when stderr is a terminal)")

    sim = sub.add_parser("simulate", parents=[jitted],
                         help="simulate a built-in model and write a figure, a CSV and a summary")
    sim.add_argument("model", choices=BUILT_IN_MODELS)
    sim.add_argument("--t1", type=_float, default=20.0, help="final time [s], > 0 (default 20; starts at t = 0)")
    sim.add_argument("--out", default="results", help="output folder (default ./results)")
    sim.add_argument("--solver", default="dopri8", choices=["tsit5", "dopri5", "dopri8", "kvaerno5"])
    sim.add_argument("--rtol", type=relative_tolerance, default=1e-13,
                     help="relative tolerance, in [1e-15, 1) (default 1e-13)")
    sim.add_argument("--atol", type=non_negative_float, default=1e-13,
                     help="absolute tolerance, >= 0 (default 1e-13)")
    sim.add_argument("--fps", type=positive_float, default=100.0, help="saved samples per second [1/s] (default 100)")
    sim.add_argument("--max-steps", type=_int_at_least(1), default=1_000_000,
                     help="most solver steps before the run is a failure (default 1000000)")
    sim.add_argument("--n", type=_int_at_least(1, 1000), default=None,
                     help="number of links of planar-chain (default 7)")
    sim.add_argument("--pid", action="store_true",
                     help="double pendulum: Watanabe and Duarte's PID holding the elbow at pi/3")

    ma = sub.add_parser("moment-arms", parents=[jitted],
                        help="moment arms R = -dL/dq of an OpenSim model over one coordinate")
    ma.add_argument("model", help="path to an OpenSim .osim file")
    ma.add_argument("--coordinate", required=True, help="coordinate to sweep (OpenSim name)")
    ma.add_argument("--out", default="results", help="output folder (default ./results)")
    ma.add_argument("--n", type=_int_at_least(2, 100_000), default=181, help="number of sweep points (default 181)")
    ma.add_argument("--frozen-path", action="store_true",
                    help="report OpenSim's computeMomentArm (the path frozen at each state, as OpenSim's "
                         "MuscleAnalysis reports) instead of R = -dL/dq")
    from ._moment_arms import add_function_paths_argument, add_wrap_geometry_argument

    add_wrap_geometry_argument(ma)
    add_function_paths_argument(ma)

    from ._inverse_dynamics import add_parser as add_inverse_dynamics

    add_inverse_dynamics(sub, [jitted], non_negative_float)
    from ._static_optimization import add_parser as add_static_optimization

    add_static_optimization(sub, [jitted], non_negative_float)

    from ._fit_paths import add_parser as add_fit_paths

    add_fit_paths(sub, [jitted], positive_float, _int_at_least)

    from ._shoulder_study import add_parser as add_shoulder_study

    add_shoulder_study(sub, [jitted], positive_float, relative_tolerance)

    info = sub.add_parser("info", parents=[common],
                          help="what a model holds: coordinates, bodies, muscles, wrap objects, what was skipped")
    info.add_argument("model", help=f"path to an OpenSim .osim file, or a built-in model ({', '.join(BUILT_IN_MODELS)})")
    info.add_argument("--n", type=_int_at_least(1, 1000), default=None,
                      help="number of links of planar-chain (default 7)")
    return parser


def _one_line(err: BaseException) -> str:
    """The first paragraph of an error's message, on one line."""
    text = str(err).strip() or type(err).__name__
    return " ".join(text.split("\n\n", 1)[0].split())


def _show_warning(message, category, filename, lineno, file=None, line=None):
    from tqdm import tqdm

    # tqdm.write clears a progress bar on stderr first, so the warning gets a line of its own.
    tqdm.write(f"jaxmb: warning: {_one_line(message)}", file=sys.stderr)


def _dispatch(args) -> int:
    if args.command == "info":
        from ._info import info

        return info(args)
    from ._cache import use_compile_cache
    from ._xla_flags import fusion_emitters_off

    # XLA's CPU fusion emitters off (where jaxlib has the flag and the user set no XLA_FLAGS):
    # the muscle-path programs compile faster and in less than half the memory. Read when
    # the first computation starts the backend, which importing jaxmb does not.
    fusion_emitters_off()
    # x64 at the entry point, never on import (jaxmb leaves the dtype to its user).
    import jax

    jax.config.update("jax_enable_x64", True)
    args.compile_cache = use_compile_cache(args.compile_cache)
    if args.command == "simulate":
        from ._simulate import simulate

        return simulate(args)
    if args.command == "inverse-dynamics":
        from ._inverse_dynamics import inverse_dynamics

        return inverse_dynamics(args)
    if args.command == "static-optimization":
        from ._static_optimization import static_optimization

        return static_optimization(args)
    if args.command == "fit-paths":
        from ._fit_paths import fit_paths

        return fit_paths(args)
    if args.command == "shoulder-study":
        from ._shoulder_study import shoulder_study

        return shoulder_study(args)
    from ._moment_arms import moment_arms

    return moment_arms(args)


def main(argv: list[str] | None = None) -> int:
    """Run ``jaxmb ARGS`` and return its exit status (0 success, 1 error, 2 usage error).

    Errors print one line, ``jaxmb: error: <message>``, on stderr; with ``--debug``
    they raise with their traceback.
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    debug = "--debug" in argv
    try:
        try:
            args = build_parser().parse_args(argv)
        except SystemExit as exit_:  # --help, --version
            return exit_.code if isinstance(exit_.code, int) else 0
        with warnings.catch_warnings():
            if not debug:
                warnings.showwarning = _show_warning
            return _dispatch(args)
    except KeyboardInterrupt:
        if debug:
            raise
        print("jaxmb: interrupted", file=sys.stderr)
        return 130
    except (CommandError, ValueError, OSError, RuntimeError) as err:
        # ValueError covers jaxmb.ModelError, LoopClosureError and the library's argument
        # checks; RuntimeError covers SimulationError and JAX's run-time checks; OSError a
        # file that cannot be read or written.
        if debug:
            raise
        print(f"jaxmb: error: {_one_line(err)}", file=sys.stderr)
        return getattr(err, "exit_status", 1)
    except Exception as err:
        if debug:
            raise
        print(f"jaxmb: error: internal error ({type(err).__name__}: {_one_line(err)}); "
              "rerun with --debug for the traceback and report it", file=sys.stderr)
        return 1
