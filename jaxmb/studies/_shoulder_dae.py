"""The shoulder study's traditional route: the shoulder rhythm as algebraic constraints.

Every moving joint variable of the model becomes a coordinate ``z`` of its own (the
clavicle and scapula rotations next to the three shoulder coordinates); the rhythm is
the constraints ``Φ(z) = z_dep - f_dep(z_ind) = 0``, reduced to index 1 by
differentiating them twice and stabilised after Baumgarte (1972). Ehsani (2016),
section 4-4 C, solves the tracking problem this way too and reports the embedded ODE
(`track_shoulder`) more than 3 times cheaper.

Computed-torque tracking on the DAE is Eq. 200 with the constraints appended: one
linear solve per right-hand side for the accelerations, the multipliers and the torques,

    [ M(z)  Φ_zᵀ  -Sᵀ ] [ z̈ ]   [ Q(z) - bias(z, ż)                  ]
    [ Φ_z    0     0  ] [ λ ] = [ -(Φ_z ż)_z ż - 2α Φ_z ż - β² Φ(z)  ]
    [ S      0     0  ] [ τ ]   [ Q_d(t, S z, S ż)                    ]

with ``S`` the rows of ``z`` that are the independent coordinates and ``Q_d`` Eq. 201.
"""

from __future__ import annotations

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._dynamics import _mass_matrix_and_forces
from .._errors import ModelError
from .._functions import Coordinate
from .._kinematics import joint_gradients, joint_values
from .._loops._dae import stabilised_constraints
from .._model import Joint, Model
from .._solvers import _solver_by_name, _TracedOnce
from .._typing import RealLike
from ._shoulder import ElevationTrajectory, ShoulderTracking, _frames, _welded


class CoupledDAE(eqx.Module):
    """A model whose coupled (explicit, non-coordinate) joints are made coordinates of
    their own and held by the constraints ``z_j - f_j(q) = 0``.

    - `tree`: the model in ``z``: each joint that moves with ``q`` reads its own
      coordinate; joints that do not move (locked) keep their constant functions.
    - `z_of_q`: (nq,) static, the index in ``z`` of each coordinate of ``q``.
    - `dependent`: static, the indices in ``z`` of the coupled joints.
    - `functions`: their joint functions ``f_j(q)``.
    - `model_joints`: static, the index in the original model's joints of each ``z``.

    Build with `CoupledDAE.of(model)`.
    """

    tree: Model
    functions: tuple
    z_of_q: tuple[int, ...] = eqx.field(static=True)
    dependent: tuple[int, ...] = eqx.field(static=True)
    model_joints: tuple[int, ...] = eqx.field(static=True)

    @classmethod
    def of(cls, model: Model) -> CoupledDAE:
        """The DAE form of `model` (a `ModelError` if a coordinate drives no joint directly,
        or if the model has force elements, which are written in ``q``)."""
        if model.forces:
            raise ModelError(f"CoupledDAE: model {model.name!r} has force elements (model.forces); the DAE "
                             "route takes the skeleton only (read it with muscles=False).")
        joints, z_of_q, dependent, functions, model_joints = [], {}, [], [], []
        for i, j in enumerate(model.joints):
            fn = j.function
            if isinstance(fn, Coordinate) or fn.coordinate_indices():
                k = len(model_joints)
                model_joints.append(i)
                if isinstance(fn, Coordinate):
                    z_of_q[fn.index] = k
                else:
                    dependent.append(k)
                    functions.append(fn)
                fn = Coordinate(k)
            joints.append(Joint(j.name, j.parent, j.child, j.kind, j.axis, fn,
                                parent_translation=j.parent_translation, parent_rotation=j.parent_rotation,
                                child_translation=j.child_translation, child_rotation=j.child_rotation))
        if sorted(z_of_q) != list(range(model.nq)):
            missing = [model.coordinate_names[k] for k in range(model.nq) if k not in z_of_q]
            raise ModelError(f"CoupledDAE: the coordinates {missing} of model {model.name!r} are the variable of no "
                             "joint; the DAE route needs each coordinate to drive one joint directly.")
        names = [model.joints[i].name for i in model_joints]
        tree = Model(model.bodies, tuple(joints), names, gravity=model.gravity, loads=model.loads,
                     name=model.name + "_dae")
        return cls(tree, tuple(functions), tuple(z_of_q[k] for k in range(model.nq)), tuple(dependent),
                   tuple(model_joints))

    def q(self, z: Float[Array, " nz"]) -> Float[Array, " nq"]:
        """The independent coordinates read off ``z``."""
        return z[jnp.asarray(self.z_of_q)]

    def phi(self, z: Float[Array, " nz"]) -> Float[Array, " m"]:
        """The constraints ``z_dep - f_dep(q)`` (rad or m)."""
        q = self.q(z)
        return z[jnp.asarray(self.dependent)] - jnp.stack([f(q) for f in self.functions]).astype(z.dtype)

    def state(self, model: Model, q, qd):
        """``(z, ż)`` consistent with ``(q, q')`` of the original `model`."""
        sel = jnp.asarray(self.model_joints)
        return joint_values(model, q)[sel], (joint_gradients(model, q) @ qd)[sel]

    def tracking(self, t, z, zd, trajectory, gains, alpha, beta):
        """``(z̈, λ, τ)`` of the computed-torque DAE (the module's system)."""
        m, rhs = _mass_matrix_and_forces(self.tree, z, zd)
        g, c = stabilised_constraints(self.phi, z, zd, alpha, beta)
        q_ref, qd_ref, qdd_ref = trajectory(t)
        k = jnp.asarray(gains, dtype=z.dtype)
        sel = jnp.asarray(self.z_of_q)
        qdd = qdd_ref - 2 * k * (zd[sel] - qd_ref) - k**2 * (z[sel] - q_ref)
        n, nc, nq = z.shape[0], g.shape[0], sel.shape[0]
        s = jnp.zeros((nq, n), z.dtype).at[jnp.arange(nq), sel].set(1.0)
        a = jnp.block([[m, g.T, -s.T],
                       [g, jnp.zeros((nc, nc + nq), z.dtype)],
                       [s, jnp.zeros((nq, nc + nq), z.dtype)]])
        x = jnp.linalg.solve(a, jnp.concatenate([rhs, c, qdd]))
        return x[:n], x[n:n + nc], x[n + nc:]


