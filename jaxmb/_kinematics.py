"""Kinematics in the generalized coordinates ``q`` (Ehsani 2016, section 3-2).

Joint variables ``f(q)`` and their derivatives, the joints' local transforms and the
body poses ``0_i A4(q)``; `jaxmb._point_kinematics` derives the motion of body points
from the poses.
"""

import functools
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ._typing import RealLike

from ._checks import eager_finite_vector
from ._eager import compiled_per_model
from ._loop_closure import ImplicitJointFunction, LoopClosure, LoopClosureError
from ._model import Model
from ._spatial import own_buffer, small_matmul, small_matvec


# The public calls convert and check their arguments, then run a body compiled once per
# model structure and argument shapes when called eagerly (`jaxmb._eager`). On a model
# with loops, a loop that cannot close raises its `LoopClosureError` at the call
# (`close_loops`, run where the program failed).


def check_loop_copies(model: Model) -> None:
    """Raise `LoopClosureError` where the joints of a loop hold copies of it that disagree
    (`_loop_closure_of`): checked eagerly once per model object, as its compiled
    programs see the copies traced."""
    _closure_joints(model)


def close_loops(model: Model, q, *args, **kwargs) -> None:
    """Solve each loop of `model` at `q` (each solve compiled and cached), raising its
    `LoopClosureError` where it cannot close: what an eager call whose program failed
    raises in place of the equinox runtime error."""
    for closure, _ in _closure_joints(model):
        closure.solve(q)


# The decorator of the bodies of the public calls on a model and a state ``(model, q,
# ...)``: compiled per model structure, and on a model with loops the loops' own errors.
compiled_on_model = compiled_per_model(check_model=check_loop_copies, explain=close_loops)


def _loop_closure_of(model: Model, members: Sequence[int]) -> LoopClosure:
    """The closure that the joints `members` of one loop (``model.loops``) share.

    The model holds one copy per joint (pytrees do not share); kinematics solves the
    first joint's copy and hands every joint its share, so the copies must agree. They
    do when built (one object); a copy edited since (``eqx.tree_at`` on one joint) is
    an error when the values are at hand (eagerly). Under a trace they cannot be
    compared without work at run time; edit every joint of a loop together."""
    first = model.joints[members[0]].function.closure
    leaves, treedef = jax.tree_util.tree_flatten(first)
    for i in members[1:]:
        other = model.joints[i].function.closure
        if other is first:
            continue
        other_leaves, other_def = jax.tree_util.tree_flatten(other)
        same = other_def == treedef and all(
            a is b or (not isinstance(a, jax.core.Tracer) and not isinstance(b, jax.core.Tracer)
                       and np.shape(a) == np.shape(b) and np.array_equal(np.asarray(a), np.asarray(b)))
            or (isinstance(a, jax.core.Tracer) and isinstance(b, jax.core.Tracer))
            for a, b in zip(leaves, other_leaves))
        if not same:
            raise LoopClosureError(
                f"Model {model.name!r}: joints {model.joints[members[0]].name!r} and {model.joints[i].name!r} "
                f"hold different copies of loop {first.name!r} (one was edited alone); a loop is solved once "
                "for all its joints, so edit every joint of the loop together (or rebuild the model).")
    return first


def _closure_joints(model: Model) -> list[tuple[LoopClosure, dict[int, int]]]:
    """The loops of `model` (``model.loops``), each as its closure and ``{variable index:
    joint index}`` for those of its dependent variables that are joints of the model."""
    out = []
    for members in model.loops:
        members = [i for i in members if isinstance(model.joints[i].function, ImplicitJointFunction)]
        if members:
            out.append((_loop_closure_of(model, members),
                        {model.joints[i].function.index: i for i in members}))
    return out


