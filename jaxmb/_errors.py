"""jaxmb's exceptions (each subclasses ``ValueError`` so callers may catch either), and its
warnings' attribution to the user's line."""

import os
import sys
import warnings


class ModelError(ValueError):
    """A model is malformed: the message names the offending object and the fix."""


class SimulationError(RuntimeError):
    """An integration failed (step-size collapse, too many steps, non-finite state)."""


_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep
# What stands between a user's call and jaxmb's code (run-time type checks, equinox's
# module machinery, JAX's tracing under jit): a warning skips it as it skips jaxmb's frames.
_WRAPPERS = tuple(os.sep + name + os.sep for name in ("jaxtyping", "beartype", "equinox", "jax")) + ("<@beartype",)


def _inside(filename: str) -> bool:
    return filename.startswith(_PACKAGE) or any(w in filename for w in _WRAPPERS)


def warn(message: str, category: type[Warning] = UserWarning) -> None:
    """``warnings.warn`` attributed to the first caller outside jaxmb (and the wrappers
    around it), so that the warning names the user's line, whatever the depth of the
    library call that found the problem."""
    frame, level = sys._getframe(1), 2
    while frame is not None and _inside(frame.f_code.co_filename):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)
