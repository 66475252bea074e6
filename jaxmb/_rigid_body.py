"""The recursive rigid-body algorithms behind `method="recursive"`: the joint-space
composite-rigid-body (CRBA) and recursive Newton-Euler (RNEA) algorithms (Featherstone
2008) in ground coordinates, one code for single states and batches, and the projected
forward pass that gives ``M_q`` and ``bias_q`` directly in ``q`` (Ehsani 2016, Eq. 145
in spatial form) where q is much smaller than f, level-wise, or for small models with
its values unrolled into scalars. Which route a model takes is one static choice
(`_projects`), the same for every public call of `jaxmb._dynamics`."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ._batching import batch_last
from ._kinematics import _local_frames, _stack_rows, motion_subspaces, tree_levels
from ._model import Model
from ._spatial import cross, cross_force, cross_motion, small_matmul, small_matvec


# ---------------------------------------------------------------------------
# Joint-space CRBA and RNEA in ground coordinates, written once for arrays whose
# leading axes are the state's and whose trailing axes (shape ``b``, possibly
# empty) are a batch of states (structure of arrays). Under `vmap`,
# `_batching.batch_last` calls them with the batch last, so that every product of
# small matrices is an elementwise product over the contiguous batch axis
# (vectorised across states) instead of a batched `dot` over 6 x 6 operands.
#
# The one recursion, the bodies' ground poses, is a `jax.lax.scan` over the bodies
# in a parents-first order (positions in that order index its table; the ground
# is an extra last row), so that the compiled program holds one body's step
# whatever the number of bodies: XLA otherwise inlines the small elementwise steps
# of an unrolled recursion into each other, and its compile time grows much faster
# than the model. Small models are unrolled (`_UNROLL`). In ground coordinates the
# rest needs no recursion: sums over a body's ancestors or its subtree are products
# with the constant matrix of the tree (Featherstone 2008, section 5.3, the
# recursive Newton-Euler algorithm in absolute coordinates).
# ---------------------------------------------------------------------------

# Bodies up to which the pose scan is unrolled (measured on planar chains, CPU, float64).
_UNROLL = 4


def _trailing(x, b):
    """`x` with ``len(b)`` trailing unit axes, to broadcast against a batch ``b``."""
    return jnp.reshape(x, (*x.shape, *(1,) * len(b)))


def _rotate(r, x):
    """``R x`` for R (3, 3, *b) and x (3, *b) or (3, k, *b), the contraction written
    as three broadcast products (they fuse with their neighbours)."""
    if x.ndim > r.ndim - 1:
        r = r[:, :, None]
    return r[:, 0] * x[0][None] + r[:, 1] * x[1][None] + r[:, 2] * x[2][None]


def _per_body_rotate(r, x):
    """``R_i x_i`` for rotations (n, 3, 3, *b) and vectors (n, 3, *b) or matrices (n, 3, 3, *b)."""
    if x.ndim == r.ndim:
        r = r[:, :, :, None]
    return r[:, :, 0] * x[:, None, 0] + r[:, :, 1] * x[:, None, 1] + r[:, :, 2] * x[:, None, 2]


def _frames(model: Model, f):
    """The joints' local frames R (n, 3, 3, *b), p (n, 3, *b) at joint variables f
    (n, *b) (`_kinematics._local_frames` per state, the batch moved last)."""
    b = f.shape[1:]
    if not b:
        return _local_frames(model, f)
    out = jax.vmap(lambda x: _local_frames(model, x), in_axes=1, out_axes=-1)(jnp.reshape(f, (f.shape[0], -1)))
    return tuple(jnp.reshape(y, (*y.shape[:-1], *b)) for y in out)


def _in_order(x, order):
    """`x` (n, ...) in the order `order` (a static gather; none for the identity)."""
    return x if np.array_equal(order, np.arange(len(order))) else x[order]


def _tree(model: Model):
    """``(order, back, D)``: the bodies in a parents-first order, every body's
    position in it (to put results back in body order), and the subtree matrix
    ``D[j, k] = 1`` where the body at position k is in the subtree of the body at
    position j (itself included)."""
    order = np.asarray(model.order)
    back = np.empty_like(order)
    back[order] = np.arange(len(order))
    d = np.eye(len(order))
    for body in model.order:
        for a in model.ancestors(body):
            d[back[a], back[body]] = 1.0
    return order, back, d


def _ground_terms(model: Model, f):
    """The bodies' ground frames (R, p) (n, 3, 3, *b), (n, 3, *b), their joints'
    motion subspaces S (n, 6, *b) and inertias about the ground origin as
    ``(m, h = m c, Ī)`` (n, 1 | 3 | 3 x 3, *b) (``Ī = R I_c Rᵀ + m (|c|² 1 - c cᵀ)``),
    all in ground coordinates and in the order of :func:`_tree`; then `_tree`'s
    ``(back, D)``."""
    b = f.shape[1:]
    rot, trans = _frames(model, f)
    dtype = rot.dtype
    n = model.n_bodies
    order, back, d = _tree(model)
    parents = np.asarray(model.parents)[order]
    parent = np.where(parents < 0, n, back[np.maximum(parents, 0)])
    ground = jnp.concatenate([jnp.eye(3, dtype=dtype), jnp.zeros((3, 1), dtype)], axis=1)
    table = jnp.zeros((n + 1, 3, 4, *b), dtype).at[n].set(_trailing(ground, b))

    def pose_step(table, x):
        i, p, r, t = x
        pose = table[p]
        pose = jnp.concatenate([_rotate(pose[:, :3], r), (_rotate(pose[:, :3], t) + pose[:, 3])[:, None]], axis=1)
        return table.at[i].set(pose), pose

    xs = (np.arange(n), parent, _in_order(rot, order), _in_order(trans, order))
    if n > _UNROLL:
        _, poses = jax.lax.scan(pose_step, table, xs)
    else:  # the same steps, unrolled (static indices)
        poses = []
        for k in range(n):
            table, pose = pose_step(table, tuple(x[k] for x in xs))
            poses.append(pose)
        poses = jnp.stack(poses)
    r, p = poses[:, :, :3], poses[:, :, 3]
    s = _in_order(_trailing(motion_subspaces(model, dtype), b), order)
    w = _per_body_rotate(r, s[:, :3])
    s = jnp.concatenate([w, _per_body_rotate(r, s[:, 3:]) + cross(p, w, axis=1)], axis=1)
    mass, com, inertia = (_trailing(_in_order(x, order), b) for x in _body_arrays(model, dtype))
    c = _per_body_rotate(r, com) + p
    rir = jnp.sum(_per_body_rotate(r, inertia)[:, :, None] * r[:, None], axis=3)  # R I_c Rᵀ
    eye = _trailing(jnp.eye(3, dtype=dtype), b)
    ib = rir + mass[:, None, None] * (jnp.sum(c * c, axis=1)[:, None, None] * eye[None] - c[:, :, None] * c[:, None])
    # The mass stays unbroadcast (unit batch axes): broadcast over the batch, its subtree
    # sums in `_crba` were a product of two constants, which XLA folds at compile time into
    # a batch-sized literal (a compile that grew with the batch).
    return s, (mass[:, None], mass[:, None] * c, ib), back, jnp.asarray(d, dtype)


def _inertia_times(inertia, x):
    """``I x`` for spatial inertias ``(m, h, Ī)`` (n, 1 | 3 | 3 x 3, *b) about the
    ground origin and motion vectors x (n, 6, *b): ``(Ī ω + h × v, m v - h × ω)``."""
    m, h, ib = inertia
    w, v = x[:, :3], x[:, 3:]
    return jnp.concatenate([_per_body_rotate(ib, w) + cross(h, v, axis=1), m * v - cross(h, w, axis=1)], axis=1)


def _tree_sum(d, x):
    """``Σ_k D[j, k] x_k`` (sums over subtrees; with ``Dᵀ``, over ancestors) for x (n, ...)."""
    return jnp.tensordot(d, x, axes=1)


def _rnea(model: Model, terms, fd, fdd, gravity_on: bool):
    """:func:`_joint_space_rnea` from :func:`_ground_terms`."""
    s, inertia, back, d = terms
    b = fd.shape[1:]
    dtype = s.dtype
    order = np.asarray(model.order)
    fd, fdd = (_in_order(x, order)[:, None] for x in (fd, fdd))
    vj = s * fd
    v = _tree_sum(d.T, vj)
    g = model.gravity.astype(dtype) if gravity_on else jnp.zeros(3, dtype)
    a0 = _trailing(jnp.concatenate([jnp.zeros(3, dtype), -g]), b)
    a = _tree_sum(d.T, s * fdd + cross_motion(v, vj, axis=1)) + a0[None]
    forces = _tree_sum(d, _inertia_times(inertia, a) + cross_force(v, _inertia_times(inertia, v), axis=1))
    return _in_order(jnp.sum(s * forces, axis=1), back)


def _crba(terms):
    """:func:`_joint_space_crba` from :func:`_ground_terms`."""
    s, inertia, back, d = terms
    n, b = s.shape[0], s.shape[2:]
    composite = tuple(_tree_sum(d, x) for x in inertia)
    upper = _trailing(d, b) * jnp.sum(s[:, None] * _inertia_times(composite, s)[None], axis=2)
    full = upper + jnp.swapaxes(upper, 0, 1) - _trailing(jnp.eye(n, dtype=s.dtype), b) * upper
    return _in_order(_in_order(full, back).swapaxes(0, 1), back).swapaxes(0, 1)


@batch_last
def _joint_space_rnea(model: Model, f, fd, fdd, gravity_on: bool = True) -> Float[Array, "nj *b"]:
    """Recursive Newton-Euler in the joint variables (Featherstone 2008, chapter 5, in
    ground coordinates): ``M_f f'' + c_f(f, f') - G_f`` for f, f', f'' (n, *b).

    A body's velocity and acceleration are sums over its path from the ground,
    ``v_i = Σ S_k f'_k``, ``a_i = (0, -g) + Σ (S_k f''_k + v_k × S_k f'_k)``
    (gravity as the base acceleration), its joint's force the sum of
    ``I_k a_k + v_k ×* I_k v_k`` over its subtree, and ``τ_j = S_jᵀ`` of it."""
    return _rnea(model, _ground_terms(model, f), fd, fdd, gravity_on)


@batch_last
def _joint_space_crba(model: Model, f) -> Float[Array, "nj nj *b"]:
    """Composite-rigid-body algorithm (Featherstone 2008, chapter 6, in ground
    coordinates): the joint-space mass matrix ``M_f`` (n, n, *b) at f (n, *b).

    A body's composite inertia is the plain sum of the inertias of its subtree, and
    ``M_jk = S_jᵀ Ic_k S_k`` for k in j's subtree; the rest of M is its transpose."""
    return _crba(_ground_terms(model, f))


