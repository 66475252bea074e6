"""Equations of motion ``M(q) q'' + N(q, q') q' = G(q) + Q`` (Ehsani 2016, Eq. 198).

Three independent routes compute ``M``, the velocity term ``N q'`` and ``G``:

* ``"recursive"`` (default, fast): the composite-rigid-body and recursive
  Newton-Euler algorithms on the joint variables ``f`` (:mod:`jaxmb._rigid_body`),
  mapped to ``q`` with ``J = ∂f/∂q`` and the velocity-product term ``q'ᵀ H q'``:
  ``M_q = Jᵀ M_f J`` and ``bias_q = Jᵀ RNEA(f, J q', q'ᵀ H q')``. Every public
  function of this route, and the ``M`` inside :func:`forward_dynamics`, come from
  these two passes.
* ``"autodiff"``: Jacobians of body centre-of-mass positions and angular
  velocities by ``jax.jacfwd`` give ``M = Σ m J_vᵀ J_v + J_ωᵀ I J_ω``; the
  velocity term comes from the Lagrangian, ``N q' = ∂(M q')/∂q · q' - ∂T/∂q``.
  Short and independent of the other two: the oracle of the tests.
* ``"matrix_calculus"``: Ehsani's virtual-work formulas with Kronecker products
  (Ehsani 2016, Eq. 145, corrected Eq. 147, Eq. 187), see
  :mod:`jaxmb.matrix_calculus`. Slow; it is the reference implementation of the paper.

The API convention (../shared/API.md): ``M q'' + bias(q, q') = tau`` with
``bias = N q' - G``; ``gravity_forces`` returns ``G`` (right-hand-side sign).
Model loads (e.g. the spring of Cesari et al. 2001) enter as generalized forces
``Q_ext``: ``M q'' + bias = tau + Q_ext``.
"""

import warnings
from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import lineax as lx
from jaxtyping import Array, Float

from ._checks import coordinate_vector
from ._kinematics import (
    _ground_frame,
    _joint_rates_and_gradients,
    _local_frames,
    angular_jacobians,
    body_angular_velocities,
    body_transforms,
    joint_gradients,
    joint_rates,
    joint_values,
)
from ._loads import AbstractJointSpaceLoad, AbstractLoad, _PoseLoad
from ._model import Model
from ._rigid_body import joint_space_forces, joint_space_mass_matrix, joint_space_wrench_forces
from ._typing import RealLike

Method = Literal["recursive", "autodiff", "matrix_calculus"]


# ---------------------------------------------------------------------------
# Autodiff route.
# ---------------------------------------------------------------------------


def _com_positions(model: Model, q) -> Float[Array, "nb 3"]:
    t = body_transforms(model, q)
    coms = jnp.stack([b.com for b in model.bodies]).astype(t.dtype)
    return jnp.einsum("bij,bj->bi", t[:, :3, :3], coms) + t[:, :3, 3]


def _autodiff_mass_matrix(model: Model, q):
    jv = jax.jacfwd(lambda x: _com_positions(model, x))(q)  # (nb, 3, nq)
    jw = angular_jacobians(model, q)  # (nb, 3, nq)
    rot = body_transforms(model, q)[:, :3, :3]
    masses = jnp.stack([b.mass for b in model.bodies]).astype(q.dtype)
    inertias = jnp.stack([b.inertia for b in model.bodies]).astype(q.dtype)
    world_inertia = jnp.einsum("bij,bjk,blk->bil", rot, inertias, rot)
    m = jnp.einsum("n,nia,nic->ac", masses, jv, jv)
    return m + jnp.einsum("bia,bij,bjc->ac", jw, world_inertia, jw)


def _autodiff_kinetic_energy(model: Model, q, qd):
    return 0.5 * qd @ _autodiff_mass_matrix(model, q) @ qd


def _autodiff_gravity(model: Model, q):
    return jax.grad(lambda x: -potential_energy(model, x))(q)


def _autodiff_velocity_term(model: Model, q, qd):
    """``N q' = d/dt(∂T/∂q') - ∂T/∂q`` at ``q'' = 0`` (Lagrange)."""
    momentum = lambda x: _autodiff_mass_matrix(model, x) @ qd  # noqa: E731
    dmomentum = jax.jvp(momentum, (q,), (qd,))[1]
    return dmomentum - jax.grad(lambda x: _autodiff_kinetic_energy(model, x, qd))(q)


# ---------------------------------------------------------------------------
# Public API.
# ---------------------------------------------------------------------------


