"""Motion of points fixed on bodies and of the bodies' frames (Ehsani 2016, Eq. 41, 44
and 57): positions, velocities, accelerations and Jacobians of body points, and the
bodies' angular velocities. Each is an exact derivative (``jax.jvp``, ``jax.jacfwd``)
of the poses of `jaxmb._kinematics`, so it equals Ehsani's ``D_iᵀ (r ⊗ q')`` and
``D'_iᵀ (r ⊗ q'^[2]) + D_iᵀ (r ⊗ q'')``; :mod:`jaxmb.matrix_calculus` builds ``D_i``
and ``D'_i`` themselves and the tests compare the two.

The public calls check their arguments, then run a body compiled once per model
structure and argument shapes when called eagerly, as `jaxmb._kinematics`' do.
"""

import operator

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ._checks import eager_finite_vector, finite, float_array
from ._errors import ModelError
from ._kinematics import body_transforms, compiled_on_model
from ._model import Model
from ._spatial import vee
from ._typing import RealLike


def _body(model: Model, body, caller: str) -> int | None:
    """The index of `body` (a name or an index) into `model.body_names`; None for
    ``"ground"``, as path points name it."""
    if isinstance(body, str):
        return None if body == "ground" else model.body_index(body)
    n = len(model.body_names)
    try:
        index = None if isinstance(body, bool) else operator.index(body)
    except TypeError:
        index = None
    if index is None or not 0 <= index < n:
        # An index past the end (or negative) would be clamped by JAX's indexing: another body's point.
        raise ModelError(f"{caller}: body must be a body's name or an index in 0..{n - 1} into model.body_names "
                         f"of {model.name!r} ({', '.join(model.body_names)}), got {body!r}.")
    return index


def _body_point(point, dtype, caller: str):
    point = float_array(point, dtype)  # a constant, also inside a trace: the default (0, 0, 0) is no argument
    if point.shape != (3,):  # a (1,) point would broadcast, a (2,) one fail in a matrix product
        raise ModelError(f"{caller}: point must have shape (3,), the point in the body's frame (m), "
                         f"got {point.shape}.")
    return finite(point, f"{caller}: point")


def _position(model: Model, q, body: int | None, point):
    if body is None:  # the ground: the point is fixed, at its own coordinates
        return point
    t = body_transforms(model, q)[body]
    return t[:3, :3] @ point + t[:3, 3]


def point_position(model: Model, q, body, point: RealLike = (0.0, 0.0, 0.0)) -> Float[Array, "3"]:
    """Ground position of a point fixed on a body (Ehsani 2016, Eq. 41).

    ``{0_r_p; 1} = 0_i A4 {i_r_p; 1}``.

    **Arguments:**

    - `model`: the model.
    - `q`: `(nq,)` generalized coordinates (rad or m).
    - `body`: the body, by name or index into `model.body_names`, or ``"ground"``.
    - `point`: `(3,)` position of the point in the body frame (m); default its origin.

    **Returns:**

    `(3,)` position in ground (m).
    """
    q = eager_finite_vector(model, q, "point_position", "q")
    return _point_position(model, q, _body(model, body, "point_position"),
                           _body_point(point, q.dtype, "point_position"))


_point_position = compiled_on_model(_position)


def point_velocity(model: Model, q, qd, body, point: RealLike = (0.0, 0.0, 0.0)) -> Float[Array, "3"]:
    """Ground velocity of a point fixed on a body (Ehsani 2016, Eq. 44).

    ``{0_v_p; 0} = D_iᵀ ({i_r_p; 1} ⊗ q')``, evaluated as the directional derivative
    (``jax.jvp``) of [`jaxmb.point_position`][jaxmb.point_position] along ``q'``, which is the same
    quantity; [`jaxmb.matrix_calculus.D_closed_form`][jaxmb.matrix_calculus.D_closed_form]
    builds ``D_i`` itself.

    **Arguments:**

    - `model`: the model.
    - `q`: `(nq,)` generalized coordinates (rad or m).
    - `qd`: `(nq,)` generalized velocities (rad/s or m/s).
    - `body`: the body, by name or index into `model.body_names`, or ``"ground"``.
    - `point`: `(3,)` position of the point in the body frame (m); default its origin.

    **Returns:**

    `(3,)` velocity in ground axes (m/s).
    """
    q = eager_finite_vector(model, q, "point_velocity", "q")
    qd = eager_finite_vector(model, qd, "point_velocity", "qd", dtype=q.dtype)
    return _point_velocity(model, q, qd, _body(model, body, "point_velocity"),
                           _body_point(point, q.dtype, "point_velocity"))


@compiled_on_model
def _point_velocity(model: Model, q, qd, body, point):
    return jax.jvp(lambda x: _position(model, x, body, point), (q,), (qd,))[1]


