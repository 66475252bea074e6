"""Applied loads and their generalized forces ``Q`` (nq,).

A load maps to the generalized force ``Q`` by its virtual power: ``Q_k`` is the power
of the load for a unit rate of coordinate k. :func:`jaxmb.generalized_forces` sums the
loads of a model; the dynamics add them to the right-hand side,
``M q'' + bias = tau + Q``.
"""

import abc

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ._kinematics import _ground_frame, _local_frames, _path_twist_jacobian, joint_gradients, joint_values
from ._model import Model, _f
from ._spatial import homogeneous, small_matvec
from ._typing import RealLike


class AbstractLoad(eqx.Module):
    """An applied load; :meth:`generalized_force` maps it to ``Q`` (nq,) at ``q``.

    :func:`jaxmb.generalized_forces` sums the loads of a model; subclass this to
    add your own (springs, bushings, ground reactions). A load whose virtual
    power is easier to write in the joint variables ``f`` subclasses
    :class:`AbstractJointSpaceLoad` instead, which the dynamics evaluate without
    re-solving the joint functions.
    """

    body: eqx.AbstractVar[str]

    @abc.abstractmethod
    def generalized_force(self, model: Model, q) -> Float[Array, " nq"]:
        """The generalized force ``Q`` of this load at ``q``."""


class AbstractJointSpaceLoad(AbstractLoad):
    """A load given by its power ``P(f, f')`` in the joint variables (linear in ``f'``).

    With ``J = ∂f/∂q`` the generalized force is ``Q_k = P(f, J e_k)`` (virtual
    power of the load for a unit rate of coordinate k), i.e. ``Q = Jᵀ ∂P/∂f'``:
    the joint functions are evaluated once per state and shared with the mass
    matrix and bias terms.
    """

    @abc.abstractmethod
    def power(self, model: Model, f: Float[Array, " nj"], fd: Float[Array, " nj"]) -> Float[Array, ""]:
        """Power of the load (W) at joint variables `f` moving with rates `fd`."""

    def generalized_force_from_joints(self, model: Model, f, jac) -> Float[Array, " nq"]:
        """``Q`` (nq,) from the joint variables `f` (nj,) and their Jacobian `jac` (nj, nq)."""
        return jax.vmap(lambda col: self.power(model, f, col), in_axes=1)(jac)

    def generalized_force(self, model, q):
        q = jnp.asarray(q)
        return self.generalized_force_from_joints(model, joint_values(model, q), joint_gradients(model, q))


def _body_pose_from_joints(model: Model, f, body: str):
    """Ground-from-body transform (4x4) of `body` alone, along its path."""
    rot, trans = _ground_frame(model, *_local_frames(model, f), model.body_index(body))
    return homogeneous(rot, trans)


class _PoseLoad(AbstractJointSpaceLoad):
    """A load on one body that depends on the body's ground pose only: it is given by
    its wrench on the body, in body coordinates, at the body's pose ``(R, p)``; the
    power is that wrench times the body's twist in body coordinates,
    ``P = n · ω_b + f · v_b`` with ``ω̃_b = Rᵀ Ṙ`` and ``v_b = Rᵀ ṗ``, so that
    ``Q = J_bᵀ (n, f)`` for the body's spatial Jacobian ``J_b`` (body coordinates,
    the one the projected dynamics pass builds anyway)."""

    @abc.abstractmethod
    def body_wrench(self, rotation, translation) -> Float[Array, "6"]:
        """``(n, f)``: moment about the body origin (N m) and force (N), both in body
        axes, at the body's ground rotation `rotation` (3, 3) and origin `translation` (3,)."""

    def path_power(self, motion):
        """The joints on the body's path and the load's power per unit rate of each
        (len(path),), from the body's motion ``(R, o, path, J_w, J_v)``
        (`_kinematics._path_twist_jacobian`): ``J_w n + J_v f``."""
        rot, org, path, spin, velocity = motion
        wrench = self.body_wrench(rot, org)
        return path, spin @ wrench[:3] + velocity @ wrench[3:]

    def _motion(self, model, f):
        return _path_twist_jacobian(model, *_local_frames(model, f), model.body_index(self.body))

    def power(self, model, f, fd):
        path, rows = self.path_power(self._motion(model, f))
        return rows @ fd[path]

    def generalized_force_from_joints(self, model, f, jac):
        path, rows = self.path_power(self._motion(model, f))
        return jac[path].T @ rows