def _check_method(method) -> str:
    if method == "seed":
        warnings.warn('method="seed" is now called method="matrix_calculus".', DeprecationWarning, stacklevel=3)
        return "matrix_calculus"
    if method not in ("recursive", "autodiff", "matrix_calculus"):
        raise ValueError(f"method must be 'recursive', 'autodiff' or 'matrix_calculus', got {method!r}.")
    return method


def _q(model, q, caller):
    return coordinate_vector(model, q, caller, "q")


def _rate(model, x, q, caller, name):
    return coordinate_vector(model, x, caller, name, dtype=q.dtype)


def mass_matrix(model: Model, q: RealLike, *, method: Method = "recursive") -> Float[Array, "nq nq"]:
    """Generalized mass matrix ``M(q)`` (Ehsani 2016, Eq. 145 and 189).

    **Arguments:**

    - `model`: the model.
    - `q`: coordinates (nq,).
    - `method`: ``"recursive"`` (``Jᵀ M_f J`` by the composite-rigid-body algorithm),
      ``"autodiff"`` or ``"matrix_calculus"``.

    **Returns:** ``M`` (nq, nq), kg m² / kg m / kg by coordinate kinds.
    """
    method = _check_method(method)
    q = _q(model, q, "mass_matrix")
    if method == "recursive":
        jac = joint_gradients(model, q)
        return jac.T @ joint_space_mass_matrix(model, joint_values(model, q)) @ jac
    if method == "autodiff":
        return _autodiff_mass_matrix(model, q)
    from . import matrix_calculus

    return matrix_calculus.mass_matrix(model, q)


def gravity_forces(model: Model, q: RealLike, *, method: Method = "recursive") -> Float[Array, " nq"]:
    """Generalized gravity force ``G(q)`` (Ehsani 2016, Eq. 187 and 197), right-hand-side
    sign: ``-Jᵀ RNEA(f, 0, 0)`` by the recursive route.

    **Returns:** ``G`` (nq,), N m / N.
    """
    method = _check_method(method)
    q = _q(model, q, "gravity_forces")
    if method == "recursive":
        f = joint_values(model, q)
        zero = jnp.zeros_like(f)
        return -joint_gradients(model, q).T @ joint_space_forces(model, f, zero, zero)
    if method == "autodiff":
        return _autodiff_gravity(model, q)
    from . import matrix_calculus

    return matrix_calculus.gravity_forces(model, q)


def velocity_forces(model: Model, q: RealLike, qd: RealLike, *,
                    method: Method = "recursive") -> Float[Array, " nq"]:
    """Coriolis and centrifugal term ``N(q, q') q'`` (Ehsani 2016, Eq. 147 corrected, 190):
    ``Jᵀ RNEA(f, J q', q'ᵀ H q')`` without gravity by the recursive route.

    **Returns:** ``N q'`` (nq,), N m / N.
    """
    method = _check_method(method)
    q = _q(model, q, "velocity_forces")
    qd = _rate(model, qd, q, "velocity_forces", "qd")
    if method == "recursive":
        f, fd, fdd, jac = _joint_rates_and_gradients(model, q, qd)
        return jac.T @ joint_space_forces(model, f, fd, fdd, gravity=False)
    if method == "autodiff":
        return _autodiff_velocity_term(model, q, qd)
    from . import matrix_calculus

    return matrix_calculus.velocity_matrix(model, q, qd) @ qd


def bias_forces(model: Model, q: RealLike, qd: RealLike, *,
                method: Method = "recursive") -> Float[Array, " nq"]:
    """``bias(q, q') = N(q, q') q' - G(q)``, so that ``M q'' + bias = tau`` (API convention):
    ``Jᵀ RNEA(f, J q', q'ᵀ H q')`` by the recursive route.

    **Returns:** ``bias`` (nq,), N m / N.
    """
    method = _check_method(method)
    q = _q(model, q, "bias_forces")
    qd = _rate(model, qd, q, "bias_forces", "qd")
    if method == "recursive":
        f, fd, fdd, jac = _joint_rates_and_gradients(model, q, qd)
        return jac.T @ joint_space_forces(model, f, fd, fdd)
    return velocity_forces(model, q, qd, method=method) - gravity_forces(model, q, method=method)


