"""Equations of motion ``M(q) q'' + N(q, q') q' = G(q) + Q`` (Ehsani 2016, Eq. 198).

Three independent routes compute ``M``, the velocity term ``N q'`` and ``G``:

* ``"recursive"`` (default, fast): Featherstone's composite-rigid-body and
  recursive Newton-Euler algorithms on the joint variables ``f``, mapped to ``q``
  with ``J = ∂f/∂q`` and the velocity-product term ``q'ᵀ H q'``:
  ``M_q = Jᵀ M_f J`` and ``bias_q = Jᵀ RNEA(f, J q', q'ᵀ H q')``.
* ``"autodiff"``: Jacobians of body centre-of-mass positions and angular
  velocities by ``jax.jacfwd`` give ``M = Σ m J_vᵀ J_v + J_ωᵀ I J_ω``; the
  velocity term comes from the Lagrangian, ``N q' = ∂(M q')/∂q · q' - ∂T/∂q``.
* ``"matrix_calculus"``: Ehsani's virtual-work formulas with Kronecker products
  (Ehsani 2016, Eq. 145, corrected Eq. 147, Eq. 187), see `jaxmb.matrix_calculus`. Slow; it is the
  reference implementation of the paper.

The API convention (../shared/API.md): ``M q'' + bias(q, q') = tau`` with
``bias = N q' - G``; ``gravity_forces`` returns ``G`` (right-hand-side sign).
Model loads (e.g. Cesari et al. (2001)'s spring) enter as generalized forces ``Q_ext``:
``M q'' + bias = tau + Q_ext``.
"""


from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ._checks import eager_finite_vector, is_concrete
from ._errors import ModelError
from ._typing import RealLike
from ._kinematics import body_transforms, compiled_on_model, joint_gradients, joint_values
from ._kinematics import _ground_frame, _joint_rates_and_gradients, _local_frames, _path_twist_jacobian
from ._loads import AbstractJointSpaceLoad, AbstractLoad, _PoseLoad
from ._model import Model
from ._model_checks import require_mass
from ._point_kinematics import angular_jacobians, body_angular_velocities
from ._batching import batches_in_chunks
from ._rigid_body import _joint_space_crba, _joint_space_rnea, _joint_space_terms, _projected_terms, _projects

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


def _check_method(method):
    if method not in ("recursive", "autodiff", "matrix_calculus"):
        raise ValueError(f"method must be 'recursive', 'autodiff' or 'matrix_calculus', got {method!r}.")


def mass_matrix(model: Model, q: RealLike, *, method: Method = "recursive") -> Float[Array, "nq nq"]:
    """Generalized mass matrix ``M(q) = Σ_i J_iᵀ I_i J_i`` (Ehsani 2016, Eq. 145 and 189).

    **Arguments:**

    - `model`: the `jaxmb.Model`.
    - `q`: the coordinates (nq,), rad or m, in the order of `model.coordinate_names`.
    - `method`: ``"recursive"`` (default: `jaxmb._rigid_body`'s pass), ``"autodiff"``
      (Lagrangian by `jax.jacfwd`) or ``"matrix_calculus"`` (Ehsani's Kronecker-product
      formulas); three independent routes to the same values.

    **Returns:**

    `(nq, nq)`, symmetric positive definite: kg m² between rotational coordinates, kg
    between translational ones, kg m between the two.
    """
    _check_method(method)
    return _mass_matrix(model, eager_finite_vector(model, q, "mass_matrix", "q"), method=method)


# The public calls' bodies are compiled, one program per model structure and argument
# shapes (`jaxmb._eager`): eagerly they would run the passes operation by operation.
# Inside a user's `jit`, `vmap` or `grad` the nested `jit` is inlined.
@compiled_on_model
@batches_in_chunks
def _mass_matrix(model: Model, q, *, method: Method):
    if method == "recursive":
        f, jac = joint_values(model, q), joint_gradients(model, q)
        if _projects(model):
            zero = jnp.zeros_like(f)
            return _projected_terms(model, f, zero, zero, jac)[0]
        return jac.T @ _joint_space_crba(model, f) @ jac
    if method == "autodiff":
        return _autodiff_mass_matrix(model, q)
    from . import matrix_calculus

    return matrix_calculus.mass_matrix(model, q)


