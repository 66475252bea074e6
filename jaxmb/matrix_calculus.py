"""Ehsani's route: the matrix-calculus formulas of Ehsani (2016), implemented as printed (errata fixed).

This module is the reference implementation of Ehsani's "Empirically-based
multibody dynamics" (2016), kept readable against the paper: Kronecker
products of size ``16 nq``, Python loops over ancestors. It is slow by design;
:mod:`jaxmb` uses the recursive route by default and the tests check all three
routes against one another. Corrections to the printed equations are listed
in docs/errata.md.

Notation: ``B_i = (0_i A4)ᵀ`` (4x4); ``D_i = ∂B_i/∂q`` (4 nq x 4) and
``D'_i = ∂²B_i/∂q²`` (4 nq² x 4) in the layout of Definition 1 (Eq. 3), i.e.
``D_i[r nq + a, c] = ∂B_rc/∂q_a`` and ``D'_i[(r nq + a) nq + b, c] = ∂²B_rc/∂q_a∂q_b``.
"""

import functools

import jax.numpy as jnp
from jaxtyping import Array, Float

from ._checks import eager_finite_vector
from ._kinematics import joint_gradients, joint_hessians, joint_transforms, joint_values
from ._model import Model
from ._spatial import commutation, vec

__all__ = [
    "B_matrices",
    "D_recursive",
    "D_closed_form",
    "D2_recursive",
    "D2_closed_form",
    "pseudo_inertia",
    "body_mass_matrix",
    "body_velocity_matrix",
    "body_gravity_forces",
    "mass_matrix",
    "velocity_matrix",
    "gravity_forces",
]


def _coordinates(fn):
    """Check a public function's `q` (and `qd`) against the model, naming the function
    (`eager_finite_vector`: shape, dtype, and finite where the values are at hand);
    before, a wrong shape surfaced as ``joint_values:`` or as a raw ``dot_general`` error."""
    @functools.wraps(fn)
    def wrapper(model, q, *rest):
        caller = f"matrix_calculus.{fn.__name__}"
        q = eager_finite_vector(model, q, caller, "q")
        rest = tuple(eager_finite_vector(model, x, caller, "qd", dtype=q.dtype) for x in rest)
        return fn(model, q, *rest)

    return wrapper


def _frames(model: Model, q):
    f = joint_values(model, q)
    local = joint_transforms(model, f)  # pr(i)_i A4
    poses = [None] * model.n_bodies
    for i in model.order:
        p = model.parents[i]
        poses[i] = local[i] if p < 0 else poses[p] @ local[i]
    hats = [j.joint_matrix().astype(local.dtype) for j in model.joints]
    return local, poses, hats


def _chain(model: Model, i: int) -> tuple[int, ...]:
    """``Anc(i) ∪ {i}``, root first."""
    return model.ancestors(i) + (i,)


def _relative(poses, a: int, b: int):
    """``a_b A4``: frame b in frame a (a an ancestor of b, or a = -1 for ground)."""
    pb = poses[b]
    if a < 0:
        return pb
    pa = poses[a]
    ra, pa_t = pa[:3, :3], pa[:3, 3]
    inv = jnp.eye(4, dtype=pb.dtype).at[:3, :3].set(ra.T).at[:3, 3].set(-ra.T @ pa_t)
    return inv @ pb


@_coordinates
def B_matrices(model: Model, q) -> Float[Array, "nb 4 4"]:
    """``B_i = (0_i A4)ᵀ`` for every body: the transposed ground-from-body transforms (Ehsani 2016, Eq. 43).

    Ehsani writes the kinematics in terms of ``B_i`` so that its derivatives stack in
    the layout of Definition 1 (Eq. 3); ``0_i A4`` is the pose of Eq. 40.

    **Arguments:**

    - `model`: the model.
    - `q`: `(nq,)` generalized coordinates (rad or m).

    **Returns:**

    `(n_bodies, 4, 4)` matrices ``B_i`` (translation row in m), in the order of
    `model.body_names`.
    """
    _, poses, _ = _frames(model, q)
    return jnp.stack([p.T for p in poses])