def _per_joint(model: Model, method: str, *args) -> list:
    """``[getattr(j.function, method)(*args) for j in model.joints]``, with

    - each loop of the model (``model.loops``) solved once for all its joints
      (:meth:`~jaxmb.LoopClosure.joint_outputs`, then
      :meth:`~jaxmb.ImplicitJointFunction.share`): compute once, pass on;
    - the joint functions that are :meth:`~jaxmb.AbstractJointFunction.vectorisable`
      and alike in kind and shape (same type, static fields and parameter shapes)
      evaluated as one function over their stacked parameters
      (:meth:`~jaxmb.AbstractJointFunction._evaluate_alike`, ``jax.vmap`` by default).

    Why the second: on CPU a right-hand side costs about one kernel launch per
    operation, not per flop; the six fitted functions of a pre-modeled loop, or the
    coupled translations of an OpenSim knee, then cost what one costs."""
    out: list = [None] * len(model.joints)
    for members in model.loops:
        members = [i for i in members if isinstance(model.joints[i].function, ImplicitJointFunction)]
        if not members:
            continue
        outputs = _loop_closure_of(model, members).joint_outputs(method, *args)
        for i in members:
            out[i] = model.joints[i].function.share(method, outputs)
    groups: dict = {}
    for i, joint in enumerate(model.joints):
        if out[i] is not None:
            continue
        fn = joint.function
        if fn.vectorisable():
            leaves, treedef = jax.tree_util.tree_flatten(fn)
            key = (type(fn), treedef, tuple((jnp.shape(x), jnp.result_type(x)) for x in leaves))
        else:
            key = i
        groups.setdefault(key, []).append(i)
    for members in groups.values():
        if len(members) == 1:
            out[members[0]] = getattr(model.joints[members[0]].function, method)(*args)
            continue
        first = model.joints[members[0]].function
        stacked = jax.tree.map(lambda *xs: jnp.stack(xs), *(model.joints[i].function for i in members))
        batch = type(first)._evaluate_alike(stacked, method, *args)
        for k, i in enumerate(members):
            out[i] = jax.tree.map(lambda x: x[k], batch)
    return out


def joint_values(model: Model, q: RealLike) -> Float[Array, " nj"]:
    """Joint variables ``f_i(q)`` of every joint (Ehsani 2016, section 3-1: ``f_i = f_i(q)``).

    Each joint's function is evaluated at ``q``; the dependent variables of a loop
    closure are solved once per loop and shared among its joints.

    **Arguments:**

    - `model`: the model.
    - `q`: `(nq,)` generalized coordinates, in the order of `model.coordinate_names`
      (rad or m).

    **Returns:**

    `(n_joints,)` joint variables in the order of `model.joint_names` (rad for a
    revolute joint, m for a prismatic one), in the dtype of `q`.

    Raises [`jaxmb.ModelError`][jaxmb.ModelError] when `q` does not have shape `(nq,)` or is complex,
    and a ``ValueError`` when (called eagerly) it holds NaN or inf.
    """
    return _joint_values(model, eager_finite_vector(model, q, "joint_values", "q"))


@compiled_on_model
def _joint_values(model: Model, q):
    return jnp.stack(_per_joint(model, "__call__", q)).astype(q.dtype)


def joint_gradients(model: Model, q: RealLike) -> Float[Array, "nj nq"]:
    """Gradients ``∇f_i(q) = ∂f_i/∂q`` of the joint variables (Ehsani 2016, section 3-1).

    The gradients enter every kinematic formula of the paper (Eq. 75: ``D_i = Σ_j
    W_jiᵀ ⊗ ∇f_j``); for loop closures they come from implicit differentiation of
    the closure equations (Eq. 101).

    **Arguments:**

    - `model`: the model.
    - `q`: `(nq,)` generalized coordinates (rad or m).

    **Returns:**

    `(n_joints, nq)` array whose row i is ``∇f_i`` (dimensionless, or m/rad, rad/m for
    mixed joint and coordinate kinds), rows in the order of `model.joint_names`.

    Raises [`jaxmb.ModelError`][jaxmb.ModelError] when `q` does not have shape `(nq,)` or is complex,
    and a ``ValueError`` when (called eagerly) it holds NaN or inf.
    """
    return _joint_gradients(model, eager_finite_vector(model, q, "joint_gradients", "q"))


