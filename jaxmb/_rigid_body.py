"""The rigid-body algorithms of the recursive route: one composite-rigid-body pass
(CRBA) for the mass matrix and one recursive Newton-Euler pass (RNEA) for the
forces, both in the joint variables ``f``; :mod:`jaxmb._dynamics` embeds them in the
coordinates ``q`` through ``J = ∂f/∂q`` and the Hessians of the joint functions.

With ``f' = J q'`` and ``f'' = J q'' + q'ᵀ H q'`` the equations of motion in ``q``
(Ehsani 2016, Eq. 198) are

``M_q = Jᵀ M_f J``,  ``bias_q = Jᵀ RNEA(f, J q', q'ᵀ H q')``,

and the inverse dynamics is ``Jᵀ RNEA(f, f', f'')`` (Featherstone, *Rigid Body
Dynamics Algorithms*, 2008, Tables 5.1 and 6.2). Applied body wrenches enter the
RNEA's backward pass, so a load's generalized force is ``Jᵀ`` times that pass.

Spatial vectors are in body coordinates, the angular part first (:mod:`jaxmb._spatial`).
"""

import jax.numpy as jnp
from jaxtyping import Array, Float

from ._kinematics import _local_frames, motion_subspaces
from ._model import Model
from ._spatial import cross_force, cross_motion, motion_transform, small_matvec, spatial_inertia


def _tree_arrays(model: Model, f):
    """Per joint: the local frames ``(R, p)``, the motion transforms ``X`` (n, 6, 6), the
    motion subspaces ``S`` (n, 6) and the bodies' spatial inertias (n, 6, 6)."""
    rot, trans = _local_frames(model, f)
    dtype = rot.dtype
    mass = jnp.stack([b.mass for b in model.bodies]).astype(dtype)
    com = jnp.stack([b.com for b in model.bodies]).astype(dtype)
    inertia = jnp.stack([b.inertia for b in model.bodies]).astype(dtype)
    return (rot, trans, motion_transform(rot, trans), motion_subspaces(model, dtype),
            spatial_inertia(mass, com, inertia))


def joint_space_mass_matrix(model: Model, f: Float[Array, " nj"]) -> Float[Array, "nj nj"]:
    """The composite-rigid-body algorithm: ``M_f`` (nj, nj) in the joint variables.

    Composite inertias are accumulated leaves first, ``I^c_λ(i) += X_iᵀ I^c_i X_i``;
    then ``M_f[i, i] = S_iᵀ I^c_i S_i`` and, carrying ``F = I^c_i S_i`` towards the
    root, ``M_f[i, j] = M_f[j, i] = S_jᵀ X_{j←i}ᵀ F`` for every ancestor j of i."""
    _, _, xs, s, inertias = _tree_arrays(model, f)
    n = model.n_bodies
    composite = [inertias[i] for i in range(n)]
    for i in reversed(model.order):
        p = model.parents[i]
        if p >= 0:
            composite[p] = composite[p] + xs[i].T @ composite[i] @ xs[i]
    # Entries are collected and stacked once: per-entry `.at[].set` would copy the
    # whole matrix n² times (and per batch element under vmap).
    zero = jnp.zeros((), dtype=s.dtype)
    rows = [[zero] * n for _ in range(n)]
    for i in range(n):
        force = composite[i] @ s[i]
        rows[i][i] = s[i] @ force
        j = i
        while model.parents[j] >= 0:
            force = xs[j].T @ force
            j = model.parents[j]
            rows[i][j] = rows[j][i] = s[j] @ force
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
    rot, _, xs, s, inertias = _tree_arrays(model, f)
    dtype = s.dtype
    n = model.n_bodies
    g = model.gravity.astype(dtype)
    wrenches = {} if wrenches is None else wrenches
    vel, acc, forces = [None] * n, [None] * n, [None] * n
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
            v = xs[i] @ vel[p] + vj
            a = xs[i] @ acc[p] + s[i] * fdd[i] + cross_motion(v, vj)
        vel[i], acc[i] = v, a
        forces[i] = inertias[i] @ a + cross_force(v, inertias[i] @ v)
        if i in wrenches:
            forces[i] = forces[i] - wrenches[i]
    return _backward(model, xs, s, forces)


def joint_space_wrench_forces(model: Model, f, wrenches: dict[int, Array]) -> Float[Array, " nj"]:
    """``Q_f`` (nj,): the joint-space generalized force of wrenches ``W_i`` (6,) applied
    to bodies (by body index; about the body origin, body axes), ``Q_f = Σ_i J_iᵀ W_i``,
    by the RNEA's backward pass alone."""
    _, _, xs, s, _ = _tree_arrays(model, f)
    zero = jnp.zeros(6, s.dtype)
    return _backward(model, xs, s, [wrenches.get(i, zero).astype(s.dtype) for i in range(model.n_bodies)])


def _backward(model: Model, xs, s, forces):
    """The RNEA's backward pass: ``tau_i = S_iᵀ F_i``, ``F_λ(i) += X_iᵀ F_i``."""
    forces = list(forces)
    tau = [None] * model.n_bodies
    for i in reversed(model.order):
        tau[i] = s[i] @ forces[i]
        p = model.parents[i]
        if p >= 0:
            forces[p] = forces[p] + xs[i].T @ forces[i]
    return jnp.stack(tau)
