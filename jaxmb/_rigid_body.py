"""The recursive rigid-body algorithm: the mass matrix and generalized forces in the
minimal coordinates ``q`` from one pass over the tree.

Every body's spatial Jacobian in ``q`` (body coordinates, 6 x nq) follows the tree
(Featherstone 2008, Sec. 4.2; Ehsani 2016, Eq. 145 in spatial form),

    J_i = X_i J_parent(i) + S_i ∇f_i,

and so do its velocity ``v_i = X_i v_parent + S_i f'_i`` and its acceleration
``a_i = X_i a_parent + S_i f''_i + v_i × S_i f'_i`` (the Newton-Euler forward pass,
gravity entering as the base acceleration). Then

    M(q) = Σ_i J_iᵀ I_i J_i,        F(q, q', f'') = Σ_i J_iᵀ (I_i a_i + v_i ×* I_i v_i),

with ``I_i`` the body's spatial inertia about its origin. With ``f'' = q'ᵀ H q'`` (the
velocity-product part of the joint accelerations) ``F`` is the bias ``N q' - G`` of
``M q'' + bias = tau``; with the full ``f'' = J q'' + q'ᵀ H q'`` it is the inverse
dynamics ``tau``. This is the composite-rigid-body algorithm and the recursive
Newton-Euler algorithm fused and projected on ``q``: the joint-space matrices
``M_f`` (n_joints²) never exist, which is what makes closed chains embedded in one
crank angle and OpenSim joints with coupled axes cheap.

Layout: a body carries the columns ``(v, a, J[:, pattern])`` where the pattern is the
set of coordinates its Jacobian can depend on (those of the joint functions on its
path); the other columns are zero by construction, so a tree costs what its sparsity
does. The six spatial components are separate arrays over those columns and all
arithmetic is elementwise: XLA's CPU compiler fuses such a pass into a few kernels,
where 6x6 products and (n, 6, k) stacks would run as many small ones.
"""

import functools

import numpy as np
import jax.numpy as jnp
from jaxtyping import Array, Float

from ._kinematics import _local_frames, motion_subspaces
from ._model import Model


def coordinate_pattern(model: Model) -> tuple[tuple[int, ...], ...]:
    """Per body, the coordinates its Jacobian in ``q`` can depend on: those of the joint
    functions on its path (:meth:`~jaxmb.AbstractJointFunction.coordinate_indices`),
    sorted. A joint-space tree (``f = q``) has one per joint along the path; a closed
    chain embedded in one crank angle has that one everywhere."""
    own = [set(j.function.coordinate_indices()) for j in model.joints]
    return tuple(tuple(sorted(set().union(own[i], *(own[a] for a in model.ancestors(i)))))
                 for i in range(model.n_bodies))


def _cross(a, b):
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


def _add(a, b):
    return tuple(x + y for x, y in zip(a, b))


def _take(x: Array, columns: tuple[int, ...]) -> Array:
    """``x[..., columns]`` by a static slice when the columns are a range."""
    lo = columns[0] if columns else 0
    if columns == tuple(range(lo, lo + len(columns))):
        return x[..., lo:lo + len(columns)]
    return x[..., np.asarray(columns)]


def _spread(x: Array, positions: tuple[int, ...], size: int) -> Array:
    """``y`` of length `size` with ``y[positions] = x`` and zeros elsewhere; a pad when the
    positions are a leading range (as along a chain), a static scatter otherwise."""
    if positions == tuple(range(len(positions))):
        return x if len(positions) == size else jnp.pad(x, [(0, size - len(positions))] + [(0, 0)] * (x.ndim - 1))
    return jnp.zeros((size,) + x.shape[1:], x.dtype).at[np.asarray(positions)].set(x)


def _embed(block: Array, columns: tuple[int, ...], nq: int) -> Array:
    """A (c, c) block on the coordinates `columns` as an (nq, nq) matrix."""
    lo = columns[0]
    if columns == tuple(range(lo, lo + len(columns))):
        return jnp.pad(block, ((lo, nq - lo - len(columns)),) * 2)
    idx = np.asarray(columns)
    return jnp.zeros((nq, nq), block.dtype).at[idx[:, None], idx[None, :]].set(block)


def _embed_vector(x: Array, columns: tuple[int, ...], nq: int) -> Array:
    lo = columns[0]
    if columns == tuple(range(lo, lo + len(columns))):
        return jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(lo, nq - lo - len(columns))])
    return jnp.zeros(x.shape[:-1] + (nq,), x.dtype).at[..., np.asarray(columns)].set(x)


def _inertia_times(mass, com, inertia, m):
    """Spatial inertia about the body origin times ``(ω, v)``: ``(I_c ω + c × l, l)`` with
    ``l = m (v + ω × c)``, for 6-tuples of arrays over columns."""
    w, v = m[:3], m[3:]
    lin = tuple(mass * x for x in _add(v, _cross(w, com)))
    ang = tuple(inertia[a][0] * w[0] + inertia[a][1] * w[1] + inertia[a][2] * w[2] for a in range(3))
    return _add(ang, _cross(com, lin)) + lin


