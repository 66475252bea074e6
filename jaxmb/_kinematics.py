"""Kinematics in the generalized coordinates ``q`` (seed 001, section 3-2).

Joint variables ``f(q)`` and their derivatives, body poses ``0_i A4(q)``, and the
position, velocity and acceleration of points on bodies. Velocities and
accelerations are exact directional derivatives (``jax.jvp``) of the poses, so
they equal the seed's ``D_i^T (r ⊗ q')`` (Eq. 44) and
``D'_i^T (r ⊗ q'^[2]) + D_i^T (r ⊗ q'')`` (Eq. 57); :mod:`jaxmb.seed` builds
``D_i`` and ``D'_i`` themselves and the tests compare the two.
"""

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ._typing import RealLike

from ._model import Model
from ._spatial import vee


def joint_values(model: Model, q: Float[Array, " nq"]) -> Float[Array, " nj"]:
    """Joint variables ``f_i(q)`` in the order of ``model.joint_names`` (rad or m)."""
    q = jnp.asarray(q)
    return jnp.stack([j.function(q) for j in model.joints]).astype(q.dtype)


def joint_gradients(model: Model, q: Float[Array, " nq"]) -> Float[Array, "nj nq"]:
    """``∇f_i(q)`` stacked as rows, shape (n_joints, nq)."""
    q = jnp.asarray(q)
    return jnp.stack([j.function.gradient(q) for j in model.joints])


def joint_hessians(model: Model, q: Float[Array, " nq"]) -> Float[Array, "nj nq nq"]:
    """``H_i(q) = ∂²f_i/∂q²``, shape (n_joints, nq, nq)."""
    q = jnp.asarray(q)
    return jnp.stack([j.function.hessian(q) for j in model.joints])


def joint_rates(model: Model, q, qd, qdd=None):
    """``(f, f', f'')`` along the motion: ``f' = J q'`` and ``f'' = J q'' + q'ᵀ H q'``.

    Computed as nested forward-mode derivatives (no Hessian is formed); with
    ``qdd=None`` the returned ``f''`` is the velocity-product part ``q'ᵀ H q'`` alone.
    """
    fun = lambda x: joint_values(model, x)  # noqa: E731
    inner = lambda x: jax.jvp(fun, (x,), (qd,))  # noqa: E731
    (f, fd), (_, fdd) = jax.jvp(inner, (q,), (qd,))
    if qdd is not None:
        fdd = fdd + jax.jvp(fun, (q,), (qdd,))[1]
    return f, fd, fdd


def joint_transforms(model: Model, f: Float[Array, " nj"]) -> Float[Array, "nj 4 4"]:
    """Local transforms ``pr(i)_i A4(f_i)`` of every joint (Eq. 38)."""
    return jnp.stack([j.transform(f[i]) for i, j in enumerate(model.joints)])


def _poses_from_local(model: Model, local: Array) -> Array:
    poses = [None] * model.n_bodies
    for i in model.order:
        p = model.parents[i]
        poses[i] = local[i] if p < 0 else poses[p] @ local[i]
    return jnp.stack(poses)


def body_transforms(model: Model, q: Float[Array, " nq"]) -> Float[Array, "nb 4 4"]:
    """Ground-from-body transforms ``0_i A4(q)`` (Eq. 40), order of ``model.body_names``."""
    return _poses_from_local(model, joint_transforms(model, joint_values(model, q)))


def _body(model: Model, body) -> int:
    return model.body_index(body) if isinstance(body, str) else int(body)


def point_position(model: Model, q, body, point: RealLike = (0.0, 0.0, 0.0)) -> Float[Array, "3"]:
    """Ground position of `point` (body frame, m) on `body` (name or index), Eq. 41."""
    t = body_transforms(model, q)[_body(model, body)]
    return t[:3, :3] @ jnp.asarray(point, dtype=t.dtype) + t[:3, 3]


def point_velocity(model: Model, q, qd, body, point: RealLike = (0.0, 0.0, 0.0)) -> Float[Array, "3"]:
    """Ground velocity of a body point (Eq. 44), m/s."""
    return jax.jvp(lambda x: point_position(model, x, body, point), (q,), (qd,))[1]


def point_acceleration(model: Model, q, qd, qdd, body, point: RealLike = (0.0, 0.0, 0.0)) -> Float[Array, "3"]:
    """Ground acceleration of a body point (Eq. 57), m/s²."""
    pos = lambda x: point_position(model, x, body, point)  # noqa: E731
    vel = lambda x: jax.jvp(pos, (x,), (qd,))[1]  # noqa: E731
    return jax.jvp(vel, (q,), (qd,))[1] + jax.jvp(pos, (q,), (qdd,))[1]


def point_jacobian(model: Model, q, body, point: RealLike = (0.0, 0.0, 0.0)) -> Float[Array, "3 nq"]:
    """``∂r_p/∂q`` of a body point, (3, nq)."""
    return jax.jacfwd(lambda x: point_position(model, x, body, point))(q)


def body_angular_velocities(model: Model, q, qd) -> Float[Array, "nb 3"]:
    """Angular velocity of every body in ground axes, ``ω̃ = Ṙ Rᵀ`` (rad/s)."""
    poses, dposes = jax.jvp(lambda x: body_transforms(model, x), (q,), (qd,))
    return jax.vmap(lambda t, dt: vee(dt[:3, :3] @ t[:3, :3].T))(poses, dposes)


def angular_jacobians(model: Model, q) -> Float[Array, "nb 3 nq"]:
    """``∂ω_i/∂q'`` for every body (ground axes), shape (n_bodies, 3, nq)."""
    return jax.jacfwd(lambda v: body_angular_velocities(model, q, v))(jnp.zeros_like(q))