def gravity_forces(model: Model, q: RealLike, *, method: Method = "recursive") -> Float[Array, " nq"]:
    """Generalized gravity force ``G(q) = Σ_i J_{c,i}ᵀ m_i g`` (Ehsani 2016, Eq. 187 and 197),
    with the right-hand-side sign of ``M q'' + N q' = G + tau``.

    **Arguments:**

    - `model`: the `jaxmb.Model`.
    - `q`: the coordinates (nq,), rad or m, in the order of `model.coordinate_names`.
    - `method`: ``"recursive"`` (default: `jaxmb._rigid_body`'s pass), ``"autodiff"``
      (Lagrangian by `jax.jacfwd`) or ``"matrix_calculus"`` (Ehsani's Kronecker-product
      formulas); three independent routes to the same values.

    **Returns:**

    `(nq,)`, N m (rotational) or N (translational).
    """
    _check_method(method)
    return _gravity_forces(model, eager_finite_vector(model, q, "gravity_forces", "q"), method=method)


@compiled_on_model
def _gravity_forces(model: Model, q, *, method: Method):
    if method == "recursive":
        zero = jnp.zeros_like(q)
        return -_recursive_inverse_dynamics(model, q, zero, zero)
    if method == "autodiff":
        return _autodiff_gravity(model, q)
    from . import matrix_calculus

    return matrix_calculus.gravity_forces(model, q)


def velocity_forces(model: Model, q, qd, *, method: Method = "recursive") -> Float[Array, " nq"]:
    """Coriolis and centrifugal term ``N(q, q') q'`` (Ehsani 2016, Eq. 147 as corrected on the
    errata page, Eq. 190).

    **Arguments:**

    - `model`: the `jaxmb.Model`.
    - `q`: the coordinates (nq,), rad or m, in the order of `model.coordinate_names`.
    - `qd`: their rates q' (nq,), rad/s or m/s.
    - `method`: ``"recursive"`` (default: `jaxmb._rigid_body`'s pass), ``"autodiff"``
      (Lagrangian by `jax.jacfwd`) or ``"matrix_calculus"`` (Ehsani's Kronecker-product
      formulas); three independent routes to the same values.

    **Returns:**

    `(nq,)`, N m or N.
    """
    _check_method(method)
    q = eager_finite_vector(model, q, "velocity_forces", "q")
    qd = eager_finite_vector(model, qd, "velocity_forces", "qd", dtype=q.dtype)
    return _velocity_forces(model, q, qd, method=method)


@compiled_on_model
def _velocity_forces(model: Model, q, qd, *, method: Method):
    if method == "recursive":
        return _recursive_inverse_dynamics(model, q, qd, jnp.zeros_like(q), gravity_on=False)
    if method == "autodiff":
        return _autodiff_velocity_term(model, q, qd)
    from . import matrix_calculus

    return matrix_calculus.velocity_matrix(model, q, qd) @ qd


def bias_forces(model: Model, q, qd, *, method: Method = "recursive") -> Float[Array, " nq"]:
    """``bias(q, q') = N(q, q') q' - G(q)``, so that ``M q'' + bias = tau`` (the API convention;
    Ehsani 2016, Eq. 198).

    **Arguments:**

    - `model`: the `jaxmb.Model`.
    - `q`: the coordinates (nq,), rad or m, in the order of `model.coordinate_names`.
    - `qd`: their rates q' (nq,), rad/s or m/s.
    - `method`: ``"recursive"`` (default: `jaxmb._rigid_body`'s pass), ``"autodiff"``
      (Lagrangian by `jax.jacfwd`) or ``"matrix_calculus"`` (Ehsani's Kronecker-product
      formulas); three independent routes to the same values.

    **Returns:**

    `(nq,)`, N m or N.
    """
    _check_method(method)
    q = eager_finite_vector(model, q, "bias_forces", "q")
    qd = eager_finite_vector(model, qd, "bias_forces", "qd", dtype=q.dtype)
    return _bias_forces(model, q, qd, method=method)


@compiled_on_model
@batches_in_chunks
def _bias_forces(model: Model, q, qd, *, method: Method):
    if method == "recursive":
        return _recursive_inverse_dynamics(model, q, qd, jnp.zeros_like(q))
    return velocity_forces(model, q, qd, method=method) - gravity_forces(model, q, method=method)


