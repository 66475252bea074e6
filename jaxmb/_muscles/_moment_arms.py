"""The moment-arm matrix ``R = -dL/dq`` (nq, n_muscles) by the closed form of Ehsani
(2016), Eq. 149-195.

Every musculotendon unit acts on the bodies of its attachment sequence Γ_k
(Definition 2) through its generalized line-of-action vectors E_ki
(Definition 3) and their moments Ê_ki (Definition 4); these are carried to the
generalized coordinates by γ_i (Eq. 176) and J^T ϑ β_i (Eq. 179-184).
``method="autodiff"`` returns ``-jax.jacfwd(muscle_lengths)`` instead; the tests
check that the two agree to round-off.

Reference: Ehsani (2016), Empirically-based multibody dynamics.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._checks import finite_coordinate_vector
from .._eager import compiled_per_model
from .._errors import ModelError
from .._kinematics import _twist_rows, body_transforms, joint_gradients
from .._model import Model
from .._safe import unit
from .._typing import RealLike
from ._function_path import function_path_lengths
from ._layout import (ext_poses, function_part, layout, merge_parts, moving_locals, partitions, path_lengths,
                      unwrapped_segments)
from ._paths import _value_and_jacobian, muscle_lengths, resolve_all, state_by_state


def _joint_frames(model: Model, poses):
    """Ground axis a_j and a point c_j on the axis of every joint (for Eq. 176, 179)."""
    axes, centres = [], []
    for i, (j, p) in enumerate(zip(model.joints, model.parents)):
        pre = j.parent_offset()
        if p >= 0:
            pre = poses[p] @ pre
        axes.append(pre[:3, :3] @ j.axis.astype(poses.dtype))
        centres.append(pre[:3, 3])
    return jnp.stack(axes), jnp.stack(centres)


def _gamma_beta(model: Model, poses, axes, centres):
    """γ_i (nb, nj, 3) and β_i (nb, nj, 3) per body, in body-i coordinates.

    Row j of γ_i is the velocity of body i's origin per unit ḟ_j (Eq. 176):
    ``a_j × (o_i - c_j)`` for a revolute joint, ``a_j`` for a prismatic one; row j
    of β_i is ``a_j`` (Eq. 179) for revolute joints in Anc(i) ∪ {i}, 0 otherwise
    (the ϑ of Eq. 178 is folded into β). Both are zero for joints outside the chain.
    """
    nb = model.n_bodies
    chain = np.zeros((nb, nb), bool)
    for i in range(nb):
        chain[i, list(model.ancestors(i) + (i,))] = True
    revolute = np.array([j.kind == "revolute" for j in model.joints])
    rot, o = poses[:, :3, :3], poses[:, :3, 3]
    b_ground, g_ground = _twist_rows(axes[None, :, :], centres[None, :, :], o[:, None, :], revolute[None, :, None])
    g_ground = jnp.where(chain[:, :, None], g_ground, 0.0)
    b_ground = jnp.where(chain[:, :, None], b_ground, 0.0)
    gam = jnp.einsum("ick,ijc->ijk", rot, g_ground)
    bet = jnp.einsum("ick,ijc->ijk", rot, b_ground)
    return gam, bet


def _pull_sorted(P, W, owner, pos, active, key):
    """Unit pulls of the straight segments at every node (path order) and each wrap's neighbours."""
    N = pos.shape[0]
    order = jnp.argsort(jnp.where(active, key, jnp.inf))
    inv = jnp.argsort(order)
    p = pos[order]
    own = jnp.asarray(owner)[order]
    nact = jnp.sum(active)
    idx = jnp.arange(N)
    has_next = idx + 1 < nact
    has_prev = (idx > 0) & (idx < nact)
    nxt, prv = jnp.clip(idx + 1, 0, N - 1), jnp.clip(idx - 1, 0, N - 1)
    surf = jnp.concatenate([(own[:-1] == own[1:]) & (own[:-1] >= 0), jnp.zeros(1, bool)])
    surf_prev = jnp.concatenate([jnp.zeros(1, bool), surf[:-1]])
    to_next = jnp.where((has_next & ~surf)[:, None], unit(p[nxt] - p), 0.0)
    to_prev = jnp.where((has_prev & ~surf_prev)[:, None], unit(p[prv] - p), 0.0)
    pull = to_next + to_prev
    s1 = inv[P + 2 * np.arange(W)]
    s2 = inv[P + 2 * np.arange(W) + 1]
    ia, ib = prv[s1], nxt[s2]
    return pull, p, inv, s1, s2, ia, ib, p[ia], p[ib]


