"""The ForceSet's non-muscle elements: generalized forces ``Q(q, q', u)`` (nq,).

An element of OpenSim's ForceSet (Delp et al. (2007); Seth et al. (2018)) that is not a
muscle maps the state ``(q, q')`` and, for an actuator, its control ``u`` to a
generalized force ``Q`` by its virtual power: ``Q_k`` is the element's power for a unit
rate of coordinate k. Elements are final classes of the abstract family
[`jaxmb.AbstractForce`][jaxmb.AbstractForce]; a model holds them in ``model.forces``,
[`jaxmb.force_set_forces`][jaxmb.force_set_forces] sums them and
[`jaxmb.forward_dynamics`][jaxmb.forward_dynamics] adds them to ``tau``.
"""

import abc

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._checks import violated
from .._eager import compiled_per_model
from .._errors import ModelError
from .._dynamics import generalized_forces
from .._kinematics import body_transforms
from .._loads import BodyTorque, PointForce
from .._model import GROUND, Model, _f
from .._typing import RealLike


class AbstractForce(eqx.Module):
    """A force element of a model's ForceSet: ``Q = generalized_force(model, q, q', u)``.

    Subclass it for new elements: implement `generalized_force` and `check_model`
    (which names the bodies and coordinates the element reads, at model build time).
    Actuators subclass [`jaxmb.AbstractActuator`][jaxmb.AbstractActuator].
    """

    name: eqx.AbstractVar[str]

    def __check_init__(self):
        # Every element, present and future: a NaN parameter would pass into the dynamics
        # silently (infinite control bounds are meaningful, so only NaN is refused).
        for path, leaf in jax.tree_util.tree_flatten_with_path(self)[0]:
            if (eqx.is_array(leaf) and jnp.issubdtype(leaf.dtype, jnp.floating)
                    and violated(lambda x: ~np.isnan(x), leaf)):
                raise ModelError(f"{type(self).__name__} {self.name!r}: {jax.tree_util.keystr(path).lstrip('.')} "
                                 "is NaN; give a number.")

    @abc.abstractmethod
    def generalized_force(self, model: Model, q: Float[Array, " nq"], qd: Float[Array, " nq"],
                          control: Float[Array, ""] | None = None) -> Float[Array, " nq"]:
        """``Q`` (nq,) of this element at ``(q, q')``; `control` is an actuator's control
        (ignored by passive elements; ``None`` is zero)."""

    @abc.abstractmethod
    def check_model(self, model: Model) -> None:
        """Raise [`jaxmb.ModelError`][jaxmb.ModelError] if `model` lacks a body or coordinate this element names."""


class AbstractActuator(AbstractForce):
    """An actuator: its force (N) or torque (N m) is ``optimal_force · u`` for the control ``u``.

    `min_control` and `max_control` are the control's bounds (OpenSim's properties of the
    same names): they bound an optimisation's controls (static optimization, reserves
    and residuals); like OpenSim's ``computeActuation``, the force itself does not clip ``u``.
    """

    optimal_force: eqx.AbstractVar[Float[Array, ""]]
    min_control: eqx.AbstractVar[Float[Array, ""]]
    max_control: eqx.AbstractVar[Float[Array, ""]]

    def actuation(self, control) -> Float[Array, ""]:
        """The actuator's force or torque ``optimal_force · u``."""
        u = jnp.zeros((), self.optimal_force.dtype) if control is None else jnp.asarray(control)
        return self.optimal_force * u


def _actuator_params(name, optimal_force, min_control, max_control):
    optimal_force, lo, hi = _f(optimal_force), _f(min_control), _f(max_control)
    # Zero: a column of zeros; negative: the control's sign flips. (NaN is named by the NaN check.)
    if violated(lambda f: ~(f <= 0.0), optimal_force):
        raise ModelError(f"Actuator {name!r}: optimal_force must be positive, got {float(np.min(optimal_force))}.")
    if violated(np.less_equal, lo, hi):
        raise ModelError(f"Actuator {name!r}: min_control {float(lo)} exceeds max_control {float(hi)}.")
    return optimal_force, lo, hi


