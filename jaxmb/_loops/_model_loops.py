"""The loops of a model, for the routes that need every dependent variable as a joint."""

from .._kinematics import _closure_joints
from .._loop_closure import LoopClosure, LoopClosureError
from .._model import Model


def _closures(model: Model) -> list[tuple[LoopClosure, tuple[int, ...]]]:
    """The loops of `model` (``model.loops``) with, for each, the joint indices of its
    dependent variables in the closure's order; all must be joints of the model."""
    out = []
    for c, idx in _closure_joints(model):
        if sorted(idx) != list(range(c.m)):
            raise LoopClosureError(f"Loop {c.name!r}: not all of its {c.m} dependent variables are joints "
                                   "of the model; this route needs them all.")
        out.append((c, tuple(idx[k] for k in range(c.m))))
    return out
