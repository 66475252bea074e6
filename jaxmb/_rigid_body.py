"""The rigid-body algorithms of the recursive route: one composite-rigid-body pass
(CRBA) for the mass matrix and one recursive Newton-Euler pass (RNEA) for the
forces, both in the joint variables ``f``, and their embedding in the coordinates
``q`` through ``J = ∂f/∂q`` and the Hessians of the joint functions.

With ``f' = J q'`` and ``f'' = J q'' + q'ᵀ H q'`` the equations of motion in ``q``
(Ehsani 2016, Eq. 198) are

``M_q = Jᵀ M_f J``,  ``bias_q = Jᵀ RNEA(f, J q', q'ᵀ H q')``,

and the inverse dynamics is ``Jᵀ RNEA(f, f', f'')`` (Featherstone, *Rigid Body
Dynamics Algorithms*, 2008, Tables 5.1 and 6.2). Applied body wrenches enter the
RNEA's backward pass, so a load's generalized force is ``Jᵀ`` times that pass.

Spatial vectors are in body coordinates, the angular part first; spatial inertias
are kept as ``(m, h = m c, I_o)`` (mass, first moment, rotational inertia about the
body origin) and transforms as the joints' local frames ``(R, p)``, so that no 6x6
matrix is formed: every step is a few fused products and sums.
"""

import jax.numpy as jnp
from jaxtyping import Array, Float

from ._kinematics import _local_frames, motion_subspaces
from ._model import Model
from ._spatial import cross, cross_force, cross_motion, force_to_parent, motion_to_child, small_matmul, small_matvec


def body_inertias(model: Model, dtype):
    """``(m, h, I_o)`` (n,), (n, 3), (n, 3, 3) of every body about its own origin:
    ``h = m c`` and ``I_o = I_c + m (|c|² 1 - c cᵀ)`` (parallel axes)."""
    mass = jnp.stack([b.mass for b in model.bodies]).astype(dtype)
    com = jnp.stack([b.com for b in model.bodies]).astype(dtype)
    inertia = jnp.stack([b.inertia for b in model.bodies]).astype(dtype)
    eye = jnp.eye(3, dtype=dtype)
    shift = jnp.sum(com * com, axis=-1)[:, None, None] * eye - com[:, :, None] * com[:, None, :]
    return mass, mass[:, None] * com, inertia + mass[:, None, None] * shift


def _apply_inertia(mass, h, inertia, m):
    """Spatial inertia times a motion vector ``(ω, v)``: ``(I_o ω + h × v, m v + ω × h)``."""
    w, v = m[..., :3], m[..., 3:]
    return jnp.concatenate([small_matvec(inertia, w) + cross(h, v), mass[..., None] * v + cross(w, h)], axis=-1)


def _inertia_to_parent(rot, trans, mass, h, inertia):
    """A spatial inertia ``(m, h, I_o)`` of child coordinates in parent coordinates, for
    the child frame at ``(R, p)``: ``h' = R h + m p`` and
    ``I' = R I_o Rᵀ + m (|p|² 1 - p pᵀ) + 2 (p·h_R) 1 - h_R pᵀ - p h_Rᵀ`` with
    ``h_R = R h``."""
    hr = small_matvec(rot, h)
    rir = small_matmul(small_matmul(rot, inertia), rot.T)
    eye = jnp.eye(3, dtype=rot.dtype)
    outer = trans[:, None] * hr[None, :]
    extra = (mass * jnp.sum(trans * trans) + 2.0 * jnp.sum(trans * hr)) * eye - mass * trans[:, None] * trans[None, :]
    return hr + mass * trans, rir + extra - outer - outer.T