def check_body(owner: AbstractForce, model: Model, body: str) -> None:
    if body != GROUND and body not in model.body_names:
        raise ModelError(f"{type(owner).__name__} {owner.name!r} names body {body!r}, which model "
                         f"{model.name!r} does not have; bodies: {(GROUND,) + model.body_names}.")


def check_coordinate(owner: AbstractForce, model: Model, coordinate: str) -> None:
    if coordinate not in model.coordinate_names:
        raise ModelError(f"{type(owner).__name__} {owner.name!r} acts on coordinate {coordinate!r}, which is "
                         f"not an independent coordinate of model {model.name!r}: "
                         f"{model.coordinate_names}.")


def coordinate_terms(force, model: Model, q, qd):
    """``(x, x', ∇x)`` of the coordinate a coordinate force acts on: the model's independent
    coordinate named `force.coordinate`, or, where `force.function` is given, that joint
    function of ``q`` (an OpenSim coordinate that is coupled to others or locked)."""
    if force.function is None:
        k = model.coordinate_index(force.coordinate)
        return q[k], qd[k], jnp.zeros(model.nq, q.dtype).at[k].set(1.0)
    x, xd = jax.jvp(force.function, (q,), (qd,))
    return x, xd, jax.grad(force.function)(q)


def check_coordinate_force(force, model: Model) -> None:
    if force.function is None:
        check_coordinate(force, model, force.coordinate)
    elif any(not 0 <= k < model.nq for k in force.function.coordinate_indices()):
        raise ModelError(f"{type(force).__name__} {force.name!r}: the function of its coordinate "
                         f"{force.coordinate!r} reads coordinates {force.function.coordinate_indices()}, but "
                         f"model {model.name!r} has {model.nq}.")


def frame_poses(model: Model, q, frames) -> list:
    """Ground poses (4x4) of `frames`, each ``(body, pose in the body (4, 4))``."""
    poses = body_transforms(model, q)
    out = []
    for body, offset in frames:
        offset = offset.astype(poses.dtype)
        out.append(offset if body == GROUND else poses[model.body_index(body)] @ offset)
    return out


def wrench_generalized_force(model: Model, q, frames, wrenches) -> Float[Array, " nq"]:
    """``Q = Σ_i J_iᵀ w_i`` for wrenches ``w_i = (n_i, f_i)`` (moment N m, force N, both in
    ground axes) applied at the origins of `frames` (``(body, pose in the body (4, 4))``):
    a force at the frame's origin and a torque on its body
    ([`jaxmb.PointForce`][jaxmb.PointForce], [`jaxmb.BodyTorque`][jaxmb.BodyTorque]), whose
    generalized force is their virtual power (`jaxmb.generalized_forces`: each loaded body's
    motion along its own path, once per body). Wrenches on ground do no work."""
    loads = []
    for (body, offset), (n, f) in zip(frames, wrenches):
        if body != GROUND:
            loads += [PointForce(body, offset[:3, 3], f), BodyTorque(body, n)]
    return generalized_forces(model, jnp.asarray(q), loads) if loads else jnp.zeros_like(jnp.asarray(q))


def translation(point) -> Float[Array, "4 4"]:
    """The pose (4x4) of a frame at `point` (3,) with its body's axes."""
    return jnp.eye(4, dtype=point.dtype).at[:3, 3].set(point)


def actuators(model: Model) -> tuple:
    return tuple(f for f in model.forces if isinstance(f, AbstractActuator))


def unit_actuation_matrix(model: Model, elements, q, qd) -> Float[Array, "nq n"]:
    """``Q_act`` (nq, n): the generalized force of each actuator in `elements` per unit control,
    so that their total is ``Q_act u``. An actuator's force is linear in its control, so the
    matrix is the derivative of ``Σ_j Q_j(q, q', u_j)`` over ``u``: one forward pass with a
    tangent per actuator, sharing the joint functions and body motions among them."""
    elements = tuple(elements)
    if not elements:
        return jnp.zeros((q.shape[0], 0), q.dtype)

    def total(u):
        return sum(a.generalized_force(model, q, qd, u[j]) for j, a in enumerate(elements))

    return jax.jacfwd(total)(jnp.zeros(len(elements), q.dtype))


