"""The traditional (constraint-Jacobian) route for a closed model, for comparison.

All joint variables ``z`` as unknowns with the constraints ``Φ(z, q) = 0`` (Shabana):
the model's open tree (`open_tree`), its constraint function
(`constraint_function`), the rates of ``z`` from the constraint Jacobian
(`constraint_kinematics`) and the kinematics of a body point through them
(`traditional_point_kinematics`). Used by the DAE baseline and the tests.
"""

from collections.abc import Callable

import jax
import jax.numpy as jnp

from .._checks import float_array
from .._functions import Coordinate
from .._kinematics import joint_values
from .._point_kinematics import point_acceleration, point_position, point_velocity
from .._loop_closure import ImplicitJointFunction
from .._model import Joint, Model
from ._model_loops import _closures


def open_tree(model: Model) -> Model:
    """The model's open tree: every joint variable a coordinate of its own.

    **Arguments:**

    - `model`: any `Model` (typically a closed chain).

    **Returns:**

    A `Model` with ``q_open = z`` (n_joints,), coordinate names the joint names, the
    same bodies, joint frames, gravity and loads, and no loop closures.
    """
    joints = tuple(
        Joint(j.name, j.parent, j.child, j.kind, j.axis, Coordinate(i),
              parent_translation=j.parent_translation, parent_rotation=j.parent_rotation,
              child_translation=j.child_translation, child_rotation=j.child_rotation)
        for i, j in enumerate(model.joints))
    return Model(model.bodies, joints, model.joint_names, gravity=model.gravity, loads=model.loads,
                 name=model.name + "_open")


def constraint_function(model: Model) -> Callable:
    """The constraints ``Φ(z, q) = 0`` of the model in all its joint variables (Shabana).

    Each loop closure contributes its m equations ``g(z[dep], q)``; each explicit
    joint j contributes its driving equation ``z_j - f_j(q)``, so ``∂Φ/∂z`` is square.

    **Arguments:**

    - `model`: the `Model`.

    **Returns:**

    The function ``phi(z, q) -> (n_joints,)`` with ``z`` (n_joints,) and ``q`` (nq,)
    in rad or m; residuals in the joints' units.
    """
    loops = _closures(model)
    explicit = [i for i, j in enumerate(model.joints) if not isinstance(j.function, ImplicitJointFunction)]

    def phi(z, q):
        parts = [c.residual(z[jnp.asarray(idx)], q) for c, idx in loops]
        parts += [jnp.reshape(z[i] - model.joints[i].function(q), (1,)) for i in explicit]
        return jnp.concatenate(parts)

    return phi


def constraint_kinematics(model: Model, q, qd, qdd):
    """Joint variables and their rates by the traditional constraint-Jacobian route.

    ``Φ_z ż = -Φ_q q'`` and ``Φ_z z̈ = -Φ_q q'' - (d/dt Φ_z) ż - (d/dt Φ_q) q'``
    (Shabana), with ``Φ`` from `constraint_function`. The joint variables ``z``
    come from the loop solves; no gradient or Hessian of ``f(q)`` is formed.

    **Arguments:**

    - `model`: the `Model`.
    - `q`, `qd`, `qdd`: coordinates (nq,) in rad or m, their rates (rad/s or m/s)
      and accelerations (rad/s² or m/s²).

    **Returns:**

    `(z, zd, zdd)`, each (n_joints,): joint variables, rates and accelerations.
    """
    q, qd, qdd = (jnp.atleast_1d(float_array(x)) for x in (q, qd, qdd))
    phi = constraint_function(model)
    z = jax.lax.stop_gradient(joint_values(model, q))
    pz, pq = jax.jacfwd(phi, argnums=(0, 1))(z, q)
    zd = jnp.linalg.solve(pz, -pq @ qd)
    # d/dt (Φ_z ż + Φ_q q') along (ż, q') with ż, q' held fixed: the velocity-product term.
    rate = lambda zz, qq: jax.jvp(phi, (zz, qq), (zd, qd))[1]  # noqa: E731
    gamma = jax.jvp(rate, (z, q), (zd, qd))[1]
    zdd = jnp.linalg.solve(pz, -pq @ qdd - gamma)
    return z, zd, zdd


def traditional_point_kinematics(model: Model, q, qd, qdd, body, point=(0.0, 0.0, 0.0)):
    """Position, velocity and acceleration of a body point by the traditional route.

    The open tree (`open_tree`) evaluated at ``(z, ż, z̈)`` from
    `constraint_kinematics`: a cross-check of [`jaxmb.point_position`][jaxmb.point_position],
    [`jaxmb.point_velocity`][jaxmb.point_velocity] and [`jaxmb.point_acceleration`][jaxmb.point_acceleration].

    **Arguments:**

    - `model`: the `Model`.
    - `q`, `qd`, `qdd`: coordinates (nq,) in rad or m, rates and accelerations.
    - `body`: the body's name or index.
    - `point`: the point in the body's frame (3,), m.

    **Returns:**

    `(position, velocity, acceleration)`, each (3,) in the ground frame: m, m/s, m/s².
    """
    tree = open_tree(model)
    z, zd, zdd = constraint_kinematics(model, q, qd, qdd)
    return (point_position(tree, z, body, point), point_velocity(tree, z, zd, body, point),
            point_acceleration(tree, z, zd, zdd, body, point))