@batch_last
def _joint_space_terms(model: Model, f, fd, fdd) -> tuple[Float[Array, "nj nj *b"], Float[Array, "nj *b"]]:
    """``(M_f, M_f f'' + c_f - G_f)``: :func:`_joint_space_crba` and
    :func:`_joint_space_rnea` from one evaluation of the ground poses."""
    terms = _ground_terms(model, f)
    return _crba(terms), _rnea(model, terms, fd, fdd, True)


def _to_child(rot, trans, m):
    """Motion vectors ``m`` (..., 6, k) from parent to child coordinates for child frames
    (R, p) (..., 3, 3), (..., 3): ``(Rᵀ ω, Rᵀ (v + ω × p))``, i.e.
    ``_motion_to_child(A4) @ m`` without forming 6x6 matrices."""
    rt = jnp.swapaxes(rot, -1, -2)
    w, v = m[..., :3, :], m[..., 3:, :]
    return jnp.concatenate([small_matmul(rt, w), small_matmul(rt, v + cross(w, trans[..., :, None], axis=-2))],
                           axis=-2)


def _body_arrays(model: Model, dtype):
    mass = jnp.stack([b.mass for b in model.bodies]).astype(dtype)
    com = jnp.stack([b.com for b in model.bodies]).astype(dtype)
    inertia = jnp.stack([b.inertia for b in model.bodies]).astype(dtype)
    return mass, com, inertia