def _pull_unwrapped(pos, active):
    """`_pull_sorted`'s unit pulls (P, 3) of a path without wrap slots, in node order."""
    has_next, nxt, has_prev, prv = unwrapped_segments(pos, active)
    return (jnp.where(has_next[:, None], unit(nxt - pos), 0.0)
            + jnp.where(has_prev[:, None], unit(prv - pos), 0.0))


def _wrap_reverse_sweep(lay, r, grad, dt):
    """Push ``dL/d(node)`` back through every wrap computation, last first.

    ``grad`` (K, N, 3) holds ``∂L/∂p`` of the final path's straight segments at every
    node. Walking the history of wrap computations (passes and slots) backwards,
    each engaged computation ``(p_a, p_b) -> (r1, r2, wrap length)`` takes the
    gradient held by its tangent points (plus 1 for its length, if it is the one
    that counts) and passes it to the nodes it was computed from, through the wrap
    construction's local Jacobian (recorded by the forward resolution, `_paths._one_wrap`:
    the sweep is matrix products over all muscles at once, with no wrap evaluated
    again). Its wrap body
    takes the reactions: by rigid invariance of the construction, pulls ``-∂L/∂r1``
    at r1, ``-∂L/∂r2`` at r2, ``+∂L/∂p_a`` at p_a and ``+∂L/∂p_b`` at p_b. This is
    the chain rule of the actual computation, so it holds when one wrap's tangent
    point feeds the next wrap and when the passes of the multi-wrap loop end
    before the path is consistent.

    The straight segments of the final path use each tangent point's cached position
    (`Resolved`), set by the first engaged computation of its wrap: the
    gradient ``grad`` holds on tangent points goes to that computation, while the
    gradient of the current positions (which later computations wrapped from) goes
    to the last computation before them.

    Returns ``(grad, force, moment)``: the gradient left on the path points and,
    per wrap slot, the total pull (K, W, 3) on the wrap body and its moment about
    the ground origin (K, W, 3).
    """
    applied, eng, node_a, node_b, p_a, p_b, r1_t, r2_t, jac = r.history
    T, K, W, P = applied.shape[0], lay.K, lay.W, lay.P
    rows = np.arange(K)
    # The first pass that engaged each slot (-1: none) and the gradient on its cached tangent points.
    hit = applied[:, :, None] & eng
    first = jnp.where(jnp.any(hit, axis=0), jnp.argmax(hit, axis=0), -1)
    gcache = grad[:, P:].reshape(K, W, 2, 3)
    grad = grad.at[:, P:].set(0.0)

    def step(carry, t):
        grad, live, force, moment = carry
        made = applied[t]  # (K,): the pass (re)computed this muscle's slots
        for s in reversed(range(W)):
            n1 = P + 2 * s
            on = (made & eng[t, :, s])[:, None]
            cache = jnp.where((first[:, s] == t)[:, None, None], gcache[:, s], 0.0)
            g1 = grad[:, n1] + cache[:, 0]
            g2 = grad[:, n1 + 1] + cache[:, 1]
            wbar = jnp.where(live[:, s], 1.0, 0.0).astype(dt)[:, None]
            gab = jnp.einsum("ko,koi->ki", jnp.concatenate([g1, g2, wbar], axis=1), jac[t, :, s])
            ga, gb = jnp.where(on, gab[:, :3], 0.0), jnp.where(on, gab[:, 3:], 0.0)
            g1, g2 = jnp.where(on, g1, 0.0), jnp.where(on, g2, 0.0)
            force = force.at[:, s].add(ga + gb - g1 - g2)
            moment = moment.at[:, s].add(jnp.cross(p_a[t, :, s], ga) + jnp.cross(p_b[t, :, s], gb)
                                         - jnp.cross(r1_t[t, :, s], g1) - jnp.cross(r2_t[t, :, s], g2))
            # The tangent points' gradient is used up; it goes on to the segment's nodes.
            clear = jnp.where(made, 0.0, 1.0).astype(dt)[:, None]
            grad = grad.at[:, n1].multiply(clear).at[:, n1 + 1].multiply(clear)
            grad = grad.at[rows, node_a[t, :, s]].add(ga).at[rows, node_b[t, :, s]].add(gb)
            live = live.at[:, s].set(live[:, s] & ~made)
        return (grad, live, force, moment), None

    zero3 = jnp.zeros((K, W, 3), dt)
    carry = (grad, jnp.ones((K, W), bool), zero3, zero3)
    if T == 1:
        carry, _ = step(carry, 0)
    else:
        carry, _ = jax.lax.scan(step, carry, jnp.arange(T)[::-1])
    grad, _, force, moment = carry
    return grad, force, moment