def _W(poses, hats, j: int, i: int):
    """``W_ji = 0_j A4 Â_j j_i A4 = ∂(0_i A4)/∂f_j`` (Eq. 76)."""
    return poses[j] @ hats[j] @ _relative(poses, j, i)


@_coordinates
def D_recursive(model: Model, q) -> list[Array]:
    """``D_i = ∂B_i/∂q`` of every body by the recursion of Ehsani (2016), Eq. 74.

    ``D_i = (Â_iᵀ B_i) ⊗ ∇f_i + (pr(i)_i A4ᵀ ⊗ I_nq) D_pr(i)``, with the joint matrix
    ``Â_i`` of Eq. 69-71, parents first.

    **Arguments:**

    - `model`: the model.
    - `q`: `(nq,)` generalized coordinates (rad or m).

    **Returns:**

    A list of `n_bodies` arrays of shape `(4 nq, 4)` in the layout of Definition 1
    (``D_i[r nq + a, c] = ∂B_rc/∂q_a``), in the order of `model.body_names` (translation
    row in m per unit of ``q``, the rest per unit of ``q``).
    """
    local, poses, hats = _frames(model, q)
    grads = joint_gradients(model, q)
    nq = model.nq
    eye = jnp.eye(nq, dtype=local.dtype)
    out = [None] * model.n_bodies
    for i in model.order:
        p = model.parents[i]
        d = jnp.kron(hats[i].T @ poses[i].T, grads[i][:, None])
        if p >= 0:
            d = d + jnp.kron(local[i].T, eye) @ out[p]
        out[i] = d
    return out


@_coordinates
def D_closed_form(model: Model, q) -> list[Array]:
    """``D_i = ∂B_i/∂q`` of every body in closed form (Ehsani 2016, Eq. 75-76).

    ``D_i = Σ_{j ∈ Anc(i) ∪ {i}} W_jiᵀ ⊗ ∇f_j`` with ``W_ji = 0_j A4 Â_j j_i A4``, the
    derivative of ``0_i A4`` with respect to the joint variable ``f_j``.

    **Arguments:**

    - `model`: the model.
    - `q`: `(nq,)` generalized coordinates (rad or m).

    **Returns:**

    A list of `n_bodies` arrays of shape `(4 nq, 4)`, equal to
    [`D_recursive`][jaxmb.matrix_calculus.D_recursive]'s (same layout and units).
    """
    _, poses, hats = _frames(model, q)
    grads = joint_gradients(model, q)
    return [sum(jnp.kron(_W(poses, hats, j, i).T, grads[j][:, None]) for j in _chain(model, i))
            for i in range(model.n_bodies)]


@_coordinates
def D2_recursive(model: Model, q) -> list[Array]:
    """``D'_i = ∂²B_i/∂q²`` of every body by the recursion of Ehsani (2016), Eq. 89 (corrected).

    ``D'_i = (Â_iᵀ ⊗ U)(D_i ⊗ ∇f_i) + W_iiᵀ ⊗ vec(H_i)
    + [(Â_iᵀ pr(i)_i A4ᵀ) ⊗ I ⊗ ∇f_i] D_pr(i) + (pr(i)_i A4ᵀ ⊗ I_{nq²}) D'_pr(i)``,
    ``U = U_{nq,nq}`` the commutation matrix. The printed Eq. 88 has ``W_iiᵀ`` where
    ``Â_iᵀ pr(i)_i A4ᵀ`` belongs (see the Errata page).

    **Arguments:**

    - `model`: the model.
    - `q`: `(nq,)` generalized coordinates (rad or m).

    **Returns:**

    A list of `n_bodies` arrays of shape `(4 nq², 4)` in the layout
    ``D'_i[(r nq + a) nq + b, c] = ∂²B_rc/∂q_a∂q_b``, in the order of `model.body_names`.
    """
    local, poses, hats = _frames(model, q)
    grads = joint_gradients(model, q)
    hess = joint_hessians(model, q)
    nq = model.nq
    dt = local.dtype
    u = commutation(nq, nq, dt)
    eye = jnp.eye(nq, dtype=dt)
    eye2 = jnp.eye(nq * nq, dtype=dt)
    d1 = D_recursive(model, q)
    out = [None] * model.n_bodies
    for i in model.order:
        p = model.parents[i]
        g = grads[i][:, None]
        w_ii = hats[i].T @ poses[i].T
        d2 = jnp.kron(hats[i].T, u) @ jnp.kron(d1[i], g) + jnp.kron(w_ii, vec(hess[i])[:, None])
        if p >= 0:
            d2 = d2 + jnp.kron(jnp.kron(hats[i].T @ local[i].T, eye), g) @ d1[p]
            d2 = d2 + jnp.kron(local[i].T, eye2) @ out[p]
        out[i] = d2
    return out