def _apply_inertia(mass, com, inertia, m):
    """Spatial inertias about the body origins times motion vectors (n, 6, k):
    ``(I_c ω + c × m v_c, m v_c)`` with the centre-of-mass velocity ``v_c = v + ω × c``."""
    c = com[:, :, None]
    w, v = m[:, :3, :], m[:, 3:, :]
    lin = mass[:, None, None] * (v + cross(w, c, axis=1))
    return jnp.concatenate([small_matmul(inertia, w) + cross(c, lin, axis=1), lin], axis=1)


def _coordinate_pattern(model: Model) -> tuple[tuple[int, ...], ...]:
    """Per body, the coordinates its Jacobian in q can depend on: those of the joint
    functions on its path (:meth:`~jaxmb.AbstractJointFunction.coordinate_indices`).
    A joint-space tree (f = q) has one per joint along the path; a closed chain
    embedded in one crank angle has that one everywhere."""
    own = [set(j.function.coordinate_indices()) for j in model.joints]
    return tuple(tuple(sorted(set().union(own[i], *(own[a] for a in model.ancestors(i)))))
                 for i in range(model.n_bodies))


def _unrolls(model: Model) -> bool:
    """Static choice of the projected pass's unrolled values over its level-wise form:
    at most 12 bodies, and the sum over bodies of (coordinates in the body's Jacobian)²
    at most 30 (the size of the written-out ``M = Σ JᵀIJ``). Past that size the
    unrolled sums outgrow the few kernels XLA fuses them into, and the traced graph
    (so compile time) grows; measurements in docs/dev/performance.md."""
    return model.n_bodies <= 12 and sum(len(c) ** 2 for c in _coordinate_pattern(model)) <= 30


