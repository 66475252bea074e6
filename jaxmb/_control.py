"""Controllers that produce generalized forces during a simulation.

A controller may carry its own state ``z`` (e.g. the integral of a PID error),
integrated by :func:`jaxmb.simulate` together with ``q`` and ``q'``.
"""

import abc

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float

from ._typing import RealLike


class AbstractController(eqx.Module):
    """``tau = torque(t, q, q', z)`` with controller state ``z' = state_derivative(t, q, q', z)``."""

    @abc.abstractmethod
    def init(self, q0, qd0) -> Array:
        """Initial controller state (an array, possibly of size 0)."""

    @abc.abstractmethod
    def torque(self, t, q, qd, z) -> Float[Array, " nq"]:
        """Generalized force applied at the coordinates."""

    def state_derivative(self, t, q, qd, z) -> Array:
        return jnp.zeros_like(z)


class PID(AbstractController):
    """PID on selected coordinates: ``tau_k = kp e + ki ∫e dt - kd q'_k`` with ``e = r - q_k``.

    Seed 000's commented controller holds the elbow at ``r = π/3`` with
    ``M12 = 30 (r - θ2) - 2 θ2' + 3 ∫(r - θ2) dt``. The derivative acts on the
    measured rate (no derivative kick). ``selection`` (nq, k) maps the k
    controlled torques to generalized forces (default: the controlled coordinates).
    """

    indices: tuple[int, ...] = eqx.field(static=True)
    target: Float[Array, " k"]
    kp: Float[Array, " k"]
    ki: Float[Array, " k"]
    kd: Float[Array, " k"]
    selection: Float[Array, "nq k"] | None

    def __init__(self, indices, target: RealLike, kp: RealLike, ki: RealLike = 0.0, kd: RealLike = 0.0,
                 selection: RealLike | None = None):
        self.indices = tuple(int(i) for i in indices)
        k = len(self.indices)
        self.target = jnp.broadcast_to(jnp.asarray(target, dtype=float), (k,))
        self.kp = jnp.broadcast_to(jnp.asarray(kp, dtype=float), (k,))
        self.ki = jnp.broadcast_to(jnp.asarray(ki, dtype=float), (k,))
        self.kd = jnp.broadcast_to(jnp.asarray(kd, dtype=float), (k,))
        self.selection = None if selection is None else jnp.asarray(selection, dtype=float)

    def init(self, q0, qd0):
        return jnp.zeros(len(self.indices), dtype=jnp.asarray(q0).dtype)

    def _error(self, q):
        return self.target.astype(q.dtype) - q[jnp.asarray(self.indices)]

    def torque(self, t, q, qd, z):
        u = self.kp * self._error(q) + self.ki * z - self.kd * qd[jnp.asarray(self.indices)]
        if self.selection is not None:
            return self.selection.astype(q.dtype) @ u
        return jnp.zeros_like(q).at[jnp.asarray(self.indices)].set(u)

    def state_derivative(self, t, q, qd, z):
        return self._error(q)


class ComputedTorque(AbstractController):
    """Computed-torque tracking: ``tau = ID(q, q', q''_ref + kd (q'_ref - q') + kp (q_ref - q))``.

    `reference` is a callable ``t -> (q_ref, qd_ref, qdd_ref)``; `model` the model
    used for inverse dynamics (it may differ from the simulated one).
    """

    model: object
    reference: object = eqx.field(static=True)
    kp: Float[Array, " nq"]
    kd: Float[Array, " nq"]

    def __init__(self, model, reference, kp: RealLike, kd: RealLike):
        self.model = model
        self.reference = reference
        self.kp = jnp.asarray(kp, dtype=float)
        self.kd = jnp.asarray(kd, dtype=float)

    def init(self, q0, qd0):
        return jnp.zeros((0,), dtype=jnp.asarray(q0).dtype)

    def torque(self, t, q, qd, z):
        from ._dynamics import inverse_dynamics

        q_ref, qd_ref, qdd_ref = self.reference(t)
        qdd = qdd_ref + self.kd * (qd_ref - qd) + self.kp * (q_ref - q)
        return inverse_dynamics(self.model, q, qd, qdd)