@compiled_on_model
def _joint_gradients(model: Model, q):
    return jnp.stack(_per_joint(model, "gradient", q))


def joint_hessians(model: Model, q: RealLike) -> Float[Array, "nj nq nq"]:
    """Hessians ``H_i(q) = ∂²f_i/∂q²`` of the joint variables (Ehsani 2016, section 3-1).

    They enter the second derivative of the body poses (Eq. 89 and 99, through
    ``vec(H_i)``, Eq. 80) and hence the velocity terms of the dynamics.

    **Arguments:**

    - `model`: the model.
    - `q`: `(nq,)` generalized coordinates (rad or m).

    **Returns:**

    `(n_joints, nq, nq)` symmetric Hessians, in the order of `model.joint_names`
    (units of ``f_i`` per product of the units of two coordinates).

    Raises [`jaxmb.ModelError`][jaxmb.ModelError] when `q` does not have shape `(nq,)` or is complex,
    and a ``ValueError`` when (called eagerly) it holds NaN or inf.
    """
    return _joint_hessians(model, eager_finite_vector(model, q, "joint_hessians", "q"))


@compiled_on_model
def _joint_hessians(model: Model, q):
    return jnp.stack(_per_joint(model, "hessian", q))


def joint_rates(model: Model, q, qd, qdd=None):
    """Joint variables and their time derivatives along a motion: ``(f, f', f'')``.

    With ``f' = ∇f q'`` and ``f'' = ∇f q'' + q'ᵀ H q'``, the chain rule applied to
    ``f_i(q(t))`` (Ehsani 2016, section 3-1). Each joint function gives its own
    rates (nested forward-mode derivatives by default, the closed-form implicit
    derivatives for loop closures, one solve per loop).

    **Arguments:**

    - `model`: the model.
    - `q`: `(nq,)` generalized coordinates (rad or m).
    - `qd`: `(nq,)` generalized velocities ``q'`` (rad/s or m/s).
    - `qdd`: `(nq,)` generalized accelerations ``q''`` (rad/s² or m/s²), or `None`.

    **Returns:**

    A tuple ``(f, f', f'')`` of three `(n_joints,)` arrays (rad or m; per second;
    per second squared), in the order of `model.joint_names`. With `qdd=None` the
    returned ``f''`` is the velocity-product part ``q'ᵀ H q'`` alone.

    Raises [`jaxmb.ModelError`][jaxmb.ModelError] when `q`, `qd` or `qdd` does not have shape
    `(nq,)` or is complex, and a ``ValueError`` when (called eagerly) one holds NaN or inf.
    """
    q = eager_finite_vector(model, q, "joint_rates", "q")
    qd = eager_finite_vector(model, qd, "joint_rates", "qd", dtype=q.dtype)
    qdd = None if qdd is None else eager_finite_vector(model, qdd, "joint_rates", "qdd", dtype=q.dtype)
    return _joint_rates(model, q, qd, qdd)


@compiled_on_model
def _joint_rates(model: Model, q, qd, qdd):
    if qdd is None:
        return tuple(jnp.stack(x).astype(q.dtype) for x in zip(*_per_joint(model, "rates", q, qd)))
    # J q'' from the same evaluation (one solve per loop), not from a second pass.
    f, fd, fdd, jac = _joint_rates_and_gradients(model, q, qd)
    return f, fd, fdd + jac @ qdd