def _projected_terms(model: Model, f, fd, fdd, jac):
    """``(M_q, bias_q, (J_bodies, R, p))`` by the projected forward pass: level by level
    (:func:`_projected_terms_by_level`), or for small models (:func:`_unrolls`) with the
    values of :func:`_projected_terms_unrolled` and the derivatives of the level-wise
    form (a ``jax.custom_jvp``; reverse mode transposes it). The two compute the same sums.

    Why: XLA fuses the unrolled scalar form into a few kernels only as it stands;
    differentiated (a batch of tangents per scalar) it becomes slow to run and to
    compile (implicit solvers' Newton Jacobians, reverse mode through a simulation;
    docs/dev/performance.md). The values, and so explicit solvers, are those of the
    unrolled pass."""
    if not _unrolls(model):
        return _projected_terms_by_level(model, f, fd, fdd, jac)
    params, static = eqx.partition(model, eqx.is_array)

    @jax.custom_jvp
    def terms(params, f, fd, fdd, jac):
        return _projected_terms_unrolled(eqx.combine(params, static), f, fd, fdd, jac)

    @terms.defjvp
    def _terms_jvp(primals, tangents):
        return jax.jvp(lambda p, *rest: _projected_terms_by_level(eqx.combine(p, static), *rest), primals, tangents)

    return terms(params, f, fd, fdd, jac)


