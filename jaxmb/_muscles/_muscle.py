"""A musculotendon unit: its path (points and wrap objects) and Hill-type parameters."""

from collections.abc import Sequence

import equinox as eqx
import jax
import numpy as np
from jaxtyping import Array, Float

from .._errors import ModelError
from .._functions import AbstractJointFunction
from .._model import GROUND
from ._activation import AbstractActivationDynamics
from ._function_path import FunctionBasedPath
from .._checks import float_array, violated
from ._musculotendon import AbstractMusculotendonModel, positive_parameters
from ._path_points import AbstractPathPoint
from ._millard import Millard2012EquilibriumMuscle
from ._thelen import Thelen2003Muscle
from ._wrap_base import AbstractWrapObject

class MuscleParameters(eqx.Module):
    """Hill-type parameters shared by OpenSim's muscle models (SI units, rad).

    **Arguments:**

    - `max_isometric_force`: F_max^M (N).
    - `optimal_fiber_length`: l_opt^M (m).
    - `tendon_slack_length`: l_s^T (m).
    - `pennation_angle_at_optimal`: α_opt (rad).
    - `max_contraction_velocity`: v_max, in optimal fiber lengths per second (1/s).

    Each a scalar; OpenSim's property of the same name (Delp et al. 2007).
    """

    max_isometric_force: Float[Array, ""]
    optimal_fiber_length: Float[Array, ""]
    tendon_slack_length: Float[Array, ""]
    pennation_angle_at_optimal: Float[Array, ""]
    max_contraction_velocity: Float[Array, ""]

    def __init__(self, max_isometric_force=1000.0, optimal_fiber_length=0.1, tendon_slack_length=0.2,
                 pennation_angle_at_optimal=0.0, max_contraction_velocity=10.0):
        self.max_isometric_force = float_array(max_isometric_force)
        self.optimal_fiber_length = float_array(optimal_fiber_length)
        self.tendon_slack_length = float_array(tendon_slack_length)
        self.pennation_angle_at_optimal = float_array(pennation_angle_at_optimal)
        self.max_contraction_velocity = float_array(max_contraction_velocity)


_SHARED = ("max_isometric_force", "optimal_fiber_length", "tendon_slack_length", "pennation_angle_at_optimal",
           "max_contraction_velocity")


def _parameters_of(name, parameters, force_model) -> MuscleParameters:
    """A muscle's `MuscleParameters`: given, else its force model's (else the defaults).
    Given beside a force model, they must be the model's: the forces come from the force
    model, and parameters that differ would be reported (``jaxmb info``) but not used."""
    if parameters is None:
        return MuscleParameters(**({k: getattr(force_model, k) for k in _SHARED} if force_model is not None else {}))
    for k in _SHARED if force_model is not None else ():
        mine, its = getattr(parameters, k), getattr(force_model, k)
        if violated(lambda a, b: np.isclose(a, b, rtol=1e-12, atol=0.0), mine, its):
            raise ModelError(f"Muscle {name!r}: parameters.{k} = {float(mine):g} differs from its "
                             f"{type(force_model).__name__}'s {float(its):g}, which is what its forces use; give "
                             "the same value, or leave parameters out (they are then the force model's).")
    return parameters