def generalized_forces(model: Model, q: RealLike, loads=None) -> Float[Array, " nq"]:
    """Generalized force ``Q = Σ_loads Q_load(q)`` of applied loads (the negative of
    Cesari et al. 2001's T_ext); e.g. ``J_pᵀ F`` for a :class:`PointForce`, ``J_ωᵀ τ`` for
    a :class:`BodyTorque`. Body loads are carried to the joints by the Newton-Euler
    backward pass, ``Q = Jᵀ Σ_i J_iᵀ W_i``.

    **Arguments:**

    - `model`: the model.
    - `q`: coordinates (nq,).
    - `loads`: a sequence of loads; default the model's own.

    **Returns:** ``Q`` (nq,), N m / N.
    """
    q = _q(model, q, "generalized_forces")
    loads = model.loads if loads is None else tuple(loads)
    f, jac = joint_values(model, q), joint_gradients(model, q)
    wrenches, other = _load_terms(model, q, loads, f, jac)
    if wrenches:
        other = other + jac.T @ joint_space_wrench_forces(model, f, wrenches)
    return other


def _load_terms(model: Model, q, loads, f, jac):
    """The loads split into ``(wrenches, Q_other)``: body wrenches (body index -> (6,),
    about the body origin in body axes) of the loads given by their wrench on one body,
    for the Newton-Euler backward pass, and the summed generalized force (nq,) of all
    other loads (joint-space loads from ``f`` and ``J``, others from ``q``)."""
    other = jnp.zeros_like(q)
    wrenches: dict = {}
    frames = {}  # loaded body -> its ground (R, p)
    local = None
    for load in loads:
        if not isinstance(load, AbstractLoad):
            raise TypeError(f"loads must be jaxmb loads (PointForce, BodyTorque, LinearSpring, ...), "
                            f"got {type(load).__name__}")
        if isinstance(load, _PoseLoad):
            b = model.body_index(load.body)
            if b not in frames:
                local = _local_frames(model, f) if local is None else local
                frames[b] = _ground_frame(model, *local, b)
            w = load.body_wrench(*frames[b])
            wrenches[b] = w if b not in wrenches else wrenches[b] + w
        elif isinstance(load, AbstractJointSpaceLoad):
            other = other + load.generalized_force_from_joints(model, f, jac)
        else:
            other = other + load.generalized_force(model, q)
    return wrenches, other


def _mass_matrix_and_forces(model: Model, q, qd):
    """``(M(q), Q_loads(q, q') - bias(q, q'))`` by the recursive route, from one
    evaluation of the joint functions ``(f, J, q'ᵀHq')`` (implicit joint functions
    solve their loops once per state)."""
    f, fd, fdd, jac = _joint_rates_and_gradients(model, q, qd)
    m = jac.T @ joint_space_mass_matrix(model, f) @ jac
    wrenches, other = _load_terms(model, q, model.loads, f, jac)
    return m, other - jac.T @ joint_space_forces(model, f, fd, fdd, wrenches=wrenches)


def forward_dynamics(model: Model, q: RealLike, qd: RealLike, tau=None, *,
                     method: Method = "recursive") -> Float[Array, " nq"]:
    """``q'' = M⁻¹ (tau + Q_ext - bias)`` (Ehsani 2016, Eq. 198 solved for ``q''``); the
    solve uses M as a positive-definite operator (Cholesky).

    **Arguments:**

    - `model`: the model.
    - `q`, `qd`: coordinates and their rates (nq,).
    - `tau`: generalized forces at the coordinates (nq,), N m / N; default zero.
    - `method`: the route of ``M`` and ``bias`` (see :func:`mass_matrix`).

    **Returns:** ``q''`` (nq,).
    """
    method = _check_method(method)
    q = _q(model, q, "forward_dynamics")
    qd = _rate(model, qd, q, "forward_dynamics", "qd")
    tau = jnp.zeros_like(q) if tau is None else _rate(model, tau, q, "forward_dynamics", "tau")
    if method == "recursive":
        m, forces = _mass_matrix_and_forces(model, q, qd)
        rhs = tau + forces
    else:
        rhs = tau - bias_forces(model, q, qd, method=method)
        if model.loads:
            rhs = rhs + generalized_forces(model, q)
        m = mass_matrix(model, q, method=method)
    if m.shape == (1, 1):
        # One coordinate (a crank, a driven mechanism): the solve is a division, not
        # three LAPACK calls per right-hand side.
        return rhs / m[0, 0]
    operator = lx.MatrixLinearOperator(m, lx.positive_semidefinite_tag)
    # M is symmetric positive definite by construction (validated masses and inertias),
    # so the factorisation cannot fail; throw=False avoids a host check on every call.
    return lx.linear_solve(operator, rhs, solver=lx.Cholesky(), throw=False).value