def _projected_terms_by_level(model: Model, f, fd, fdd, jac):
    """``(M_q, bias_q, (J_bodies, R, p))`` by one forward pass over the tree (no
    joint-space matrices); ``J_bodies`` (n_bodies, 6, nq) are the bodies' spatial
    Jacobians in q (body coordinates) and ``(R, p)`` the joints' local frames, both
    reused for the loads.

    Each body's spatial Jacobian in ``q`` (body coordinates, 6 x nq) follows the
    tree, ``J_i = X_i J_parent + S_i ∇f_i``, and so do its velocity ``v_i`` and its
    velocity-product acceleration ``a_i`` (Newton-Euler forward pass with
    ``f'' = q'ᵀ H q'``, gravity as a base acceleration); then
    ``M_q = Σ J_iᵀ I_i J_i`` (Ehsani 2016, Eq. 145 in spatial form) and
    ``bias_q = Σ J_iᵀ (I_i a_i + v_i ×* I_i v_i)``. The pass runs level by level
    of the tree, vectorised over the bodies of a level, with v, a and J as the
    columns of one (6, 2 + nq) array per body. For few coordinates and many joint
    variables (closed chains, OpenSim joints with coupled axes) this is cheaper
    than the joint-space CRBA.
    """
    rot, trans = _local_frames(model, f)
    dtype = rot.dtype
    nq = jac.shape[1]
    n = model.n_bodies
    s = motion_subspaces(model, dtype)  # (n, 6)
    g = model.gravity.astype(dtype)
    vj = s * fd[:, None]
    own = jnp.concatenate([vj[:, :, None], (s * fdd[:, None])[:, :, None], s[:, :, None] * jac[:, None, :]],
                          axis=2)  # joint's own contribution to (v, a, J)
    # Level by level; bodies are kept as a list and gathered by static slices (a
    # gather/scatter per level is slow under vmap on CPU).
    per_body = [None] * n
    for level, (idx, par) in enumerate(tree_levels(model)):
        if level == 0:
            # The root is at rest, with gravity as its base acceleration (0, -g): in the
            # child frames that is (0, -Rᵀ g) in the acceleration column, nothing else
            # needs transforming, and the velocity-product term v × v_J vanishes (v = v_J).
            down = -small_matvec(jnp.swapaxes(_stack_rows(rot, idx), 1, 2), g)
            block = _stack_rows(own, idx) + jnp.pad(down[:, :, None], ((0, 0), (3, 0), (1, nq)))
        else:
            c = _to_child(_stack_rows(rot, idx), _stack_rows(trans, idx), _stack_rows(per_body, par)) + _stack_rows(own, idx)
            acc = c[:, :, 1] + cross_motion(c[:, :, 0], _stack_rows(vj, idx), axis=1)
            block = jnp.concatenate([c[:, :, :1], acc[:, :, None], c[:, :, 2:]], axis=2)
        for k, i in enumerate(idx):
            per_body[i] = block[k]
    cols = jnp.stack(per_body)
    inert = _apply_inertia(*_body_arrays(model, dtype), cols)  # I v, I a, I J
    v = cols[:, :, 0]
    force = inert[:, :, 1] + cross_force(v, inert[:, :, 0], axis=1)
    jb = cols[:, :, 2:]
    # Written as products and sums (not einsum's dot) so that XLA fuses them.
    mass = jnp.sum(jb[:, :, :, None] * inert[:, :, None, 2:], axis=(0, 1))
    bias = jnp.sum(jb * force[:, :, None], axis=(0, 1))
    return mass, bias, (jb, rot, trans)


# Three-vectors as tuples of scalars, for the unrolled pass.
def _t_add(a, b):
    return tuple(x + y for x, y in zip(a, b))


def _t_scale(a, c):
    return tuple(x * c for x in a)


def _t_cross(a, b):
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


def _t_dot(a, b):
    return sum(x * y for x, y in zip(a, b))


def _t_transpose_times(r, v):
    """``Rᵀ v`` for ``R`` as rows of scalars."""
    return tuple(r[0][i] * v[0] + r[1][i] * v[1] + r[2][i] * v[2] for i in range(3))


