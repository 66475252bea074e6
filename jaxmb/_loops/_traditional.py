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

from .._functions import Coordinate, _as_float_array
from .._kinematics import joint_values, point_acceleration, point_position, point_velocity
from .._loop_closure import ImplicitJointFunction
from .._model import Joint, Model
from ._model_loops import _closures


def open_tree(model: Model) -> Model:
    """The model's tree with every joint variable a coordinate: ``q_open = z``
    (n_joints,), coordinate names = joint names. Loads and bodies are kept."""
    joints = tuple(
        Joint(j.name, j.parent, j.child, j.kind, j.axis, Coordinate(i),
              parent_translation=j.parent_translation, parent_rotation=j.parent_rotation,
              child_translation=j.child_translation, child_rotation=j.child_rotation)
        for i, j in enumerate(model.joints))
    return Model(model.bodies, joints, model.joint_names, gravity=model.gravity, loads=model.loads,
                 name=model.name + "_open")


def constraint_function(model: Model) -> Callable:
    """``Φ(z, q)`` (n_joints,): the constraints of the model in all its joint variables z.

    Each loop closure contributes its m equations ``g(z[dep], q)``; each explicit
    joint j contributes its driving equation ``z_j - f_j(q)``. ``∂Φ/∂z`` is square.
    """
    loops = _closures(model)
    explicit = [i for i, j in enumerate(model.joints) if not isinstance(j.function, ImplicitJointFunction)]

    def phi(z, q):
        parts = [c.residual(z[jnp.asarray(idx)], q) for c, idx in loops]
        parts += [jnp.reshape(z[i] - model.joints[i].function(q), (1,)) for i in explicit]
        return jnp.concatenate(parts)

    return phi


def constraint_kinematics(model: Model, q, qd, qdd):
    """Joint variables and their rates by the traditional constraint-Jacobian route
    (Shabana): ``Φ_z ż = -Φ_q q'`` and ``Φ_z z̈ = -Φ_q q'' - (d/dt Φ_z) ż - (d/dt Φ_q) q'``.

    The joint variables z come from the loop solves; no gradient or Hessian of
    ``f(q)`` is formed. Returns ``(z, ż, z̈)``.
    """
    q, qd, qdd = (jnp.atleast_1d(_as_float_array(x)) for x in (q, qd, qdd))
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
    """Position, velocity and acceleration of a body point by the traditional route:
    the open tree in all joint variables z with ``(z, ż, z̈)`` from
    `constraint_kinematics`."""
    tree = open_tree(model)
    z, zd, zdd = constraint_kinematics(model, q, qd, qdd)
    return (point_position(tree, z, body, point), point_velocity(tree, z, zd, body, point),
            point_acceleration(tree, z, zd, zdd, body, point))