def _point_force_wrench(rotation, point, force):
    """Wrench in body axes of a ground-axes `force` applied at body-frame `point`:
    ``f = Rᵀ F`` and ``n = p × f``."""
    fb = small_matvec(rotation.T, force)
    return jnp.concatenate([jnp.cross(point, fb), fb])


class PointForce(_PoseLoad):
    """A force `force` (N, ground axes) applied at `point` (m, body frame) of `body`:
    ``Q = J_pᵀ F`` (Ehsani 2016, Eq. 46 with virtual work ``F · δr_p``)."""

    body: str = eqx.field(static=True)
    point: Float[Array, "3"]
    force: Float[Array, "3"]

    def __init__(self, body: str, point: RealLike, force: RealLike):
        self.body = str(body)
        self.point = _f(point, (3,), f"PointForce on body {self.body!r}: point")
        self.force = _f(force, (3,), f"PointForce on body {self.body!r}: force")

    def body_wrench(self, rotation, translation):
        return _point_force_wrench(rotation, self.point.astype(rotation.dtype), self.force.astype(rotation.dtype))


class BodyTorque(_PoseLoad):
    """A pure torque `torque` (N m, ground axes) applied to `body`: ``Q = J_ωᵀ τ``."""

    body: str = eqx.field(static=True)
    torque: Float[Array, "3"]

    def __init__(self, body: str, torque: RealLike):
        self.body = str(body)
        self.torque = _f(torque, (3,), f"BodyTorque on body {self.body!r}: torque")

    def body_wrench(self, rotation, translation):
        return jnp.concatenate([small_matvec(rotation.T, self.torque.astype(rotation.dtype)),
                                jnp.zeros(3, rotation.dtype)])


class LinearSpring(_PoseLoad):
    """A linear spring from `point` (m, body frame) of `body` to `anchor` (m, ground):
    potential ``V = ½ k (L - L0)²``, generalized force ``Q = -∂V/∂q``.
    (Andrews' squeezer's spring; Ehsani 2016, Eq. 199.)"""

    body: str = eqx.field(static=True)
    point: Float[Array, "3"]
    anchor: Float[Array, "3"]
    stiffness: Float[Array, ""]
    rest_length: Float[Array, ""]

    def __init__(self, body: str, point: RealLike, anchor: RealLike, stiffness: RealLike, rest_length: RealLike):
        self.body = str(body)
        what = f"LinearSpring on body {self.body!r}"
        self.point = _f(point, (3,), f"{what}: point")
        self.anchor = _f(anchor, (3,), f"{what}: anchor")
        self.stiffness = _f(stiffness, (), f"{what}: stiffness")
        self.rest_length = _f(rest_length, (), f"{what}: rest_length")

    def _length_from_joints(self, model, f):
        t = _body_pose_from_joints(model, f, self.body)
        r = t[:3, :3] @ self.point.astype(f.dtype) + t[:3, 3] - self.anchor.astype(f.dtype)
        return jnp.sqrt(jnp.sum(r**2))

    def length(self, model, q):
        q = jnp.asarray(q)
        return self._length_from_joints(model, joint_values(model, q))

    def potential_energy(self, model, q):
        return 0.5 * self.stiffness * (self.length(model, q) - self.rest_length) ** 2

    def body_wrench(self, rotation, translation):
        # F = -k (L - L0) r / L on the point, r from the anchor to the point.
        point = self.point.astype(rotation.dtype)
        r = small_matvec(rotation, point) + translation - self.anchor.astype(rotation.dtype)
        length = jnp.sqrt(jnp.sum(r**2))
        return _point_force_wrench(rotation, point, -self.stiffness * (length - self.rest_length) / length * r)