def generalized_forces(model: Model, q, loads=None) -> Float[Array, " nq"]:
    """Generalized force ``Q = Σ_loads Q_load(q)`` of applied loads (Cesari et al. (2001)'s
    ``T_ext = -Q``): ``J_pᵀ F`` for a `PointForce`, ``J_ωᵀ τ`` for a `BodyTorque`, by virtual
    power.

    **Arguments:**

    - `model`: the `jaxmb.Model`.
    - `q`: the coordinates (nq,), rad or m, in the order of `model.coordinate_names`.
    - `loads`: a sequence of `jaxmb.AbstractLoad`; default: the model's own loads.

    **Returns:**

    `(nq,)`, N m or N.
    """
    q = eager_finite_vector(model, q, "generalized_forces", "q")
    loads = model.loads if loads is None else tuple(loads)
    return _generalized_forces(model, q, loads) if loads else jnp.zeros_like(q)


@compiled_on_model
def _generalized_forces(model: Model, q, loads):
    return _applied_forces(model, q, loads)


def _applied_forces(model: Model, q, loads, f=None, jac=None, projected=None) -> Float[Array, " nq"]:
    """``Σ Q_load``; joint-space loads reuse ``f`` and ``J = ∂f/∂q`` (computed here if not
    given). `projected`, when given, is ``(J_bodies, R, p)`` of the projected pass:
    the bodies' spatial Jacobians in q (n_bodies, 6, nq; body coordinates) and the
    joints' local frames, from which a pose load's ``Q = J_bᵀ (n, f)``."""
    total = jnp.zeros_like(q)
    motions = {}  # loaded body -> its ground pose and the pose's rate per unit coordinate rate
    frames = {}  # loaded body -> its ground (R, p)
    local = None  # the joints' local frames, once
    body_jacobians, rot, trans = (None, None, None) if projected is None else projected
    for load in loads:
        if not isinstance(load, AbstractLoad):
            raise TypeError(f"loads must be jaxmb loads (PointForce, BodyTorque, LinearSpring, ...), "
                            f"got {type(load).__name__}")
        if isinstance(load, AbstractJointSpaceLoad) and f is None:
            f, jac = joint_values(model, q), joint_gradients(model, q)
        if isinstance(load, _PoseLoad):
            b = model.body_index(load.body)
            if projected is not None:
                if b not in frames:
                    frames[b] = _ground_frame(model, rot, trans, b)
                total = total + jnp.sum(body_jacobians[b] * load.body_wrench(*frames[b])[:, None], axis=0)
                continue
            if b not in motions:
                # The loaded body's pose and its twist per unit rate of the joints on its own
                # path from ground (all bodies' poses would cost the whole tree per load),
                # shared by the loads on that body.
                local = _local_frames(model, f) if local is None else local
                motions[b] = _path_twist_jacobian(model, *local, b)
            path, rows = load.path_power(motions[b])
            total = total + jac[path].T @ rows
        elif isinstance(load, AbstractJointSpaceLoad):
            total = total + load.generalized_force_from_joints(model, f, jac)
        else:
            total = total + load.generalized_force(model, q)
    return total


def _recursive_inverse_dynamics(model: Model, q, qd, qdd, *, gravity_on: bool = True):
    """``M q'' + N q' - G`` (``- G`` only with `gravity_on`) by the recursive route that
    `_projects` picks for the model, the one `forward_dynamics` uses: the joint-space
    RNEA at ``f'' = J q'' + q'ᵀ H q'`` mapped by ``Jᵀ``, or ``M_q q'' + bias_q`` from
    the projected pass."""
    f, fd, fdd, jac = _joint_rates_and_gradients(model, q, qd)
    if _projects(model):
        if not gravity_on:
            model = eqx.tree_at(lambda m: m.gravity, model, jnp.zeros_like(model.gravity))
        m, bias, _ = _projected_terms(model, f, fd, fdd, jac)
        return m @ qdd + bias
    return jac.T @ _joint_space_rnea(model, f, fd, fdd + jac @ qdd, gravity_on=gravity_on)


def _mass_matrix_and_forces(model: Model, q, qd):
    """``(M(q), Q_loads(q, q') - bias(q, q'))`` by the recursive route, from one
    evaluation of the joint functions ``(f, J, q'ᵀHq')`` (implicit joint functions
    solve their loops once per state)."""
    f, fd, fdd, jac = _joint_rates_and_gradients(model, q, qd)
    projected = None
    if _projects(model):
        m, bias, projected = _projected_terms(model, f, fd, fdd, jac)
    else:
        m_f, bias_f = _joint_space_terms(model, f, fd, fdd)
        m, bias = jac.T @ m_f @ jac, jac.T @ bias_f
    forces = -bias
    if model.loads:
        forces = forces + _applied_forces(model, q, model.loads, f, jac, projected)
    return m, forces