def actuator_names(model: Model) -> tuple[str, ...]:
    """The names of the model's actuators, in the order of the controls vector ``u`` of
    [`jaxmb.force_set_forces`][jaxmb.force_set_forces] and [`jaxmb.actuator_forces`][jaxmb.actuator_forces].

    **Arguments:**

    - `model`: a model (its ``forces``).

    **Returns:**

    A tuple of names (the [`jaxmb.AbstractActuator`][jaxmb.AbstractActuator] elements of ``model.forces``, in order).
    """
    return tuple(a.name for a in actuators(model))


def _controls(model: Model, controls, dtype):
    n = len(actuators(model))
    if controls is None:
        return jnp.zeros(n, dtype)
    controls = jnp.asarray(controls, dtype)
    if controls.shape != (n,):
        raise ValueError(f"controls must have shape ({n},), one per actuator of model {model.name!r} "
                         f"({actuator_names(model)}), got shape {controls.shape}.")
    return controls


def _sum(model: Model, q, qd, controls, elements) -> Float[Array, " nq"]:
    q = jnp.asarray(q)
    qd = jnp.asarray(qd, q.dtype)
    return _summed(model, q, qd, _controls(model, controls, q.dtype), elements)


# Compiled, one program per model structure (equinox caches it on the static parts), so
# that an eager call does not run every element's kinematics operation by operation.
@compiled_per_model
def _summed(model: Model, q, qd, u, elements) -> Float[Array, " nq"]:
    total = jnp.zeros(model.nq, q.dtype)
    k = 0
    for force in elements:
        if isinstance(force, AbstractActuator):
            total = total + force.generalized_force(model, q, qd, u[k])
            k += 1
        else:
            total = total + force.generalized_force(model, q, qd)
    return total


def force_set_forces(model: Model, q: RealLike, qd: RealLike,
                     controls: RealLike | None = None) -> Float[Array, " nq"]:
    """``Q(q, q', u) = Σ_e Q_e``: the generalized force of every element of ``model.forces``
    (by virtual power, ``Q_k`` the elements' power for a unit rate of coordinate k;
    Kane and Levinson (1985), ch. 4).

    **Arguments:**

    - `model`: a model whose ``forces`` hold the ForceSet's elements.
    - `q`, `qd`: `(nq,)` coordinates (rad or m) and their rates (rad/s or m/s).
    - `controls`: `(n_actuators,)` actuator controls in the order of
      [`jaxmb.actuator_names`][jaxmb.actuator_names]; ``None`` is zero (passive elements only).

    **Returns:**

    `(nq,)` generalized forces (N m or N), to add to ``tau`` in ``M q'' + bias = tau + Q``.
    """
    return _sum(model, q, qd, controls, model.forces)


def actuator_forces(model: Model, q: RealLike, qd: RealLike, controls: RealLike) -> Float[Array, " nq"]:
    """``Q_act(q, u) = Σ_a Q_a``: the generalized force of the model's actuators alone (the
    passive elements are in [`jaxmb.forward_dynamics`][jaxmb.forward_dynamics] already): pass it as
    `simulate`'s `tau` to drive the actuators, e.g. ``tau=lambda t, q, qd: actuator_forces(model, q, qd, u(t))``.

    **Arguments:**

    - `model`: a model with actuators in its ``forces``.
    - `q`, `qd`: `(nq,)` coordinates and rates.
    - `controls`: `(n_actuators,)` controls in the order of [`jaxmb.actuator_names`][jaxmb.actuator_names].

    **Returns:**

    `(nq,)` generalized forces (N m or N).
    """
    return _sum(model, q, qd, controls, actuators(model))