@_coordinates
def D2_closed_form(model: Model, q) -> list[Array]:
    """``D'_i = ∂²B_i/∂q²`` of every body in closed form (Ehsani 2016, Eq. 99, corrected).

    ``D'_i = Σ_{j,s} (∂²B_i/∂f_j∂f_s) ⊗ (∇f_j ⊗ ∇f_s) + Σ_j W_jiᵀ ⊗ vec(H_j)``, with
    ``∂²(0_i A4)/∂f_s∂f_j = 0_s A4 Â_s s_j A4 Â_j j_i A4`` for s an ancestor of (or
    equal to) j, and symmetric otherwise; the sums run over ``Anc(i) ∪ {i}``. The
    printed Eq. 96a-99 use a ``W̄_kji`` whose index k is undefined (see the Errata page).

    **Arguments:**

    - `model`: the model.
    - `q`: `(nq,)` generalized coordinates (rad or m).

    **Returns:**

    A list of `n_bodies` arrays of shape `(4 nq², 4)`, equal to
    [`D2_recursive`][jaxmb.matrix_calculus.D2_recursive]'s (same layout).
    """
    _, poses, hats = _frames(model, q)
    grads = joint_gradients(model, q)
    hess = joint_hessians(model, q)
    out = []
    for i in range(model.n_bodies):
        chain = _chain(model, i)
        total = 0.0
        for a, j in enumerate(chain):
            total = total + jnp.kron(_W(poses, hats, j, i).T, vec(hess[j])[:, None])
            for b, s in enumerate(chain):
                first, second = (s, j) if b <= a else (j, s)
                second_partial = poses[first] @ hats[first] @ _relative(poses, first, second) @ hats[second] @ _relative(poses, second, i)
                total = total + jnp.kron(second_partial.T, jnp.kron(grads[j], grads[s])[:, None])
        out.append(total)
    return out


def pseudo_inertia(body, dtype=None) -> Float[Array, "4 4"]:
    """Pseudo-inertia ``J_i = ∫ r̄ r̄ᵀ dm`` of a body, ``r̄ = {r; 1}``, about its origin (Ehsani 2016, Eq. 127-131).

    ``J_i = [[∫ r rᵀ dm, m c], [m cᵀ, m]]``. Its upper-left block is the second moment
    of mass ``m c cᵀ + ½ tr(I_c) 1 - I_c``, not the inertia tensor the text of Eq. 131
    names (an erratum, see the Errata page).

    **Arguments:**

    - `body`: a [`jaxmb.Body`][jaxmb.Body] (mass in kg, centre of mass `com` in m,
      inertia `inertia` about the centre of mass in kg m²).
    - `dtype`: cast the result to this dtype; default: the body's.

    **Returns:**

    `(4, 4)` symmetric matrix (kg m², kg m and kg blocks).
    """
    m, c, ic = body.mass, body.com, body.inertia
    second = m * jnp.outer(c, c) + 0.5 * jnp.trace(ic) * jnp.eye(3, dtype=ic.dtype) - ic
    top = jnp.concatenate([second, (m * c)[:, None]], axis=1)
    bot = jnp.concatenate([m * c, m[None]])[None, :]
    out = jnp.concatenate([top, bot], axis=0)
    return out if dtype is None else out.astype(dtype)