class _TrackingField(eqx.Module):
    dae: CoupledDAE
    trajectory: ElevationTrajectory
    gains: Array
    alpha: float = eqx.field(static=True)
    beta: float = eqx.field(static=True)

    def __call__(self, t, y, args):
        n = y.shape[0] // 2
        zdd = self.dae.tracking(t, y[:n], y[n:], self.trajectory, self.gains, self.alpha, self.beta)[0]
        return jnp.concatenate([y[n:], zdd])


def track_shoulder_dae(model: Model, trajectory: ElevationTrajectory | None = None, *,
                       gains: RealLike = (100.0, 100.0, 1000.0), t1: RealLike | None = None, n_frames: int = 201,
                       alpha: float = 0.0, beta: float = 0.0, solver: str = "tsit5", rtol: float = 1e-10,
                       atol: float = 1e-10, max_steps: int = 100_000) -> ShoulderTracking:
    """`track_shoulder` on the traditional route: the shoulder rhythm as constraints of an
    index-1 DAE in all moving joint variables (`CoupledDAE`), with Baumgarte stabilisation,
    as Ehsani (2016), section 4-4 C, compares.

    **Arguments:**

    As `track_shoulder`, and `alpha`, `beta`: the Baumgarte parameters (1/s; 0, the
    default, is the plain index-1 system, whose drift `drift` reports).

    **Returns:**

    A `ShoulderTracking` in the three coordinates, with `drift` the largest constraint
    residual per frame (rad).
    """
    trajectory = ElevationTrajectory() if trajectory is None else trajectory
    model = _welded(model)  # as `track_shoulder` does: the same bodies on both routes
    dae = CoupledDAE.of(model)
    ts = _frames(trajectory, t1, n_frames)
    q0, qd0, _ = trajectory(ts[0])
    z0, zd0 = dae.state(model, q0, qd0)
    gains = jnp.asarray(gains, dtype=q0.dtype)
    field = _TrackingField(dae, trajectory, gains, float(alpha), float(beta))
    sol = diffrax.diffeqsolve(diffrax.ODETerm(_TracedOnce(field)), _solver_by_name(solver, "track_shoulder_dae"),
                              t0=ts[0], t1=ts[-1], dt0=None, y0=jnp.concatenate([z0, zd0]),
                              saveat=diffrax.SaveAt(ts=ts),
                              stepsize_controller=diffrax.PIDController(rtol=rtol, atol=atol), max_steps=max_steps)
    n = z0.shape[0]
    z, zd = sol.ys[:, :n], sol.ys[:, n:]
    _, _, tau = jax.vmap(lambda t, a, b: dae.tracking(t, a, b, trajectory, gains, float(alpha), float(beta)))(
        ts, z, zd)
    q_ref, qd_ref, qdd_ref = jax.vmap(trajectory)(ts)
    q, qd = jax.vmap(dae.q)(z), jax.vmap(dae.q)(zd)
    qdd = qdd_ref - 2 * gains[None] * (qd - qd_ref) - gains[None] ** 2 * (q - q_ref)
    drift = jax.vmap(lambda x: jnp.max(jnp.abs(dae.phi(x))))(z)
    return ShoulderTracking(ts=ts, q=q, qd=qd, q_ref=q_ref, qd_ref=qd_ref, qdd_ref=qdd_ref, qdd=qdd, tau=tau,
                            num_steps=sol.stats["num_steps"], drift=drift)