def gmlav_loads(model: Model, q, poses):
    """The generalized line-of-action loads of all muscles at q (Definitions 3-4).

    Returns ``(pull (K, N, 3), points (K, N, 3), wrap_force (K, W, 3),
    wrap_moment (K, W, 3), resolved, layout)``: for every path node (points, then
    r1/r2 of each wrap slot) the ground unit pull of a unit tension and its point
    of application (zero at tangent points, which belong to no body), and per wrap
    slot the total pull on the wrap object's body and its moment about the ground
    origin. Each straight segment pulls its end points towards each other (the
    GMLAV E and its reciprocal Ē); a wrap computation passes the pulls on its
    tangent points to the nodes it was computed from (``-∂L/∂p`` through the wrap
    construction, `_wrap_reverse_sweep`) and loads the wrap object's body
    with the reactions.
    """
    if function_part(model) is not None:
        raise ModelError("gmlav_loads: a path given as a function of the coordinates (FunctionBasedPath) has no line "
                         "of action; its generalized force is R F with R = moment_arms(model, q).")
    return _layout_loads(layout(model), q, poses)


def _layout_loads(lay, q, poses):
    """`gmlav_loads` of the muscles of one `Layout`."""
    dt = q.dtype
    r = resolve_all(lay, q, poses, jacobians=True)
    K, W = lay.K, lay.W
    if W == 0:  # the points in path order: each pulls towards its active neighbours, no sort
        pull = jax.vmap(_pull_unwrapped)(r.pos, r.active)
    else:
        pre = jax.vmap(lambda a, b, c: _pull_sorted(lay.P, W, lay.owner, a, b, c))(r.pos, r.active, r.key)
        pull_s, inv = pre[0], pre[2]
        pull = jnp.take_along_axis(pull_s, inv[..., None], axis=1)  # node order
    force = jnp.zeros((K, W, 3), dt)
    moment = jnp.zeros((K, W, 3), dt)
    if W > 0:
        grad, force, moment = _wrap_reverse_sweep(lay, r, -pull, dt)
        pull = -grad.at[:, lay.P:].set(0.0)
    return pull, r.pos, force, moment, r, lay


def _layout_moment_arms(lay, q, poses, gamma, beta, jgrad, with_lengths):
    """Lengths (K,) (or None) and moment arms (nq, K) of the muscles of one `Layout`."""
    dt = q.dtype
    pull, pos, wforce, wmoment, r, lay = _layout_loads(lay, q, poses)
    lengths = path_lengths(lay, (r.pos, r.active, r.key, r.wrap_len)) if with_lengths else None
    nb, K = lay.nb, lay.K
    # All loads of muscle k: pulls at the nodes, then per wrap slot a force and moment.
    bodies = np.concatenate([lay.node_body, lay.wbody], axis=1)  # (K, N + W)
    rn, on_ = r.rot[lay.node_body], r.org[lay.node_body]
    rw, ow = r.rot[lay.wbody], r.org[lay.wbody]
    f_loc = jnp.concatenate([jnp.einsum("knji,knj->kni", rn, pull),
                             jnp.einsum("knji,knj->kni", rw, wforce)], axis=1)  # Rᵀ f
    m_loc = jnp.concatenate([jnp.einsum("knji,knj->kni", rn, jnp.cross(pos - on_, pull)),
                             jnp.einsum("knji,knj->kni", rw, wmoment - jnp.cross(ow, wforce))], axis=1)
    onehot = (bodies[..., None] == np.arange(nb)[None, None, :]).astype(float)  # ground dropped
    E = jnp.einsum("knb,kni->kbi", onehot.astype(dt), f_loc)  # E_ki, body-i coordinates
    Eh = jnp.einsum("knb,kni->kbi", onehot.astype(dt), m_loc)  # Ê_ki
    per_joint = jnp.einsum("ijc,kic->jk", gamma, E) + jnp.einsum("ijc,kic->jk", beta, Eh)
    R = jgrad.T @ per_joint
    if lay.moving:
        # Extension of Eq. 195: the virtual work of a MovingPathPoint's motion on its body.
        km, jm = np.array(lay.moving).T
        J = jax.jacfwd(lambda x: moving_locals(lay, x))(q)  # (M, 3, nq)
        rm = r.rot[lay.pbody[km, jm]]
        local_pull = jnp.einsum("mji,mj->mi", rm, pull[km, jm])
        contrib = jnp.einsum("mcq,mc->qm", J, local_pull)
        R = R + contrib @ (km[:, None] == np.arange(K)[None, :]).astype(dt)
    return lengths, R


