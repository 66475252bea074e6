"""What a resolved path's numbers hide: its discrete states (`path_events`: which
conditional points are active, which wraps are engaged, which go the long way round),
where the length or its derivative jumps, and its failures (`path_status`: OpenSim's
multi-wrap passes that did not converge, lengths no wrapped path can have)."""

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool

from .._checks import finite_coordinate_vector
from .._eager import compiled_per_model
from .._kinematics import body_transforms
from .._model import Model
from .._typing import RealLike
from ._function_path import function_path_lengths
from ._layout import Layout, function_part, merge_parts, partitions, path_lengths, wrap_groups
from ._paths import Resolved, resolve_all, state_by_state


class PathEvents(eqx.Module):
    """Discrete path state at q: `conditional_active[k]` is a bool per path point of
    muscle k (True for non-conditional points), `wrap_engaged[k]` a bool per wrap, and
    `wrap_far_side[k]` a bool per wrap, True where its surface path goes the long way
    round (OpenSim's far-side rule of the quadrant-constrained WrapEllipsoid; False for
    the other kinds)."""

    conditional_active: tuple
    wrap_engaged: tuple
    wrap_far_side: tuple


def path_events(model: Model, q: RealLike) -> PathEvents:
    """Which conditional points are active, which wraps are engaged, and which go the
    long way round at ``q``.

    The derivative of the path length jumps where any of these change, and the length
    itself where a conditional point switches or a wrap changes sides (arm26's BIClong:
    87 mm at a shoulder elevation of about 0.515 rad, as in OpenSim 4.6). Where two
    states' events differ (compare ``jax.tree.leaves`` of the two results), the path
    crosses such a jump between them.

    **Arguments:**

    - `model`: a model with muscles.
    - `q`: `(nq,)` coordinates (rad or m).

    **Returns:**

    A `PathEvents`, one entry per muscle.
    """
    q = finite_coordinate_vector(model, q, "path_events", "q")
    return _path_events(model, q)


@compiled_per_model
def _path_events(model: Model, q) -> PathEvents:
    if not model.muscles:
        return PathEvents((), (), ())
    poses = body_transforms(model, q)
    n = len(model.muscles)
    act, eng, far = [None] * n, [None] * n, [None] * n
    for lay, ks in partitions(model):
        r = resolve_all(lay, q, poses)
        sides = _far_sides(lay, r, q.dtype)
        for i, k in enumerate(ks):
            act[k], eng[k], far[k] = r.active[i, :lay.npts[i]], r.engaged[i, :lay.nw[i]], sides[i, :lay.nw[i]]
    for k in () if function_part(model) is None else function_part(model)[1]:
        act[k] = eng[k] = far[k] = jnp.zeros(0, bool)  # a smooth function: no events
    return PathEvents(tuple(act), tuple(eng), tuple(far))


def _far_sides(lay: Layout, r: Resolved, dt):
    """(K, W) bools: the wrap's surface path goes the long way round
    (`WrapAlgorithm.far_side`), from the segment its last computation wrapped (the last
    pass that engaged it: the one whose surface length the path has)."""
    out = jnp.zeros((lay.K, lay.W), bool)
    if lay.W == 0 or r.history is None:
        return out
    applied, engaged, _, _, pa, pb = r.history[:6]
    use = applied[:, :, None] & engaged  # (T, K, W)
    last = use.shape[0] - 1 - jnp.argmax(use[::-1], axis=0)
    pa, pb = (jnp.take_along_axis(x, last[None, :, :, None], axis=0)[0] for x in (pa, pb))
    for s, slot in enumerate(wrap_groups(lay, r.rot, r.org, dt)):
        for algorithm, ks, rot, org, prm, axis, sign in slot:
            if algorithm.far_side is None:
                continue
            flag = jax.vmap(lambda a, b, R, o, p, ax, sg, f=algorithm.far_side: f((a - o) @ R, (b - o) @ R, p, ax, sg))(
                pa[ks, s], pb[ks, s], rot, org, prm, jnp.asarray(axis), jnp.asarray(sign))
            out = out.at[ks, s].set(flag & jnp.any(use[:, ks, s], axis=0))
    return out