def point_acceleration(model: Model, q, qd, qdd, body, point: RealLike = (0.0, 0.0, 0.0)) -> Float[Array, "3"]:
    """Ground acceleration of a point fixed on a body (Ehsani 2016, Eq. 57).

    ``{0_a_p; 0} = D'_iᵀ ({i_r_p; 1} ⊗ q'^[2]) + D_iᵀ ({i_r_p; 1} ⊗ q'')``, evaluated
    as nested directional derivatives (``jax.jvp``) of [`jaxmb.point_position`][jaxmb.point_position].

    **Arguments:**

    - `model`: the model.
    - `q`: `(nq,)` generalized coordinates (rad or m).
    - `qd`: `(nq,)` generalized velocities (rad/s or m/s).
    - `qdd`: `(nq,)` generalized accelerations (rad/s² or m/s²).
    - `body`: the body, by name or index into `model.body_names`, or ``"ground"``.
    - `point`: `(3,)` position of the point in the body frame (m); default its origin.

    **Returns:**

    `(3,)` acceleration in ground axes (m/s²).
    """
    q = eager_finite_vector(model, q, "point_acceleration", "q")
    qd = eager_finite_vector(model, qd, "point_acceleration", "qd", dtype=q.dtype)
    qdd = eager_finite_vector(model, qdd, "point_acceleration", "qdd", dtype=q.dtype)
    return _point_acceleration(model, q, qd, qdd, _body(model, body, "point_acceleration"),
                               _body_point(point, q.dtype, "point_acceleration"))


@compiled_on_model
def _point_acceleration(model: Model, q, qd, qdd, body, point):
    pos = lambda x: _position(model, x, body, point)  # noqa: E731
    vel = lambda x: jax.jvp(pos, (x,), (qd,))[1]  # noqa: E731
    return jax.jvp(vel, (q,), (qd,))[1] + jax.jvp(pos, (q,), (qdd,))[1]


def point_jacobian(model: Model, q, body, point: RealLike = (0.0, 0.0, 0.0)) -> Float[Array, "3 nq"]:
    """Jacobian ``∂r_p/∂q`` of the ground position of a body point.

    Its product with ``q'`` is the velocity of Ehsani (2016), Eq. 44:
    ``∂r_p/∂q = D_iᵀ ({i_r_p; 1} ⊗ 1_nq)`` row by row; computed by forward-mode
    differentiation of [`jaxmb.point_position`][jaxmb.point_position].

    **Arguments:**

    - `model`: the model.
    - `q`: `(nq,)` generalized coordinates (rad or m).
    - `body`: the body, by name or index into `model.body_names`, or ``"ground"``.
    - `point`: `(3,)` position of the point in the body frame (m); default its origin.

    **Returns:**

    `(3, nq)` Jacobian (m/rad for a rotational coordinate, dimensionless for a
    translational one).
    """
    q = eager_finite_vector(model, q, "point_jacobian", "q")
    return _point_jacobian(model, q, _body(model, body, "point_jacobian"),
                           _body_point(point, q.dtype, "point_jacobian"))


@compiled_on_model
def _point_jacobian(model: Model, q, body, point):
    return jax.jacfwd(lambda x: _position(model, x, body, point))(q)


def body_angular_velocities(model: Model, q, qd) -> Float[Array, "nb 3"]:
    """Angular velocity of every body in ground axes, from ``ω̃ = Ṙ Rᵀ``.

    ``R`` is the body's rotation to ground (the upper-left block of ``0_i A4``,
    Ehsani 2016, Eq. 40) and ``Ṙ`` its time derivative along ``q'``; ``ω`` is read off
    the skew-symmetric matrix ``ω̃`` (Featherstone 2008, chapter 2).

    **Arguments:**

    - `model`: the model.
    - `q`: `(nq,)` generalized coordinates (rad or m).
    - `qd`: `(nq,)` generalized velocities (rad/s or m/s).

    **Returns:**

    `(n_bodies, 3)` angular velocities in ground axes (rad/s), in the order of
    `model.body_names`.
    """
    q = eager_finite_vector(model, q, "body_angular_velocities", "q")
    qd = eager_finite_vector(model, qd, "body_angular_velocities", "qd", dtype=q.dtype)
    return _body_angular_velocities(model, q, qd)


@compiled_on_model
def _body_angular_velocities(model: Model, q, qd):
    poses, dposes = jax.jvp(lambda x: body_transforms(model, x), (q,), (qd,))
    return jax.vmap(lambda t, dt: vee(dt[:3, :3] @ t[:3, :3].T))(poses, dposes)


def angular_jacobians(model: Model, q) -> Float[Array, "nb 3 nq"]:
    """Angular-velocity Jacobians ``∂ω_i/∂q'`` of every body, in ground axes.

    The angular velocity is linear in ``q'`` (``ω_i = (∂ω_i/∂q') q'``), so this is the
    matrix of [`jaxmb.body_angular_velocities`][jaxmb.body_angular_velocities] at ``q``, obtained by forward-mode
    differentiation with respect to ``q'``.

    **Arguments:**

    - `model`: the model.
    - `q`: `(nq,)` generalized coordinates (rad or m).

    **Returns:**

    `(n_bodies, 3, nq)` Jacobians (dimensionless for a rotational coordinate, rad/m for
    a translational one), in the order of `model.body_names`.
    """
    q = eager_finite_vector(model, q, "angular_jacobians", "q")
    return _angular_jacobians(model, q)


@compiled_on_model
def _angular_jacobians(model: Model, q):
    return jax.jacfwd(lambda v: _body_angular_velocities(model, q, v))(jnp.zeros_like(q))
