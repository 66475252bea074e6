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

import jax.numpy as jnp
from jaxtyping import Array, Float

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


def B_matrices(model: Model, q) -> Float[Array, "nb 4 4"]:
    """``B_i = (0_i A4)ᵀ`` for every body."""
    _, poses, _ = _frames(model, q)
    return jnp.stack([p.T for p in poses])


def _W(poses, hats, j: int, i: int):
    """``W_ji = 0_j A4 Â_j j_i A4 = ∂(0_i A4)/∂f_j`` (Eq. 76)."""
    return poses[j] @ hats[j] @ _relative(poses, j, i)


def D_recursive(model: Model, q) -> list[Array]:
    """``D_i`` by the recursion of Eq. 74: ``D_i = (Â_iᵀ B_i) ⊗ ∇f_i + (pr(i)_i A4ᵀ ⊗ I) D_pr(i)``."""
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


def D_closed_form(model: Model, q) -> list[Array]:
    """``D_i = Σ_{j ∈ Anc(i) ∪ {i}} W_jiᵀ ⊗ ∇f_j`` (Eq. 75-76)."""
    _, poses, hats = _frames(model, q)
    grads = joint_gradients(model, q)
    return [sum(jnp.kron(_W(poses, hats, j, i).T, grads[j][:, None]) for j in _chain(model, i))
            for i in range(model.n_bodies)]


def D2_recursive(model: Model, q) -> list[Array]:
    """``D'_i`` by the recursion of Eq. 89, with Eq. 88 corrected (see docs/errata.md):

    ``D'_i = (Â_iᵀ ⊗ U)(D_i ⊗ ∇f_i) + W_iiᵀ ⊗ vec(H_i)
    + [(Â_iᵀ pr(i)_i A4ᵀ) ⊗ I ⊗ ∇f_i] D_pr(i) + (pr(i)_i A4ᵀ ⊗ I_{nq²}) D'_pr(i)``.
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


def D2_closed_form(model: Model, q) -> list[Array]:
    """Closed form of ``D'_i`` (Eq. 99, corrected):

    ``D'_i = Σ_{j,s} (∂²B_i/∂f_j∂f_s) ⊗ (∇f_j ⊗ ∇f_s) + Σ_j W_jiᵀ ⊗ vec(H_j)``,
    with ``∂²(0_i A4)/∂f_s∂f_j = 0_s A4 Â_s s_j A4 Â_j j_i A4`` for s an ancestor of
    (or equal to) j, and symmetric otherwise.
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
    """``J_i = ∫ r̄ r̄ᵀ dm`` with ``r̄ = [r; 1]`` about the body origin (Eq. 127-131).

    Its upper-left block is the second moment of mass ``∫ r rᵀ dm =
    m c cᵀ + ½ tr(I_c) 1 - I_c``, not the inertia tensor the text names (erratum).
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
    """``M_i = C1ᵀ (J_i ⊗ U_{nq,4}ᵀ)(D_i D_iᵀ ⊗ I_4)(I_4 ⊗ U_{nq,4}) C1`` (Eq. 145, as printed)."""
    return _kron_sandwich(pseudo_inertia(body, d.dtype), d, d, nq)


def body_velocity_matrix(body, d, d2, qd, nq) -> Float[Array, "nq nq"]:
    """``N_i`` (Eq. 147 corrected): Eq. 145 with one ``D_i`` replaced by
    ``Ḋ_i = (I_{4nq} ⊗ q'ᵀ) D'_i``, the time derivative of ``D_i``::

        N_i = C1ᵀ (J_i ⊗ U_{nq,4}ᵀ)(D_i Ḋ_iᵀ ⊗ I_4)(I_4 ⊗ U_{nq,4}) C1.

    The printed Eq. 147 repeats Eq. 145 (``D_i D_iᵀ``), which cannot be: N must
    vanish when ``q' = 0``.
    """
    ddot = jnp.kron(jnp.eye(4 * nq, dtype=d.dtype), qd[None, :]) @ d2
    return _kron_sandwich(pseudo_inertia(body, d.dtype), d, ddot, nq)


def body_gravity_forces(body, d, gravity, nq) -> Float[Array, " nq"]:
    """``G_i = m_i ({r_cmᵀ | 1} ⊗ I_nq) D_i {g; 0}`` (Eq. 187)."""
    dt = d.dtype
    rbar = jnp.concatenate([body.com.astype(dt), jnp.ones(1, dt)])
    gbar = jnp.concatenate([gravity.astype(dt), jnp.zeros(1, dt)])
    return body.mass * (jnp.kron(rbar[None, :], jnp.eye(nq, dtype=dt)) @ d @ gbar)


def mass_matrix(model: Model, q) -> Float[Array, "nq nq"]:
    """``M = Σ_i M_i`` (Eq. 189)."""
    q = jnp.asarray(q)
    ds = D_closed_form(model, q)
    return sum(body_mass_matrix(b, ds[i], model.nq) for i, b in enumerate(model.bodies))


def velocity_matrix(model: Model, q, qd) -> Float[Array, "nq nq"]:
    """``N(q, q') = Σ_i N_i`` (Eq. 190); the velocity term is ``N q'``."""
    q, qd = jnp.asarray(q), jnp.asarray(qd)
    ds = D_closed_form(model, q)
    d2s = D2_closed_form(model, q)
    return sum(body_velocity_matrix(b, ds[i], d2s[i], qd, model.nq) for i, b in enumerate(model.bodies))


def gravity_forces(model: Model, q) -> Float[Array, " nq"]:
    """``G = Σ_i G_i`` (Eq. 197)."""
    q = jnp.asarray(q)
    ds = D_closed_form(model, q)
    return sum(body_gravity_forces(b, ds[i], model.gravity, model.nq) for i, b in enumerate(model.bodies))