class InverseDynamicsTerms(eqx.Module):
    """Decomposition of the inverse dynamics as in Cesari et al. (2001), Eq. 24:
    ``total = inertial + velocity + gravity + external``.

    - `inertial`: ``M(q) q''``
    - `velocity`: ``N(q, q') q'`` (Coriolis/centrifugal; their v)
    - `gravity`: ``-G(q)`` (their G: the moment that holds the limb against gravity)
    - `external`: ``-Q_ext`` (their T_ext)
    - `total`: the generalized force ``tau`` that produces ``q''``.
    """

    inertial: Array
    velocity: Array
    gravity: Array
    external: Array
    total: Array


def inverse_dynamics_terms(model: Model, q, qd, qdd, *, loads=None, method: Method = "recursive") -> InverseDynamicsTerms:
    """Inverse dynamics, decomposed (Cesari et al. 2001, Eq. 24-44). Works on single states;
    use :func:`inverse_dynamics_series` for time series."""
    q = _q(model, q, "inverse_dynamics_terms")
    qd = _rate(model, qd, q, "inverse_dynamics_terms", "qd")
    qdd = _rate(model, qdd, q, "inverse_dynamics_terms", "qdd")
    inertial = mass_matrix(model, q, method=method) @ qdd
    velocity = velocity_forces(model, q, qd, method=method)
    gravity = -gravity_forces(model, q, method=method)
    external = -generalized_forces(model, q, loads)
    return InverseDynamicsTerms(inertial, velocity, gravity, external, inertial + velocity + gravity + external)


def inverse_dynamics(model: Model, q, qd, qdd, *, method: Method = "recursive") -> Float[Array, " nq"]:
    """Generalized force ``tau = M q'' + bias - Q_ext`` that produces ``q''``."""
    method = _check_method(method)
    q = _q(model, q, "inverse_dynamics")
    qd = _rate(model, qd, q, "inverse_dynamics", "qd")
    qdd = _rate(model, qdd, q, "inverse_dynamics", "qdd")
    if method == "recursive":
        f, fd, fdd = joint_rates(model, q, qd, qdd)
        jac = joint_gradients(model, q)
        wrenches, other = _load_terms(model, q, model.loads, f, jac)
        return jac.T @ joint_space_forces(model, f, fd, fdd, wrenches=wrenches) - other
    tau = mass_matrix(model, q, method=method) @ qdd + bias_forces(model, q, qd, method=method)
    if model.loads:
        tau = tau - generalized_forces(model, q)
    return tau


def inverse_dynamics_series(model: Model, q, qd, qdd, *, loads=None, method: Method = "recursive") -> InverseDynamicsTerms:
    """:func:`inverse_dynamics_terms` over time series ``q, q', q''`` of shape (T, nq)."""
    q, qd, qdd = jnp.asarray(q), jnp.asarray(qd), jnp.asarray(qdd)
    for name, x in (("q", q), ("qd", qd), ("qdd", qdd)):
        if x.ndim != 2:
            raise ValueError(f"inverse_dynamics_series: {name} must be a time series of shape (T, {model.nq}), "
                             f"got shape {x.shape}.")
    return jax.vmap(lambda a, b, c: inverse_dynamics_terms(model, a, b, c, loads=loads, method=method))(q, qd, qdd)


def kinetic_energy(model: Model, q, qd) -> Float[Array, ""]:
    """``T = Σ ½ m |v_c|² + ½ ωᵀ I ω`` from body velocities (not from M), J."""
    q = _q(model, q, "kinetic_energy")
    qd = _rate(model, qd, q, "kinetic_energy", "qd")
    vc = jax.jvp(lambda x: _com_positions(model, x), (q,), (qd,))[1]
    w = body_angular_velocities(model, q, qd)
    rot = body_transforms(model, q)[:, :3, :3]
    masses = jnp.stack([b.mass for b in model.bodies]).astype(q.dtype)
    inertias = jnp.stack([b.inertia for b in model.bodies]).astype(q.dtype)
    wb = jnp.einsum("bji,bj->bi", rot, w)  # body axes
    return 0.5 * jnp.sum(masses * jnp.sum(vc**2, axis=1)) + 0.5 * jnp.einsum("bi,bij,bj->", wb, inertias, wb)


def potential_energy(model: Model, q) -> Float[Array, ""]:
    """Gravitational potential ``V = -Σ m g · r_c`` (zero at the ground origin), J."""
    q = _q(model, q, "potential_energy")
    masses = jnp.stack([b.mass for b in model.bodies]).astype(q.dtype)
    return -jnp.sum(masses * (_com_positions(model, q) @ model.gravity.astype(q.dtype)))