def _joint_rates_and_gradients(model: Model, q, qd):
    """``(f, f', q'ᵀ H q', ∇f)`` (nj,), (nj,), (nj,), (nj, nq): :func:`joint_rates`
    (velocity-product part) and :func:`joint_gradients` from one evaluation of each
    joint function (:meth:`~jaxmb.AbstractJointFunction.rates_and_gradient`)."""
    q, qd = jnp.asarray(q), jnp.asarray(qd, dtype=jnp.asarray(q).dtype)
    f, fd, fdd, jac = zip(*_per_joint(model, "rates_and_gradient", q, qd))
    return (*(jnp.stack(x).astype(q.dtype) for x in (f, fd, fdd)), jnp.stack(jac).astype(q.dtype))


def joint_transforms(model: Model, f: Float[Array, " nj"]) -> Float[Array, "nj 4 4"]:
    """Local transforms ``pr(i)_i A4(f_i)`` of every joint: child frame in parent frame (Ehsani 2016, Eq. 38).

    The rotation part is Rodrigues' formula in Ehsani's form, ``1 + Ṽ sin f + 2 Ṽ²
    sin²(f/2)`` (Eq. 39), between the joint's constant parent and child offsets (see
    [`jaxmb.Joint`][jaxmb.Joint]); a prismatic joint translates by ``f`` along its axis instead.
    All joints are evaluated at once.

    **Arguments:**

    - `model`: the model.
    - `f`: `(n_joints,)` joint variables (rad or m), e.g. from
      [`jaxmb.joint_values`][jaxmb.joint_values].

    **Returns:**

    `(n_joints, 4, 4)` homogeneous transforms (rotation dimensionless, translation in m),
    in the order of `model.joint_names`.
    """
    rot, trans = _local_frames(model, f)
    n = rot.shape[0]
    top = jnp.concatenate([rot, trans[:, :, None]], axis=2)
    bottom = jnp.broadcast_to(jnp.asarray([0.0, 0.0, 0.0, 1.0], dtype=rot.dtype), (n, 1, 4))
    return jnp.concatenate([top, bottom], axis=1)


def _joint_arrays(model: Model, dtype):
    """The joints' constant data stacked over joints: axes, parent and child offsets."""
    def stack(name):
        return jnp.stack([getattr(j, name) for j in model.joints]).astype(dtype)

    return (stack("axis"), stack("parent_rotation"), stack("parent_translation"),
            stack("child_rotation"), stack("child_translation"))


def _revolute_mask(model: Model):
    return np.asarray([j.kind == "revolute" for j in model.joints])


def _local_frames(model: Model, f):
    """``(R, p)`` (nj, 3, 3), (nj, 3) of every joint's child frame in its parent frame:
    ``R = R_p X_R(f) R_c`` and ``p = R_p (X_R(f) p_c + X_p(f)) + p_p``, the joint's own
    motion ``X`` being a rotation about the axis (Rodrigues in Ehsani's form,
    Eq. 39) or a translation along it. Vectorised over joints (the kinds are static),
    so the cost in operations does not grow with the number of joints."""
    f = jnp.asarray(f)
    axis, rp, tp, rc, tc = _joint_arrays(model, f.dtype)
    revolute = _revolute_mask(model)
    angle = jnp.where(revolute, f, 0.0)
    h = jnp.sin(0.5 * angle)
    # s = sin f and the versine v = 1 - cos f = 2 sin²(f/2) (no cancellation at small
    # angles), computed once, not again for every element of R and p below.
    s, v = own_buffer(jnp.stack([jnp.sin(angle), 2.0 * h * h]))
    # With X_R = 1 + K s + K² v (K the axis' cross-product matrix), R and p are affine
    # in (s, v, f): R = R_p R_c + (R_p K R_c) s + (R_p K² R_c) v, and likewise p. The
    # coefficients depend on the model only, so inside a simulation XLA computes them
    # once, outside the time loop.
    k = _skew_batch(axis)
    kk = small_matmul(k, k)
    rp_k, rp_kk = small_matmul(rp, k), small_matmul(rp, kk)
    rot = (small_matmul(rp, rc) + small_matmul(rp_k, rc) * s[:, None, None]
           + small_matmul(rp_kk, rc) * v[:, None, None])
    slide = jnp.where(revolute, 0.0, f)
    trans = (small_matvec(rp, tc) + tp + small_matvec(rp_k, tc) * s[:, None] + small_matvec(rp_kk, tc) * v[:, None]
             + small_matvec(rp, axis) * slide[:, None])
    return rot, trans


