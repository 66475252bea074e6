"""Actuators of OpenSim's ForceSet: CoordinateActuator, PointActuator, TorqueActuator
(OpenSim 4.6's ``OpenSim/Actuators``; reserves and residuals are CoordinateActuators)."""

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._checks import flag, violated
from .._errors import ModelError
from .._functions import AbstractJointFunction
from .._kinematics import body_transforms
from .._model import GROUND, _f
from .._safe import unit
from .._typing import RealLike
from ._base import (AbstractActuator, _actuator_params, check_body, check_coordinate_force,
                    coordinate_terms, translation, wrench_generalized_force)


class CoordinateActuator(AbstractActuator):
    """A generalized force ``Q_c = optimal_force · u`` on one coordinate (OpenSim's
    CoordinateActuator: a reserve or residual actuator).

    **Arguments:**

    - `name`: the actuator's name.
    - `coordinate`: the coordinate it drives (an independent coordinate of the model).
    - `optimal_force`: N m per unit control (rotational) or N (translational).
    - `min_control`, `max_control`: the control's bounds (see [`jaxmb.AbstractActuator`][jaxmb.AbstractActuator]).
    - `function`: the coordinate as a joint function of ``q`` where it is not an
      independent coordinate (coupled or locked); ``Q = ∇x(q) · optimal_force · u``.
    """

    name: str = eqx.field(static=True)
    coordinate: str = eqx.field(static=True)
    function: AbstractJointFunction | None
    optimal_force: Float[Array, ""]
    min_control: Float[Array, ""]
    max_control: Float[Array, ""]

    def __init__(self, name: str, coordinate: str, optimal_force: RealLike = 1.0,
                 min_control: RealLike = -jnp.inf, max_control: RealLike = jnp.inf,
                 function: AbstractJointFunction | None = None):
        self.name, self.coordinate, self.function = str(name), str(coordinate), function
        self.optimal_force, self.min_control, self.max_control = _actuator_params(
            name, optimal_force, min_control, max_control)

    def check_model(self, model):
        check_coordinate_force(self, model)

    def generalized_force(self, model, q, qd, control=None):
        return coordinate_terms(self, model, q, qd)[2] * self.actuation(control).astype(q.dtype)


class PointActuator(AbstractActuator):
    """A force ``F = optimal_force · u · d̂`` at a point of a body (OpenSim's PointActuator):
    ``Q = J_pᵀ F`` with ``J_p = ∂p/∂q`` the point's Jacobian.

    **Arguments:**

    - `name`: the actuator's name.
    - `body`: the body the force acts on.
    - `point`: `(3,)` the point (m): in the body's frame, or in ground if `point_is_global`
      (then the body's point that is there at the current state).
    - `direction`: `(3,)` the force's direction (normalised here): in the body's axes, or
      ground axes if `force_is_global`.
    - `optimal_force`: N per unit control; `min_control`, `max_control`: the control's bounds.
    """

    name: str = eqx.field(static=True)
    body: str = eqx.field(static=True)
    point: Float[Array, "3"]
    direction: Float[Array, "3"]
    point_is_global: bool = eqx.field(static=True)
    force_is_global: bool = eqx.field(static=True)
    optimal_force: Float[Array, ""]
    min_control: Float[Array, ""]
    max_control: Float[Array, ""]

    def __init__(self, name: str, body: str, point: RealLike = (0.0, 0.0, 0.0),
                 direction: RealLike = (1.0, 0.0, 0.0), *, point_is_global: bool = False,
                 force_is_global: bool = False, optimal_force: RealLike = 1.0,
                 min_control: RealLike = -jnp.inf, max_control: RealLike = jnp.inf):
        self.name, self.body = str(name), str(body)
        self.point, self.direction = _f(point, (3,)), _f(direction, (3,))
        self.point_is_global = flag(point_is_global, f"PointActuator {name!r}: point_is_global")
        self.force_is_global = flag(force_is_global, f"PointActuator {name!r}: force_is_global")
        self.optimal_force, self.min_control, self.max_control = _actuator_params(
            name, optimal_force, min_control, max_control)
        if violated(lambda d: np.linalg.norm(d) > 0, self.direction):
            raise ModelError(f"PointActuator {name!r}: direction {self.direction.tolist()} is zero; "
                             "give the force's direction.")

    def check_model(self, model):
        check_body(self, model, self.body)

    def generalized_force(self, model, q, qd, control=None):
        dt = q.dtype
        pose = jnp.eye(4, dtype=dt) if self.body == GROUND else body_transforms(model, q)[model.body_index(self.body)]
        rot, org = pose[:3, :3], pose[:3, 3]
        force = self.actuation(control).astype(dt) * unit(self.direction.astype(dt))
        if not self.force_is_global:
            force = rot @ force
        point = self.point.astype(dt)
        if self.point_is_global:
            point = rot.T @ (point - org)
        frames = ((self.body, translation(point)),)
        return wrench_generalized_force(model, q, frames, ((jnp.zeros(3, dt), force),))


class TorqueActuator(AbstractActuator):
    """A torque ``τ = optimal_force · u · â`` on `body_a` and ``-τ`` on `body_b` (OpenSim's
    TorqueActuator): ``Q = (J_ω,a - J_ω,b)ᵀ τ``.

    **Arguments:**

    - `name`: the actuator's name.
    - `body_a`, `body_b`: the bodies (``"ground"`` allowed for either).
    - `axis`: `(3,)` the torque's axis (normalised here): ground axes if `torque_is_global`
      (OpenSim's default), else `body_a`'s axes.
    - `optimal_force`: N m per unit control; `min_control`, `max_control`: the control's bounds.
    """

    name: str = eqx.field(static=True)
    body_a: str = eqx.field(static=True)
    body_b: str = eqx.field(static=True)
    axis: Float[Array, "3"]
    torque_is_global: bool = eqx.field(static=True)
    optimal_force: Float[Array, ""]
    min_control: Float[Array, ""]
    max_control: Float[Array, ""]

    def __init__(self, name: str, body_a: str, body_b: str = GROUND, axis: RealLike = (0.0, 0.0, 1.0), *,
                 torque_is_global: bool = True, optimal_force: RealLike = 1.0,
                 min_control: RealLike = -jnp.inf, max_control: RealLike = jnp.inf):
        self.name, self.body_a, self.body_b = str(name), str(body_a), str(body_b)
        self.axis = _f(axis, (3,))
        self.torque_is_global = flag(torque_is_global, f"TorqueActuator {name!r}: torque_is_global")
        self.optimal_force, self.min_control, self.max_control = _actuator_params(
            name, optimal_force, min_control, max_control)
        if violated(lambda a: np.linalg.norm(a) > 0, self.axis):
            raise ModelError(f"TorqueActuator {name!r}: axis {self.axis.tolist()} is zero; give the torque's axis.")

    def check_model(self, model):
        check_body(self, model, self.body_a)
        check_body(self, model, self.body_b)

    def generalized_force(self, model, q, qd, control=None):
        dt = q.dtype
        torque = self.actuation(control).astype(dt) * unit(self.axis.astype(dt))
        if not self.torque_is_global and self.body_a != GROUND:
            torque = body_transforms(model, q)[model.body_index(self.body_a)][:3, :3] @ torque
        eye, zero = jnp.eye(4, dtype=dt), jnp.zeros(3, dt)
        frames = ((self.body_a, eye), (self.body_b, eye))
        return wrench_generalized_force(model, q, frames, ((torque, zero), (-torque, zero)))