class PathStatus(eqx.Module):
    """Whether each muscle's path at a state can be trusted (`path_status`); every field is
    `(n_muscles,)` bools, so it batches under `jax.vmap` like the lengths.

    - `passes_converged`: OpenSim's passes over a multi-wrap path met their 0.5 mm
      criterion within 8 passes (always True with at most one wrap).
    - `plausible`: the length is finite and the wraps lengthen the straight path
      through the active points by no less than 0 and no more than a full turn
      (2π times the wrap's `turn_radius`) plus a diameter per engaged wrap.
    - `ok`: both.
    """

    passes_converged: Bool[Array, "*batch n_muscles"]
    plausible: Bool[Array, "*batch n_muscles"]

    @property
    def ok(self) -> Bool[Array, "*batch n_muscles"]:
        return self.passes_converged & self.plausible


def path_status(model: Model, q: RealLike) -> PathStatus:
    """Which muscle paths at ``q`` failed: a multi-wrap loop that did not converge, or a length no
    wrapped path can have (e.g. an ellipsoid wrap whose tangent-point iteration went astray,
    which puts metres into a centimetre-sized wrap; OpenSim returns such lengths silently).

    A wrap replaces the straight segment ``p_a p_b`` by tangent lines and a surface path, so it
    can only lengthen it, and OpenSim's wraps turn the path less than once about the object
    (wrap angles below 2π), so a wrap about an object of largest turning radius ``ρ``
    (`AbstractWrapObject.turn_radius`) adds about at most a turn ``2πρ``; lengths
    outside ``[L_straight, L_straight + Σ (2π + 2) ρ]`` (a turn plus a diameter per
    engaged wrap, summed) are flagged. A heuristic bound, not a theorem: it separates
    the failures (metres) from wrapped paths (centimetres).

    **Arguments:**

    - `model`: a model with muscles.
    - `q`: `(nq,)` coordinates (rad or m).

    **Returns:**

    A `PathStatus` of `(n_muscles,)` bools.
    """
    q = finite_coordinate_vector(model, q, "path_status", "q")
    return _path_status(model, q)


@compiled_per_model
@state_by_state
def _path_status(model: Model, q) -> PathStatus:
    if not model.muscles:
        return PathStatus(jnp.zeros(0, bool), jnp.zeros(0, bool))
    dt = q.dtype
    poses = body_transforms(model, q)
    parts = partitions(model)
    conv, plaus = [], []
    for lay, ks in parts:
        r = resolve_all(lay, q, poses)
        length = path_lengths(lay, (r.pos, r.active, r.key, r.wrap_len))
        straight_active = r.active.at[:, lay.P:].set(False)
        straight = path_lengths(lay, (r.pos, straight_active, r.key, r.wrap_len))
        rho = jnp.zeros((lay.K, lay.W), dt)
        for i, k in enumerate(ks):
            for s_, w in enumerate(model.muscles[k].wraps):
                rho = rho.at[i, s_].set(w.turn_radius(dt))
        bound = jnp.sum(jnp.where(r.engaged, (2.0 * jnp.pi + 2.0) * rho, 0.0), axis=1)
        excess = length - straight
        tol = 1e-9 * (1.0 + jnp.abs(straight))
        plaus.append(jnp.isfinite(length) & (excess >= -tol) & (excess <= bound + tol))
        conv.append(r.converged)
    functions = function_part(model)
    if functions is not None:  # no iterations; plausible where the function's value is finite
        parts = parts + [functions]
        conv.append(jnp.ones(len(functions[0]), bool))
        plaus.append(jnp.isfinite(function_path_lengths(functions[0], q)))
    return PathStatus(merge_parts(parts, conv), merge_parts(parts, plaus))