def recursive_terms(model: Model, f: Float[Array, " nj"], fd: Float[Array, " nj"], fdd: Float[Array, " nj"],
                    jac: Float[Array, "nj nq"]):
    """``(M, F, (J_bodies, R, p))`` for joint values ``f``, rates ``f'``, accelerations
    ``f''`` and the joint Jacobian ``J = ∂f/∂q`` (module docstring).

    **Returns:** ``M`` (nq, nq) in kg m² (rotational) / kg; ``F`` (nq,) in N m / N; the
    bodies' spatial Jacobians in ``q`` (n_bodies, 6, nq; body coordinates) and the
    joints' local frames ``(R, p)`` (n_joints, 3, 3), (n_joints, 3), which applied
    loads reuse.
    """
    rot, trans = _local_frames(model, f)
    dtype = rot.dtype
    nq = jac.shape[1]
    n = model.n_bodies
    s = motion_subspaces(model, dtype)
    minus_g = -model.gravity.astype(dtype)
    patterns = coordinate_pattern(model)
    # Per body: v and a as six scalars each, J[:, pattern] as six arrays over the
    # pattern's columns (scalars keep the velocity pass free of pads and scatters).
    vel: list = [None] * n
    acc: list = [None] * n
    jcols: list = [None] * n
    for i in model.order:
        cols = patterns[i]
        si = tuple(s[i, k] for k in range(6))
        grad = _take(jac[i], cols)
        own = tuple(x * grad for x in si)
        vj = tuple(x * fd[i] for x in si)
        aj = tuple(x * fdd[i] for x in si)
        r = tuple(tuple(rot[i, a, b] for b in range(3)) for a in range(3))
        parent = model.parents[i]
        if parent < 0:
            # At rest on the ground with gravity as the base acceleration: (0, -Rᵀ g);
            # v × v_J vanishes since v = v_J.
            down = tuple(sum(r[a][k] * minus_g[a] for a in range(3)) for k in range(3))
            vel[i], acc[i], jcols[i] = vj, aj[:3] + _add(aj[3:], down), own
            continue
        p = tuple(trans[i, a] for a in range(3))

        def to_child(m, r=r, p=p):
            w, lin = m[:3], _add(m[3:], _cross(m[:3], p))
            return (tuple(r[0][k] * w[0] + r[1][k] * w[1] + r[2][k] * w[2] for k in range(3))
                    + tuple(r[0][k] * lin[0] + r[1][k] * lin[1] + r[2][k] * lin[2] for k in range(3)))

        v = _add(to_child(vel[parent]), vj)
        # The velocity-product acceleration v × v_J.
        prod = _cross(v[:3], vj[:3]) + _add(_cross(v[:3], vj[3:]), _cross(v[3:], vj[:3]))
        vel[i], acc[i] = v, _add(_add(to_child(acc[parent]), aj), prod)
        positions = tuple(cols.index(c) for c in patterns[parent])
        jcols[i] = tuple(_spread(x, positions, len(cols)) + o for x, o in zip(to_child(jcols[parent]), own))
    mass_sums: dict = {}
    force_sums: dict = {}
    for i, body in enumerate(model.bodies):
        inertia = body.inertia.astype(dtype)
        apply = functools.partial(_inertia_times, body.mass.astype(dtype), tuple(body.com.astype(dtype)[k] for k in range(3)),
                                  tuple(tuple(inertia[a, b] for b in range(3)) for a in range(3)))
        v, iv = vel[i], apply(vel[i])
        force = _add(apply(acc[i]), _add(_cross(v[:3], iv[:3]), _cross(v[3:], iv[3:])) + _cross(v[:3], iv[3:]))
        jb = jcols[i]
        ijb = apply(jb)
        m_i = sum(a[:, None] * b[None, :] for a, b in zip(jb, ijb))
        f_i = sum(a * y for a, y in zip(jb, force))
        key = patterns[i]
        if key in mass_sums:
            mass_sums[key], force_sums[key] = mass_sums[key] + m_i, force_sums[key] + f_i
        else:
            mass_sums[key], force_sums[key] = m_i, f_i
    zero_m, zero_f = jnp.zeros((nq, nq), dtype), jnp.zeros(nq, dtype)
    mass = sum((_embed(b, k, nq) for k, b in mass_sums.items() if k), zero_m)
    forces = sum((_embed_vector(b, k, nq) for k, b in force_sums.items() if k), zero_f)
    jacobians = jnp.stack([_embed_vector(jnp.stack(jcols[i]), patterns[i], nq)
                           if patterns[i] else jnp.zeros((6, nq), dtype) for i in range(n)])
    return mass, forces, (jacobians, rot, trans)