def forward_dynamics(model: Model, q, qd, tau=None, *, method: Method = "recursive") -> Float[Array, " nq"]:
    """Accelerations ``q'' = M⁻¹ (tau + Q - bias)`` (Ehsani 2016, Eq. 198 solved for ``q''``),
    with ``Q`` the model's loads and `model.forces` (actuators at zero control); ``M`` is
    factorised as a positive-definite operator (Cholesky).

    **Arguments:**

    - `model`: the `jaxmb.Model`.
    - `q`: the coordinates (nq,), rad or m, in the order of `model.coordinate_names`.
    - `qd`: their rates q' (nq,), rad/s or m/s.
    - `tau`: generalized forces at the coordinates (nq,), N m or N; default zero.
    - `method`: ``"recursive"`` (default: `jaxmb._rigid_body`'s pass), ``"autodiff"``
      (Lagrangian by `jax.jacfwd`) or ``"matrix_calculus"`` (Ehsani's Kronecker-product
      formulas); three independent routes to the same values.

    **Returns:**

    `(nq,)`, rad/s² or m/s². Where ``M(q)`` is singular (a coordinate that moves no mass
    at this state, e.g. a joint function whose derivative vanishes there) an eager call
    raises a [`jaxmb.ModelError`][jaxmb.ModelError] naming the coordinates that move no
    mass; under ``jit`` the result is not finite: this call is the hot path of
    `jaxmb.simulate`, which reports such a state as ``RESULTS.singular_mass_matrix``
    rather than paying a check on every call. The
    structural causes (a massless end body, no inertia about a joint axis, a coordinate
    no joint reads) are refused when the model is built, and a model in which no body
    has mass (a kinematic model) by this call, with a [`jaxmb.ModelError`][jaxmb.ModelError].
    """
    require_mass(model, "forward_dynamics")
    q = eager_finite_vector(model, q, "forward_dynamics", "q")
    qd = eager_finite_vector(model, qd, "forward_dynamics", "qd", dtype=q.dtype)
    tau = jnp.zeros_like(q) if tau is None else eager_finite_vector(model, tau, "forward_dynamics", "tau", dtype=q.dtype)
    qdd = _forward_dynamics(model, q, qd, tau, method=method)
    if is_concrete((q, qd, tau, qdd)) and not np.all(np.isfinite(np.asarray(qdd))):
        # An eager call: finite arguments in, so M(q) is singular here (under jit, simulate
        # reports it as RESULTS.singular_mass_matrix instead)
        diagonal = np.abs(np.diag(np.asarray(_mass_matrix(model, q, method=method))))
        idle = [n for n, d in zip(model.coordinate_names, diagonal) if not d > 1e-12 * max(diagonal.max(), 1e-300)]
        raise ModelError(f"forward_dynamics: the mass matrix of {model.name!r} is singular at q = "
                         f"{np.asarray(q).tolist()}{f': coordinate(s) {idle} move no mass there' if idle else ''}; "
                         "a coordinate must move some mass (check the joint functions that read it, e.g. a zero "
                         "weight of Linear).")
    return qdd


@compiled_on_model
@batches_in_chunks
def _forward_dynamics(model: Model, q, qd, tau, *, method: Method):
    tau = sum((force.generalized_force(model, q, qd) for force in model.forces), tau)  # jaxmb.AbstractForce, u = 0
    if method == "recursive":
        m, forces = _mass_matrix_and_forces(model, q, qd)
        rhs = tau + forces
    else:
        rhs = tau - bias_forces(model, q, qd, method=method)
        if model.loads:
            rhs = rhs + generalized_forces(model, q)
        m = mass_matrix(model, q, method=method)
    if m.shape == (1, 1):
        # One coordinate (a crank): the solve is a division, not three LAPACK calls per right-hand side.
        return rhs / m[0, 0]
    # M is symmetric positive semi-definite by construction (validated masses and
    # inertias) and definite but where the joint functions lose rank: a Cholesky solve,
    # unchecked (simulate diagnoses a singular M at the state it stops).
    return jax.scipy.linalg.cho_solve(jax.scipy.linalg.cho_factor(m), rhs)