def _kron_sandwich(j4, left, right, nq):
    """``C1ᵀ (J ⊗ U_{nq,4}ᵀ) (left rightᵀ ⊗ I_4) (I_4 ⊗ U_{nq,4}) C1`` (Eq. 145)."""
    dt = left.dtype
    u = commutation(nq, 4, dt)
    c1 = jnp.kron(vec(jnp.eye(4, dtype=dt))[:, None], jnp.eye(nq, dtype=dt))
    return c1.T @ jnp.kron(j4, u.T) @ jnp.kron(left @ right.T, jnp.eye(4, dtype=dt)) @ jnp.kron(jnp.eye(4, dtype=dt), u) @ c1


def body_mass_matrix(body, d, nq) -> Float[Array, "nq nq"]:
    """One body's share ``M_i`` of the mass matrix (Ehsani 2016, Eq. 145, as printed).

    ``M_i = C1ᵀ (J_i ⊗ U_{nq,4}ᵀ)(D_i D_iᵀ ⊗ I_4)(I_4 ⊗ U_{nq,4}) C1`` with
    ``C1 = vec(I_4) ⊗ I_nq`` (Eq. 142) and the pseudo-inertia ``J_i`` (Eq. 131).

    **Arguments:**

    - `body`: the [`jaxmb.Body`][jaxmb.Body].
    - `d`: `(4 nq, 4)` its ``D_i`` (from [`D_closed_form`][jaxmb.matrix_calculus.D_closed_form]
      or [`D_recursive`][jaxmb.matrix_calculus.D_recursive]).
    - `nq`: the number of generalized coordinates.

    **Returns:**

    `(nq, nq)` symmetric matrix (kg m² for rotational coordinates, kg for
    translational ones).
    """
    return _kron_sandwich(pseudo_inertia(body, d.dtype), d, d, nq)


def body_velocity_matrix(body, d, d2, qd, nq) -> Float[Array, "nq nq"]:
    """One body's share ``N_i`` of the velocity matrix (Ehsani 2016, Eq. 147, corrected).

    Eq. 145 with one ``D_i`` replaced by its time derivative ``Ḋ_i = (I_{4nq} ⊗ q'ᵀ) D'_i``:

        N_i = C1ᵀ (J_i ⊗ U_{nq,4}ᵀ)(D_i Ḋ_iᵀ ⊗ I_4)(I_4 ⊗ U_{nq,4}) C1.

    The printed Eq. 147 repeats Eq. 145 (``D_i D_iᵀ``), which cannot be: ``N`` must
    vanish when ``q' = 0`` (see the Errata page).

    **Arguments:**

    - `body`: the [`jaxmb.Body`][jaxmb.Body].
    - `d`: `(4 nq, 4)` its ``D_i``.
    - `d2`: `(4 nq², 4)` its ``D'_i`` (from
      [`D2_closed_form`][jaxmb.matrix_calculus.D2_closed_form] or
      [`D2_recursive`][jaxmb.matrix_calculus.D2_recursive]).
    - `qd`: `(nq,)` generalized velocities (rad/s or m/s).
    - `nq`: the number of generalized coordinates.

    **Returns:**

    `(nq, nq)` matrix ``N_i`` such that ``N_i q'`` is the body's Coriolis and
    centrifugal generalized force (N m or N).
    """
    ddot = jnp.kron(jnp.eye(4 * nq, dtype=d.dtype), qd[None, :]) @ d2
    return _kron_sandwich(pseudo_inertia(body, d.dtype), d, ddot, nq)