def motion_subspaces(model: Model, dtype=None) -> Float[Array, "nj 6"]:
    """Every joint's twist ``S = (ω, v)`` in child-body coordinates (Eq. 69-71): revolute
    ``(R_cᵀ a, R_cᵀ (a × p_c))``, prismatic ``(0, R_cᵀ a)``, for the axis ``a`` and the
    child offset ``(R_c, p_c)``."""
    dtype = model.joints[0].axis.dtype if dtype is None else dtype
    axis, _, _, rc, tc = _joint_arrays(model, dtype)
    revolute = _revolute_mask(model)[:, None]
    rct = jnp.swapaxes(rc, 1, 2)
    w = jnp.einsum("nij,nj->ni", rct, axis)
    v_rev = jnp.einsum("nij,nj->ni", rct, jnp.cross(axis, tc))
    return jnp.concatenate([jnp.where(revolute, w, 0.0), jnp.where(revolute, v_rev, w)], axis=1)


def _skew_batch(v):
    z = jnp.zeros_like(v[:, 0])
    return jnp.stack([jnp.stack([z, -v[:, 2], v[:, 1]], -1),
                      jnp.stack([v[:, 2], z, -v[:, 0]], -1),
                      jnp.stack([-v[:, 1], v[:, 0], z], -1)], axis=1)


@functools.lru_cache(maxsize=256)
def _levels_of(parents: tuple[int, ...]):
    depth = [-1] * len(parents)

    def d(i):
        if depth[i] < 0:
            depth[i] = 0 if parents[i] < 0 else d(parents[i]) + 1
        return depth[i]

    for i in range(len(parents)):
        d(i)
    levels = []
    for k in range(max(depth) + 1 if parents else 0):
        idx = tuple(i for i in range(len(parents)) if depth[i] == k)
        levels.append((np.asarray(idx), np.asarray([parents[i] for i in idx])))
    return tuple(levels)


def tree_levels(model: Model):
    """The bodies grouped by depth in the tree, ``((indices, parent indices), ...)``
    from the root: recursions run level by level, vectorised within a level."""
    return _levels_of(model.parents)


def _poses_from_local(model: Model, local: Array) -> Array:
    # Level by level with static slices (no gather/scatter, which are slow under vmap).
    poses = [None] * model.n_bodies
    for level, (idx, par) in enumerate(tree_levels(model)):
        block = _stack_rows(local, idx) if level == 0 else small_matmul(_stack_rows(poses, par), _stack_rows(local, idx))
        for k, i in enumerate(idx):
            poses[i] = block[k]
    return jnp.stack(poses)


def _ground_frame(model: Model, rot, trans, b: int):
    """Ground rotation and origin of body `b` alone, composed from the joints' local
    frames ``(R, p)`` (nj, 3, 3), (nj, 3) along its path (:func:`_local_frames`):
    cheaper than all poses when a few bodies are needed (those that carry loads)."""
    r = p = None
    for k in (*model.ancestors(b), b):
        r, p = (rot[k], trans[k]) if r is None else (small_matmul(r, rot[k]), small_matvec(r, trans[k]) + p)
    return r, p


def _twist_rows(axes, centres, origin, revolute):
    """Angular velocity and velocity of the point `origin` per unit joint rate ``f'_k``
    (Ehsani 2016, Eq. 176 and 179, the kinematic coefficients γ and β before they are
    turned to body axes): ``a_k`` and ``a_k × (origin - c_k)`` for a revolute joint of
    ground axis ``a_k`` through ``c_k``, ``0`` and ``a_k`` for a prismatic one. Arrays
    broadcast against each other: (..., 3) axes, centres and origin, (..., 1) mask."""
    return jnp.where(revolute, axes, 0.0), jnp.where(revolute, jnp.cross(axes, origin - centres), axes)