class InverseDynamicsTerms(eqx.Module):
    """Decomposition of the inverse dynamics as in Cesari et al. 2001, Eq. 24:
    ``total = inertial + velocity + gravity + external``.

    - `inertial`: ``M(q) q''``
    - `velocity`: ``N(q, q') q'`` (Coriolis/centrifugal; Cesari et al. (2001)'s v)
    - `gravity`: ``-G(q)`` (Cesari et al. (2001)'s G: the moment that holds the limb against gravity)
    - `external`: ``-Q_ext`` (Cesari et al. (2001)'s T_ext)
    - `total`: the generalized force ``tau`` that produces ``q''``.
    """

    inertial: Array
    velocity: Array
    gravity: Array
    external: Array
    total: Array


def inverse_dynamics_terms(model: Model, q, qd, qdd, *, loads=None, method: Method = "recursive") -> InverseDynamicsTerms:
    """Inverse dynamics decomposed as Cesari et al. (2001), Eq. 24:
    ``tau = M q'' + N q' - G - Q_ext`` term by term. Works on single states; use
    `inverse_dynamics_series` for time series.

    **Arguments:**

    - `model`: the `jaxmb.Model`.
    - `q`: the coordinates (nq,), rad or m, in the order of `model.coordinate_names`.
    - `qd`: their rates q' (nq,), rad/s or m/s.
    - `qdd`: their accelerations q'' (nq,), rad/s² or m/s².
    - `loads`: the loads of ``Q_ext``; default: the model's own.
    - `method`: ``"recursive"`` (default: `jaxmb._rigid_body`'s pass), ``"autodiff"``
      (Lagrangian by `jax.jacfwd`) or ``"matrix_calculus"`` (Ehsani's Kronecker-product
      formulas); three independent routes to the same values.

    **Returns:**

    An `InverseDynamicsTerms` of `(nq,)` arrays, N m or N.
    """
    q = eager_finite_vector(model, q, "inverse_dynamics_terms", "q")
    qd = eager_finite_vector(model, qd, "inverse_dynamics_terms", "qd", dtype=q.dtype)
    qdd = eager_finite_vector(model, qdd, "inverse_dynamics_terms", "qdd", dtype=q.dtype)
    _check_method(method)
    return _inverse_dynamics_terms(model, q, qd, qdd, model.loads if loads is None else tuple(loads), method=method)


@compiled_on_model
def _inverse_dynamics_terms(model: Model, q, qd, qdd, loads, *, method: Method):
    inertial = _mass_matrix(model, q, method=method) @ qdd
    velocity = _velocity_forces(model, q, qd, method=method)
    gravity = -_gravity_forces(model, q, method=method)
    external = -_applied_forces(model, q, loads)
    return InverseDynamicsTerms(inertial, velocity, gravity, external, inertial + velocity + gravity + external)


def inverse_dynamics(model: Model, q, qd, qdd, *, method: Method = "recursive") -> Float[Array, " nq"]:
    """Generalized force ``tau = M q'' + bias - Q_ext`` that produces ``q''`` (Ehsani 2016,
    Eq. 198); the recursive route evaluates it in one pass with ``f'' = J q'' + q'ᵀ H q'``
    (the recursive Newton-Euler algorithm projected on ``q``).

    **Arguments:**

    - `model`: the `jaxmb.Model`.
    - `q`: the coordinates (nq,), rad or m, in the order of `model.coordinate_names`.
    - `qd`: their rates q' (nq,), rad/s or m/s.
    - `qdd`: their accelerations q'' (nq,), rad/s² or m/s².
    - `method`: ``"recursive"`` (default: `jaxmb._rigid_body`'s pass), ``"autodiff"``
      (Lagrangian by `jax.jacfwd`) or ``"matrix_calculus"`` (Ehsani's Kronecker-product
      formulas); three independent routes to the same values.

    **Returns:**

    `(nq,)`, N m or N.
    """
    q = eager_finite_vector(model, q, "inverse_dynamics", "q")
    qd = eager_finite_vector(model, qd, "inverse_dynamics", "qd", dtype=q.dtype)
    qdd = eager_finite_vector(model, qdd, "inverse_dynamics", "qdd", dtype=q.dtype)
    return _inverse_dynamics(model, q, qd, qdd, method=method)