class Muscle(eqx.Module):
    """A musculotendon unit: name, path points (origin first), wrap objects, parameters.

    `kind` names the OpenSim class it came from (e.g. ``"Millard2012EquilibriumMuscle"``).

    Its length ``L(q)`` is the path's ([`jaxmb.muscle_lengths`][jaxmb.muscle_lengths]) and its moment arms
    ``R = -dL/dq`` ([`jaxmb.moment_arms`][jaxmb.moment_arms], Ehsani 2016, Eq. 195).

    **Arguments:**

    - `name`: the muscle's name.
    - `points`: at least two path points (`PathPoint`, `ConditionalPathPoint`,
      `MovingPathPoint`), origin first; the first and last may not be conditional. Empty
      for a path given as a function (`path`).
    - `wraps`: the wrap objects the path may slide over (`WrapSphere`, `WrapCylinder`,
      `WrapEllipsoid`, `WrapTorus`), in OpenSim's PathWrap order.
    - `parameters`: the `MuscleParameters` (default: the force model's values, else the
      defaults); beside a `force_model` they must equal its values.
    - `kind`: the OpenSim class name (documentation).
    - `force_model`: its musculotendon force model (a final class of
      [`jaxmb.AbstractMusculotendonModel`][jaxmb.AbstractMusculotendonModel], e.g.
      [`jaxmb.Thelen2003Muscle`][jaxmb.Thelen2003Muscle]), or None for a path without force
      ([`jaxmb.muscle_forces`][jaxmb.muscle_forces] refuses it). The OpenSim importer builds it
      from the muscle's class and properties.
    - `activation_dynamics`: its activation dynamics (e.g.
      [`jaxmb.FirstOrderActivation`][jaxmb.FirstOrderActivation]), or None.
    - `min_control`, `max_control`: the bounds of its excitation (OpenSim's properties of
      the same name), which static optimization takes as the activation's bounds
      ([`jaxmb.static_optimization`][jaxmb.static_optimization]). Default: the force model's
      `minimum_activation` where it has one, else 0; and 1. The OpenSim importer gives
      OpenSim 4.6's defaults where the file omits them: 0.01 for Thelen2003Muscle and
      Millard2012EquilibriumMuscle (their constructors' value, whatever the file's
      minimum activation), else 0; and 1.
    - `path`: a [`jaxmb.FunctionBasedPath`][jaxmb.FunctionBasedPath], the length as a
      function of the coordinates in place of points and wraps (OpenSim's
      ``FunctionBasedPath``); None (default) for a path of points.

    **Raises:**

    [`jaxmb.ModelError`][jaxmb.ModelError] for fewer than two points (without a `path`), points or wraps
    beside a `path`, a conditional end point, an
    object that is not a path point or wrap object, a non-positive max isometric force,
    optimal fiber length or tendon slack length, non-finite control bounds, `min_control`
    above `max_control`, or `min_control` below the minimum activation of a Thelen 2003
    muscle or a compliant, undamped Millard 2012 one (OpenSim 4.6 refuses them too).
    """

    name: str = eqx.field(static=True)
    points: tuple
    wraps: tuple
    parameters: MuscleParameters
    kind: str = eqx.field(static=True)
    force_model: AbstractMusculotendonModel | None
    activation_dynamics: AbstractActivationDynamics | None
    min_control: Float[Array, ""]
    max_control: Float[Array, ""]
    path: FunctionBasedPath | None

    def __init__(self, name: str, points: Sequence[AbstractPathPoint], wraps: Sequence[AbstractWrapObject] = (),
                 parameters: MuscleParameters | None = None, kind: str = "Muscle",
                 force_model: AbstractMusculotendonModel | None = None,
                 activation_dynamics: AbstractActivationDynamics | None = None, min_control=None,
                 max_control=1.0, path: FunctionBasedPath | None = None):
        self.name = str(name)
        self.points = tuple(points)
        self.wraps = tuple(wraps)
        self.parameters = _parameters_of(self.name, parameters, force_model)
        self.kind = str(kind)
        self.force_model = force_model
        self.activation_dynamics = activation_dynamics
        if min_control is None:
            min_control = getattr(force_model, "minimum_activation", 0.0)
        self.min_control = float_array(min_control, what=f"muscle {self.name!r}: min_control")
        self.max_control = float_array(max_control, what=f"muscle {self.name!r}: max_control")
        self.path = path
        _check_controls(self)
        positive_parameters(self.parameters, ("max_isometric_force", "optimal_fiber_length", "tendon_slack_length"),
                            f"Muscle {name!r}")
        if force_model is not None and not isinstance(force_model, AbstractMusculotendonModel):
            raise ModelError(f"Muscle {name!r}: force_model must be a musculotendon model (e.g. "
                             f"jaxmb.Thelen2003Muscle), got {type(force_model).__name__}.")
        if path is not None:
            if not isinstance(path, FunctionBasedPath):
                raise ModelError(f"Muscle {name!r}: path must be a jaxmb.FunctionBasedPath, got {type(path).__name__}.")
            if self.points or self.wraps:
                raise ModelError(f"Muscle {name!r}: a path given as a function has no path points or wrap objects; "
                                 "give points=() and wraps=().")
            return
        if len(self.points) < 2:
            raise ModelError(f"Muscle {name!r} needs at least two path points, got {len(self.points)}.")
        for p in self.points:
            if not isinstance(p, AbstractPathPoint):
                raise ModelError(f"Muscle {name!r}: {type(p).__name__} is not a path point.")
        if self.points[0].conditional or self.points[-1].conditional:
            raise ModelError(f"Muscle {name!r}: the first and last path points may not be conditional.")
        for w in self.wraps:
            if not isinstance(w, AbstractWrapObject):
                raise ModelError(f"Muscle {name!r}: {type(w).__name__} is not a wrap object.")

    def check_model(self, model, owner: str | None = None) -> None:
        """Raise [`jaxmb.ModelError`][jaxmb.ModelError] if a point or wrap object of this
        path is on a body `model` lacks, or a joint function of it (a conditional or moving
        point's, a function-based path's coordinates) reads a coordinate index `model` does
        not have. `jaxmb.Model` calls it for each of its muscles (and a
        [`jaxmb.Ligament`][jaxmb.Ligament] for its path, `owner` naming it in the message)."""
        owner = f"Muscle {self.name!r}" if owner is None else owner
        bodies = (GROUND,) + tuple(model.body_names)
        for part in self.points + self.wraps:
            if part.body not in bodies:
                kind = "wrap object" if isinstance(part, AbstractWrapObject) else "path point"
                label = f" {part.name!r}" if part.name else ""
                raise ModelError(f"{owner}: {kind}{label} is on body {part.body!r}, which model "
                                 f"{model.name!r} does not have; bodies: {bodies}.")
        functions = jax.tree.leaves((self.points, self.path), is_leaf=lambda x: isinstance(x, AbstractJointFunction))
        for f in functions:
            if not isinstance(f, AbstractJointFunction):
                continue
            outside = [k for k in f.coordinate_indices() if not 0 <= k < model.nq]
            if outside:
                raise ModelError(f"{owner}: its path reads coordinate index {outside[0]} "
                                 f"({type(f).__name__}), but model {model.name!r} has {model.nq} coordinates "
                                 f"{model.coordinate_names}; give jaxmb.Coordinate(k) with 0 <= k < {model.nq}.")

    def with_path(self, path: FunctionBasedPath) -> "Muscle":
        """This muscle with its points and wraps replaced by `path` (a
        [`jaxmb.FunctionBasedPath`][jaxmb.FunctionBasedPath]; OpenSim's
        ``ModOpReplacePathsWithFunctionBasedPaths``), its parameters, force model and
        controls kept."""
        return Muscle(self.name, (), (), self.parameters, kind=self.kind, force_model=self.force_model,
                      activation_dynamics=self.activation_dynamics, min_control=self.min_control,
                      max_control=self.max_control, path=path)