def _path_twist_jacobian(model: Model, rot, trans, b: int):
    """Body `b`'s ground pose and its twist per unit rate of the joints on its path, from
    the joints' local frames ``(R, p)`` (:func:`_local_frames`): ``(R_b, o_b, path, J_w, J_v)``
    with ``path`` the joints' indices (root first, `b` last) and rows ``k`` of ``J_w``, ``J_v``
    (len(path), 3) the body's angular velocity and its origin's velocity per unit ``f'_k``, in
    body axes: ``R_bᵀ a_k`` and ``R_bᵀ (a_k × (o_b - c_k))`` for a revolute joint of ground axis
    ``a_k`` through ``c_k``, ``0`` and ``R_bᵀ a_k`` for a prismatic one (Ehsani 2016, Eq. 176
    and 179, the kinematic coefficients γ and β). The power of a wrench ``(n, f)`` (body axes,
    moment about the origin) is then ``Σ_k (J_w n + J_v f)_k f'_k``."""
    axis, rp, tp, _, _ = _joint_arrays(model, rot.dtype)
    path = (*model.ancestors(b), b)
    r = p = None  # the ground pose of the current joint's parent body
    axes, centres = [], []
    for k in path:
        pre_r, pre_p = (rp[k], tp[k]) if r is None else (small_matmul(r, rp[k]), small_matvec(r, tp[k]) + p)
        axes.append(small_matvec(pre_r, axis[k]))
        centres.append(pre_p)
        r, p = (rot[k], trans[k]) if r is None else (small_matmul(r, rot[k]), small_matvec(r, trans[k]) + p)
    a, c = jnp.stack(axes), jnp.stack(centres)
    spin, velocity = _twist_rows(a, c, p[None, :], _revolute_mask(model)[list(path)][:, None])
    return r, p, np.asarray(path), spin @ r, velocity @ r


def _stack_rows(rows, idx):
    """``stack([rows[i] for i in idx])`` for a static index array; a plain slice when
    the indices are contiguous (rows may be an array or a list of arrays)."""
    idx = [int(i) for i in idx]
    if not isinstance(rows, list) and idx == list(range(idx[0], idx[0] + len(idx))):
        return rows[idx[0]:idx[0] + len(idx)]
    return jnp.stack([rows[i] for i in idx])


def body_transforms(model: Model, q: RealLike) -> Float[Array, "nb 4 4"]:
    """Ground-from-body transforms ``0_i A4(q)`` of every body (Ehsani 2016, Eq. 40).

    ``0_i A4 = 0_pr(i) A4 · pr(i)_i A4``: the local transforms (Eq. 38) composed from
    the root, level by level of the tree.

    **Arguments:**

    - `model`: the model.
    - `q`: `(nq,)` generalized coordinates (rad or m).

    **Returns:**

    `(n_bodies, 4, 4)` homogeneous transforms: body i's rotation to ground axes and its
    origin in ground (m), in the order of `model.body_names`.

    Raises [`jaxmb.ModelError`][jaxmb.ModelError] when `q` does not have shape `(nq,)` or is complex,
    and a ``ValueError`` when (called eagerly) it holds NaN or inf.
    """
    q = eager_finite_vector(model, q, "body_transforms", "q")
    return _body_transforms(model, q)


@compiled_on_model
def _body_transforms(model: Model, q):
    return body_transforms_from_joints(model, joint_values(model, q))


def body_transforms_from_joints(model: Model, f: Float[Array, " nj"]) -> Float[Array, "nb 4 4"]:
    """Ground-from-body transforms from the joint variables ``f`` (nj,) directly (Eq. 38-40)."""
    return _poses_from_local(model, joint_transforms(model, f))