@compiled_on_model
@batches_in_chunks
def _inverse_dynamics(model: Model, q, qd, qdd, *, method: Method):
    if method == "recursive":
        tau = _recursive_inverse_dynamics(model, q, qd, qdd)
    else:
        tau = mass_matrix(model, q, method=method) @ qdd + bias_forces(model, q, qd, method=method)
    if model.loads:
        tau = tau - generalized_forces(model, q)
    return tau


def inverse_dynamics_series(model: Model, q, qd, qdd, *, loads=None, method: Method = "recursive") -> InverseDynamicsTerms:
    """`inverse_dynamics_terms` over time series (Cesari et al. 2001, Eq. 24), vectorised
    with `jax.vmap`.

    **Arguments:**

    - `model`: the `jaxmb.Model`.
    - `q`, `qd`, `qdd`: (T, nq) coordinates, rates and accelerations (SI, rad).
    - `loads`: the loads of ``Q_ext``; default: the model's own.
    - `method`: ``"recursive"`` (default: `jaxmb._rigid_body`'s pass), ``"autodiff"``
      (Lagrangian by `jax.jacfwd`) or ``"matrix_calculus"`` (Ehsani's Kronecker-product
      formulas); three independent routes to the same values.

    **Returns:**

    An `InverseDynamicsTerms` of `(T, nq)` arrays, N m or N.
    """
    q, qd, qdd = (jnp.asarray(x) for x in (q, qd, qdd))
    if not (q.ndim == 2 and q.shape[1] == model.nq and qd.shape == q.shape and qdd.shape == q.shape):
        raise ModelError(f"inverse_dynamics_series: q, qd and qdd must each have shape (T, nq) with nq = "
                         f"{model.nq} for model {model.name!r}, got {q.shape}, {qd.shape} and {qdd.shape}.")
    return jax.vmap(lambda a, b, c: inverse_dynamics_terms(model, a, b, c, loads=loads, method=method))(q, qd, qdd)


def kinetic_energy(model: Model, q, qd) -> Float[Array, ""]:
    """Kinetic energy ``T = Σ_i ½ m_i |v_{c,i}|² + ½ ω_iᵀ I_i ω_i`` from body velocities (not
    from ``M``: an independent check of ``T = ½ q'ᵀ M q'``).

    **Arguments:**

    - `model`: the `jaxmb.Model`.
    - `q`: the coordinates (nq,), rad or m, in the order of `model.coordinate_names`.
    - `qd`: their rates q' (nq,), rad/s or m/s.

    **Returns:**

    A scalar, J.
    """
    q = eager_finite_vector(model, q, "kinetic_energy", "q")
    qd = eager_finite_vector(model, qd, "kinetic_energy", "qd", dtype=q.dtype)
    return _kinetic_energy(model, q, qd)


@compiled_on_model
def _kinetic_energy(model: Model, q, qd):
    vc = jax.jvp(lambda x: _com_positions(model, x), (q,), (qd,))[1]
    w = body_angular_velocities(model, q, qd)
    rot = body_transforms(model, q)[:, :3, :3]
    masses = jnp.stack([b.mass for b in model.bodies]).astype(q.dtype)
    inertias = jnp.stack([b.inertia for b in model.bodies]).astype(q.dtype)
    wb = jnp.einsum("bji,bj->bi", rot, w)  # body axes
    return 0.5 * jnp.sum(masses * jnp.sum(vc**2, axis=1)) + 0.5 * jnp.einsum("bi,bij,bj->", wb, inertias, wb)


def potential_energy(model: Model, q) -> Float[Array, ""]:
    """Gravitational potential ``V = -Σ_i m_i g · r_{c,i}`` (zero at the ground origin), so that
    ``G = -∂V/∂q``.

    **Arguments:**

    - `model`: the `jaxmb.Model`.
    - `q`: the coordinates (nq,), rad or m, in the order of `model.coordinate_names`.

    **Returns:**

    A scalar, J.
    """
    q = eager_finite_vector(model, q, "potential_energy", "q")
    return _potential_energy(model, q)


@compiled_on_model
def _potential_energy(model: Model, q):
    masses = jnp.stack([b.mass for b in model.bodies]).astype(q.dtype)
    return -jnp.sum(masses * (_com_positions(model, q) @ model.gravity.astype(q.dtype)))