def _check_controls(m: Muscle) -> None:
    """Refuse non-finite control bounds, ``min_control > max_control`` and a ``min_control``
    below the minimum activation where OpenSim 4.6 refuses it."""
    lo, hi = m.min_control, m.max_control
    if violated(lambda a, b: np.isfinite(a) & np.isfinite(b), lo, hi):
        raise ModelError(f"Muscle {m.name!r}: min_control and max_control must be finite, got "
                         f"[{float(lo)}, {float(hi)}]; give finite bounds (0 and 1 by default).")
    if violated(np.less_equal, lo, hi):
        raise ModelError(f"Muscle {m.name!r}: min_control {float(lo)} is above max_control {float(hi)}; "
                         "give min_control <= max_control.")
    fm = m.force_model
    # OpenSim 4.6 refuses it for Thelen 2003 and for Millard 2012's classic (compliant, undamped) form.
    floor = isinstance(fm, Thelen2003Muscle) or (
        isinstance(fm, Millard2012EquilibriumMuscle) and fm.compliant_tendon and not fm.damped)
    if floor and violated(np.greater_equal, lo, fm.minimum_activation):
        raise ModelError(f"Muscle {m.name!r}: min_control {float(lo)} is below the {type(fm).__name__} model's "
                         f"minimum_activation {float(fm.minimum_activation)} (OpenSim 4.6 refuses it too); raise "
                         "min_control or lower minimum_activation.")