def _kinematic_coefficients(model: Model, q, poses):
    """``(γ, β, ∇f)`` of the closed form (Ehsani 2016, Eq. 176, 179) at `q`."""
    axes, centres = _joint_frames(model, poses)
    gamma, beta = _gamma_beta(model, poses, axes, centres)
    return gamma, beta, joint_gradients(model, q)


def _merged(model: Model, q, parts, out, with_lengths):
    """The parts' ``(lengths, R)`` and the function-based paths' (`function_part`) in model
    order: ``(L, R)`` or ``R``."""
    functions = function_part(model)
    if functions is not None:
        lengths, slopes = function_path_lengths(functions[0], q, gradient=True)
        parts, out = parts + [functions], out + [(lengths, -slopes.T)]
    R = merge_parts(parts, [o[1] for o in out], axis=1)
    return (merge_parts(parts, [o[0] for o in out]), R) if with_lengths else R


@compiled_per_model
@state_by_state
def _closed_form(model: Model, q, with_lengths=False):
    # Compiled once per model structure (see `_paths._lengths`).
    poses = body_transforms(model, q)
    coefficients = _kinematic_coefficients(model, q, poses)
    parts = partitions(model)
    return _merged(model, q, parts,
                   [_layout_moment_arms(lay, q, poses, *coefficients, with_lengths) for lay, _ in parts], with_lengths)


def _frozen_layout_moment_arms(model: Model, lay, q, poses):
    """``(L, -∂L/∂q)`` with every node of the resolved path fixed in its body's frame (the
    points, the wraps' tangent points in the wrap object's body; a MovingPathPoint moving
    by its own function of q) and the wraps' surface lengths held: the frozen path of
    `moment_arms`; the path's wrap iterations run on values only."""
    r = resolve_all(lay, q, poses)
    b = lay.node_body
    local = jnp.einsum("knji,knj->kni", r.rot[b], r.pos - r.org[b])  # Rᵀ (p - o): body coordinates

    def length(x):
        rot_x, org_x = ext_poses(body_transforms(model, x).astype(q.dtype))
        loc = local
        if lay.moving:  # OpenSim applies a MovingPathPoint's own motion (its location's dependence on q)
            k, j = np.array(lay.moving).T
            loc = loc.at[k, j].set(moving_locals(lay, x))
        pos = jnp.einsum("knij,knj->kni", rot_x[b], loc) + org_x[b]
        return path_lengths(lay, (pos, r.active, r.key, r.wrap_len))

    lengths, jac = _value_and_jacobian(length, q)
    return lengths, -jac.T


@compiled_per_model
@state_by_state
def _frozen_path(model: Model, q, with_lengths=False):
    # The path is resolved outside the forward-mode pass over the body poses, so that no
    # derivative reaches a wrap iteration unless the caller differentiates R itself.
    poses = body_transforms(model, q)
    parts = partitions(model)
    # Paths without wraps: the frozen path's virtual power is -dL/dq (a MovingPathPoint's
    # motion counted in both), which the closed form gives without forward mode over the poses.
    coefficients = _kinematic_coefficients(model, q, poses) if any(lay.W == 0 for lay, _ in parts) else None
    out = [_layout_moment_arms(lay, q, poses, *coefficients, True) if lay.W == 0
           else _frozen_layout_moment_arms(model, lay, q, poses) for lay, _ in parts]
    return _merged(model, q, parts, out, with_lengths)


PATH_FORCE_ROUTES = ("closed_form", "frozen_path")


def check_path_force_route(caller: str, name: str, route: str, error=ValueError) -> str:
    """`route` if it names one of the two definitions of ``R`` a path force can act through
    (`PATH_FORCE_ROUTES`: ``-dL/dq`` or the frozen path), else `error` naming `caller`'s
    argument `name`."""
    if route not in PATH_FORCE_ROUTES:
        raise error(f"{caller}: {name} must be 'closed_form' or 'frozen_path', got {route!r}.")
    return route