def _projected_terms_unrolled(model: Model, f, fd, fdd, jac):
    """:func:`_projected_terms_by_level`'s sums with every body, column and spatial
    component a scalar of the trace: the same recursion, ``J_i = X_i J_parent +
    S_i ∇f_i`` with ``v_i`` and ``a_i`` alongside, then ``M_q = Σ J_iᵀ I_i J_i`` and
    ``bias_q = Σ J_iᵀ (I_i a_i + v_i ×* I_i v_i)`` (Ehsani 2016, Eq. 145 in spatial form),
    written out component by component. A body carries the Jacobian columns of the
    coordinates in its pattern only (:func:`_coordinate_pattern`); the others are zero
    by construction, so a joint-space tree costs what its sparsity does.

    Why: XLA's CPU compiler fuses a graph of scalar arithmetic into a few kernels,
    while the level-wise form's (n, 6, k) arrays, their slices and concatenations, run
    as some twenty; at a few coordinates the kernels, not the flops, are the cost
    (docs/engine.md, "Cost on CPU"). Under vmap every scalar becomes one elementwise
    array over the batch, which fuses as well. Used for small models (:func:`_unrolls`)."""
    rot, trans = _local_frames(model, f)
    dtype = rot.dtype
    nq = jac.shape[1]
    zero = jnp.zeros((), dtype)
    s = motion_subspaces(model, dtype)
    minus_g = tuple(-model.gravity.astype(dtype)[k] for k in range(3))
    # Per body: v, a and the Jacobian's columns {coordinate: column} for the coordinates
    # of its pattern only (its own joint's and its parent's; the others are zero by
    # construction), each a 6-tuple (ω, v) in body axes.
    cols: list = [None] * model.n_bodies
    for level, (idx, par) in enumerate(tree_levels(model)):
        for i, parent in zip(idx.tolist(), par.tolist()):
            si = tuple(s[i, k] for k in range(6))
            r = tuple(tuple(rot[i, a, b] for b in range(3)) for a in range(3))
            p = tuple(trans[i, a] for a in range(3))
            vj = _t_scale(si, fd[i])
            acc = _t_scale(si, fdd[i])
            own = {c: _t_scale(si, jac[i, c]) for c in model.joints[i].function.coordinate_indices()}
            if level == 0:
                # At rest on the ground, gravity as the base acceleration (see the level-wise form).
                cols[i] = (vj, _t_add(acc, (zero,) * 3 + _t_transpose_times(r, minus_g)), own)
                continue

            def to_child(m, r=r, p=p):
                return _t_transpose_times(r, m[:3]) + _t_transpose_times(r, _t_add(m[3:], _t_cross(m[:3], p)))

            pv, pa, pj = cols[parent]
            v = _t_add(to_child(pv), vj)
            w, lin = v[:3], v[3:]
            acc = _t_add(_t_add(to_child(pa), acc),
                         _t_cross(w, vj[:3]) + _t_add(_t_cross(w, vj[3:]), _t_cross(lin, vj[:3])))
            jcols = {c: to_child(pj[c]) for c in pj}
            for c, col in own.items():
                jcols[c] = _t_add(jcols[c], col) if c in jcols else col
            cols[i] = (v, acc, jcols)
    mass = [[zero] * nq for _ in range(nq)]
    bias = [zero] * nq
    for i, body in enumerate(model.bodies):
        m_i = body.mass.astype(dtype)
        c = tuple(body.com.astype(dtype)[k] for k in range(3))
        inertia = body.inertia.astype(dtype)

        def inertia_times(m, m_i=m_i, c=c, inertia=inertia):
            """Spatial inertia about the body origin times ``(ω, v)``: ``(I_c ω + c × f, f)``,
            ``f = m (v + ω × c)``."""
            w, v = m[:3], m[3:]
            lin = _t_scale(_t_add(v, _t_cross(w, c)), m_i)
            ang = tuple(_t_dot((inertia[a, 0], inertia[a, 1], inertia[a, 2]), w) for a in range(3))
            return _t_add(ang, _t_cross(c, lin)) + lin

        v, acc, jcols = cols[i]
        iv = inertia_times(v)
        force = _t_add(inertia_times(acc),
                       _t_add(_t_cross(v[:3], iv[:3]), _t_cross(v[3:], iv[3:])) + _t_cross(v[:3], iv[3:]))
        ij = {b: inertia_times(col) for b, col in jcols.items()}
        for a, col in jcols.items():
            bias[a] = bias[a] + _t_dot(col, force)
            for b in jcols:
                mass[a][b] = mass[a][b] + _t_dot(col, ij[b])
    jb = jnp.stack([jnp.stack([jnp.stack([cols[i][2][c][k] if c in cols[i][2] else zero for c in range(nq)])
                               for k in range(6)]) for i in range(model.n_bodies)])
    return jnp.stack([jnp.stack(row) for row in mass]), jnp.stack(bias), (jb, rot, trans)


def _projects(model: Model) -> bool:
    """Static choice of the recursive route, the same for every public call: the
    projected pass (:func:`_projected_terms`) where q is much smaller than f (closed
    chains, coupled joints: 3 nq <= bodies), the joint-space CRBA/RNEA in ground
    coordinates otherwise. The projected pass carries 2 + nq columns per body, the
    joint-space pair products of n x n subtree matrices, so the first wins at few
    coordinates per body; the crossover was measured between 0.15 (the shoulder study,
    3 coordinates over 20 bodies, and Andrews' squeezer) and 0.35 coordinates per body
    (MoBL-ARMS's skeleton, 7 over 20) (docs/dev/performance.md)."""
    return 3 * model.nq <= model.n_bodies