def joint_space_mass_matrix(model: Model, f: Float[Array, " nj"]) -> Float[Array, "nj nj"]:
    """The composite-rigid-body algorithm: ``M_f`` (nj, nj) in the joint variables.

    Composite inertias are accumulated leaves-first, ``I^c_λ(i) += X_iᵀ I^c_i X_i``; then
    ``M_f[i, i] = S_iᵀ I^c_i S_i`` and, carrying ``F = I^c_i S_i`` towards the root,
    ``M_f[i, j] = M_f[j, i] = S_jᵀ X_{j←i}ᵀ F`` for every ancestor j of i."""
    rot, trans = _local_frames(model, f)
    dtype = rot.dtype
    n = model.n_bodies
    s = motion_subspaces(model, dtype)
    mass, h, inertia = body_inertias(model, dtype)
    comp = [[mass[i], h[i], inertia[i]] for i in range(n)]
    for i in reversed(model.order):
        p = model.parents[i]
        if p >= 0:
            hp, ip = _inertia_to_parent(rot[i], trans[i], *comp[i])
            comp[p] = [comp[p][0] + comp[i][0], comp[p][1] + hp, comp[p][2] + ip]
    # Entries are collected and stacked once: per-entry `.at[].set` would copy the
    # whole matrix n² times (and per batch element under vmap).
    zero = jnp.zeros((), dtype=dtype)
    rows = [[zero] * n for _ in range(n)]
    for i in range(n):
        force = _apply_inertia(*comp[i], s[i])
        rows[i][i] = jnp.sum(s[i] * force)
        j = i
        while model.parents[j] >= 0:
            force = force_to_parent(rot[j], trans[j], force)
            j = model.parents[j]
            rows[i][j] = rows[j][i] = jnp.sum(s[j] * force)
    return jnp.stack([jnp.stack(r) for r in rows])


def joint_space_forces(model: Model, f, fd, fdd, *, gravity: bool = True,
                       wrenches: dict[int, Array] | None = None) -> Float[Array, " nj"]:
    """Recursive Newton-Euler: ``tau_f = M_f f'' + c_f(f, f') - G_f - Q_f`` (nj,).

    Forward pass ``v_i = X_i v_λ(i) + S_i f'_i``,
    ``a_i = X_i a_λ(i) + S_i f''_i + v_i × S_i f'_i`` from the ground at rest with the
    base acceleration ``(0, -g)`` (gravity on) or 0; body forces
    ``F_i = I_i a_i + v_i ×* I_i v_i - W_i``; backward pass ``tau_i = S_iᵀ F_i``,
    ``F_λ(i) += X_iᵀ F_i``.

    **Arguments:**

    - `f`, `fd`, `fdd`: joint variables and their first and second time derivatives (nj,).
    - `gravity`: include the gravity term ``-G_f``.
    - `wrenches`: applied wrenches ``W_i = (n, f)`` (6,) on bodies (by body index), about
      the body origin in body axes (N m, N); they enter with the sign of ``-Q_f``.
    """
    rot, trans = _local_frames(model, f)
    dtype = rot.dtype
    n = model.n_bodies
    s = motion_subspaces(model, dtype)
    mass, h, inertia = body_inertias(model, dtype)
    g = model.gravity.astype(dtype)
    wrenches = {} if wrenches is None else wrenches
    moving = [None] * n  # (v, a) per body
    forces = [None] * n
    for i in model.order:
        p = model.parents[i]
        vj = s[i] * fd[i]
        if p < 0:
            # At rest on the ground: v × v_J vanishes (v = v_J), and the base
            # acceleration (0, -g) in child axes is (0, -Rᵀ g).
            v = vj
            a = s[i] * fdd[i]
            if gravity:
                a = a + jnp.concatenate([jnp.zeros(3, dtype), -small_matvec(rot[i].T, g)])
        else:
            vp, ap = moving[p]
            v = motion_to_child(rot[i], trans[i], vp) + vj
            a = motion_to_child(rot[i], trans[i], ap) + s[i] * fdd[i] + cross_motion(v, vj)
        moving[i] = (v, a)
        body = (mass[i], h[i], inertia[i])
        forces[i] = _apply_inertia(*body, a) + cross_force(v, _apply_inertia(*body, v))
        if i in wrenches:
            forces[i] = forces[i] - wrenches[i]
    return _backward(model, rot, trans, s, forces)


def joint_space_wrench_forces(model: Model, f, wrenches: dict[int, Array]) -> Float[Array, " nj"]:
    """``Q_f`` (nj,): the joint-space generalized force of wrenches ``W_i`` (6,) applied
    to bodies (by body index; about the body origin, body axes), ``Q_f = Σ_i J_iᵀ W_i``,
    by the RNEA's backward pass alone."""
    rot, trans = _local_frames(model, f)
    dtype = rot.dtype
    zero = jnp.zeros(6, dtype)
    forces = [wrenches.get(i, zero).astype(dtype) for i in range(model.n_bodies)]
    return _backward(model, rot, trans, motion_subspaces(model, dtype), forces)


def _backward(model: Model, rot, trans, s, forces):
    forces = list(forces)
    tau = [None] * model.n_bodies
    for i in reversed(model.order):
        tau[i] = jnp.sum(s[i] * forces[i])
        p = model.parents[i]
        if p >= 0:
            forces[p] = forces[p] + force_to_parent(rot[i], trans[i], forces[i])
    return jnp.stack(tau)