def moment_arms(model: Model, q: RealLike, method: str = "closed_form") -> Float[Array, "nq n_muscles"]:
    """Moment-arm matrix R (nq, n_muscles): ``-dL/dq``, or OpenSim's computeMomentArm.

    `method="closed_form"` (default) is Eq. 195 of Ehsani (2016), built from the
    generalized musculotendon line-of-action vectors (Definition 3-5) and the
    kinematic coefficients γ_i (Eq. 176) and β_i (Eq. 179), with two extensions
    that make it equal ``-dL/dq`` exactly: a MovingPathPoint adds the virtual
    work of its motion relative to its body, and a wrapped span pulls its end
    points along the gradient of the span length (the tangent lines, when the
    wrap's tangent points are exact) and loads the wrap object's body with the
    reactions. `method="autodiff"` is ``-jax.jacfwd(muscle_lengths)``.

    `method="frozen_path"` is OpenSim's ``Muscle.computeMomentArm`` (OpenSim: Delp et
    al. 2007): the generalized force of a unit tension along the path frozen at `q`,
    ``R_kj = -Σ_s u_s · ∂(p_s,end - p_s,start)/∂q_k`` over the straight segments s (unit
    vectors u_s), every path node moving with its body (a MovingPathPoint also by its own
    function of q) and a wrap's tangent points fixed on the wrap object, so that their
    sliding over it does no work. It equals ``-dL/dq`` where the path's length is
    stationary in the tangent points (no wrap, a sphere), and differs from it over
    OpenSim's cylinder, ellipsoid and torus rules (concepts page "Muscles"). The wraps
    are evaluated for their values only, with no derivative through their iterations
    (unless R itself is differentiated).

    A path given as a function of the coordinates (`jaxmb.FunctionBasedPath`) has
    ``R = -dL/dq`` of its function by every method, as OpenSim computes it.

    **Arguments:**

    - `model`: a model with muscles.
    - `q`: `(nq,)` coordinates (rad or m).
    - `method`: `"closed_form"`, `"autodiff"` or `"frozen_path"`.

    **Returns:**

    `(nq, n_muscles)` moment arms (m for a rotational coordinate, dimensionless for
    a translational one), so that the generalized force of tensions `F` is `R @ F`.
    """
    q = finite_coordinate_vector(model, q, "moment_arms", "q")
    if method not in ("closed_form", "autodiff", "frozen_path"):
        raise ValueError(f"method must be 'closed_form', 'autodiff' or 'frozen_path', got {method!r}.")
    if method == "autodiff":
        return -jax.jacfwd(lambda x: muscle_lengths(model, x))(q).T
    if not model.muscles:
        return jnp.zeros((model.nq, 0), q.dtype)
    return _frozen_path(model, q) if method == "frozen_path" else _closed_form(model, q)


def muscle_lengths_and_moment_arms(model: Model, q: RealLike, method: str = "closed_form"
                                   ) -> tuple[Float[Array, " n_muscles"], Float[Array, "nq n_muscles"]]:
    """``(L(q), R(q))``: `muscle_lengths` and `moment_arms`
    from one resolution of the paths (the wrap iterations run once, not twice), for
    callers that need both, e.g. muscle forces and their joint moments ``R F``
    (``R`` by Ehsani 2016, Eq. 195, as `moment_arms`).

    **Arguments:**

    - `model`: a model with muscles.
    - `q`: `(nq,)` coordinates (rad or m).
    - `method`: `"closed_form"` (``R = -dL/dq``) or `"frozen_path"` (OpenSim's
      computeMomentArm), as in `moment_arms`.

    **Returns:**

    `((n_muscles,) lengths (m), (nq, n_muscles) moment arms)`.
    """
    q = finite_coordinate_vector(model, q, "muscle_lengths_and_moment_arms", "q")
    check_path_force_route("muscle_lengths_and_moment_arms", "method", method)
    if not model.muscles:
        return jnp.zeros(0, q.dtype), jnp.zeros((model.nq, 0), q.dtype)
    return (_frozen_path if method == "frozen_path" else _closed_form)(model, q, with_lengths=True)


def moment_arm_derivatives(model: Model, q) -> Float[Array, "nq n_muscles nq"]:
    """``dR/dq = -d²L/dq²`` by autodiff of the autodiff moment arms.

    **Arguments:**

    - `model`: a model with muscles.
    - `q`: `(nq,)` coordinates (rad or m).

    **Returns:**

    `(nq, n_muscles, nq)`: entry `[i, k, j]` is ``dR_ik/dq_j`` (m/rad for rotational
    coordinates).
    """
    q = finite_coordinate_vector(model, q, "moment_arm_derivatives", "q")
    return _moment_arm_derivatives(model, q)


@compiled_per_model
def _moment_arm_derivatives(model: Model, q):
    return jax.jacfwd(lambda x: moment_arms(model, x, method="autodiff"))(q)