def body_gravity_forces(body, d, gravity, nq) -> Float[Array, " nq"]:
    """One body's share ``G_i`` of the generalized gravity force (Ehsani 2016, Eq. 187).

    ``G_i = m_i ({i_r_cmᵀ | 1} ⊗ I_nq) D_i {g; 0}``.

    **Arguments:**

    - `body`: the [`jaxmb.Body`][jaxmb.Body] (mass in kg, centre of mass in m).
    - `d`: `(4 nq, 4)` its ``D_i``.
    - `gravity`: `(3,)` gravitational acceleration in ground axes (m/s²), e.g.
      `model.gravity`.
    - `nq`: the number of generalized coordinates.

    **Returns:**

    `(nq,)` generalized force (N m or N), on the right-hand side of Eq. 198.
    """
    dt = d.dtype
    rbar = jnp.concatenate([body.com.astype(dt), jnp.ones(1, dt)])
    gbar = jnp.concatenate([gravity.astype(dt), jnp.zeros(1, dt)])
    return body.mass * (jnp.kron(rbar[None, :], jnp.eye(nq, dtype=dt)) @ d @ gbar)


@_coordinates
def mass_matrix(model: Model, q) -> Float[Array, "nq nq"]:
    """Mass matrix ``M(q) = Σ_i M_i`` by Ehsani's matrix calculus (Ehsani 2016, Eq. 189).

    Each ``M_i`` is Eq. 145 ([`body_mass_matrix`][jaxmb.matrix_calculus.body_mass_matrix])
    with ``D_i`` from the closed form (Eq. 75). The reference for
    [`jaxmb.mass_matrix`][jaxmb.mass_matrix], which computes the same matrix faster.

    **Arguments:**

    - `model`: the model.
    - `q`: `(nq,)` generalized coordinates (rad or m).

    **Returns:**

    `(nq, nq)` symmetric positive-definite matrix (kg m² for rotational coordinates,
    kg for translational ones).
    """
    q = jnp.asarray(q)
    ds = D_closed_form(model, q)
    return sum(body_mass_matrix(b, ds[i], model.nq) for i, b in enumerate(model.bodies))


@_coordinates
def velocity_matrix(model: Model, q, qd) -> Float[Array, "nq nq"]:
    """Velocity matrix ``N(q, q') = Σ_i N_i`` by Ehsani's matrix calculus (Ehsani 2016, Eq. 190).

    Each ``N_i`` is Eq. 147 as corrected
    ([`body_velocity_matrix`][jaxmb.matrix_calculus.body_velocity_matrix]); the
    velocity term of the equations of motion (Eq. 198) is ``N q'``.

    **Arguments:**

    - `model`: the model.
    - `q`: `(nq,)` generalized coordinates (rad or m).
    - `qd`: `(nq,)` generalized velocities (rad/s or m/s).

    **Returns:**

    `(nq, nq)` matrix (kg m²/s for rotational coordinates, kg/s for translational
    ones); ``N q'`` is in N m or N.
    """
    q, qd = jnp.asarray(q), jnp.asarray(qd)
    ds = D_closed_form(model, q)
    d2s = D2_closed_form(model, q)
    return sum(body_velocity_matrix(b, ds[i], d2s[i], qd, model.nq) for i, b in enumerate(model.bodies))


@_coordinates
def gravity_forces(model: Model, q) -> Float[Array, " nq"]:
    """Generalized gravity force ``G(q) = Σ_i G_i`` by Ehsani's matrix calculus (Ehsani 2016, Eq. 197).

    Each ``G_i`` is Eq. 187
    ([`body_gravity_forces`][jaxmb.matrix_calculus.body_gravity_forces]). The
    reference for [`jaxmb.gravity_forces`][jaxmb.gravity_forces], with the same sign:
    ``G`` is on the right-hand side of Eq. 198.

    **Arguments:**

    - `model`: the model.
    - `q`: `(nq,)` generalized coordinates (rad or m).

    **Returns:**

    `(nq,)` generalized force (N m for rotational coordinates, N for translational ones).
    """
    q = jnp.asarray(q)
    ds = D_closed_form(model, q)
    return sum(body_gravity_forces(b, ds[i], model.gravity, model.nq) for i, b in enumerate(model.bodies))
