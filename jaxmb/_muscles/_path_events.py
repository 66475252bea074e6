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
from .._results import RESULTS
from .._safe import norm
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

    def crossed(self, other: "PathEvents") -> Bool[Array, "*batch n_muscles"]:
        """Per muscle, whether its events differ from `other`'s (the same model at another
        state, batched alike): True where the path crosses a discontinuity of its length
        or of its derivative between the two states (a conditional point switching, a wrap
        engaging or releasing, an ellipsoid wrap changing sides), so that a difference
        quotient of the lengths across them is not a moment arm.

        **Arguments:**

        - `other`: the `PathEvents` of the other state(s).

        **Returns:** `(*batch, n_muscles)` bools.
        """
        if len(self.wrap_engaged) != len(other.wrap_engaged):
            raise ValueError(f"PathEvents.crossed: {len(self.wrap_engaged)} muscles against "
                             f"{len(other.wrap_engaged)}; compare the events of one model.")
        out = [jnp.any(a != b, axis=-1) | jnp.any(c != d, axis=-1) | jnp.any(e != f, axis=-1)
               for a, b, c, d, e, f in zip(self.conditional_active, other.conditional_active, self.wrap_engaged,
                                            other.wrap_engaged, self.wrap_far_side, other.wrap_far_side)]
        return jnp.stack(out, axis=-1) if out else jnp.zeros((0,), bool)


def path_events(model: Model, q: RealLike) -> PathEvents:
    """Which conditional points are active, which wraps are engaged, and which go the
    long way round at ``q``.

    The derivative of the path length jumps where any of these change, and the length
    itself where a conditional point switches or a wrap changes sides (arm26's BIClong:
    87 mm at a shoulder elevation of about 0.515 rad, as in OpenSim 4.6). Where two
    states' events differ (`PathEvents.crossed`, per muscle), the path crosses such a
    jump between them.

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


def _last_records(r: Resolved):
    """Each wrap's last computation the path kept (the last applied pass that engaged it:
    the one whose surface length the path has): ``(used (K, W), p_a, p_b, r1, r2 (K, W, 3))``,
    the segment it wrapped and its tangent points, in ground."""
    applied, engaged, _, _, pa, pb, r1, r2 = r.history[:8]
    use = applied[:, :, None] & engaged  # (T, K, W)
    last = use.shape[0] - 1 - jnp.argmax(use[::-1], axis=0)
    pick = lambda x: jnp.take_along_axis(x, last[None, :, :, None], axis=0)[0]  # noqa: E731
    return jnp.any(use, axis=0), pick(pa), pick(pb), pick(r1), pick(r2)


def _per_wrap(lay: Layout, r: Resolved, dt, hook: str, fn, fill):
    """(K, W): ``fn(f, p_a, p_b, r1, r2, params, axis, sign)`` in the wrap frame, for every
    wrap the path kept whose algorithm has the hook ``f = getattr(algorithm, hook)``;
    `fill` elsewhere."""
    out = jnp.full((lay.K, lay.W), fill)
    if lay.W == 0 or r.history is None:
        return out
    used, pa, pb, r1, r2 = _last_records(r)
    for s, slot in enumerate(wrap_groups(lay, r.rot, r.org, dt)):
        for algorithm, ks, rot, org, prm, axis, sign in slot:
            f = getattr(algorithm, hook)
            if f is None:
                continue
            value = jax.vmap(lambda x, R, o, p, ax, sg: fn(f, *((x - o[None]) @ R), p, ax, sg))(
                jnp.stack([pa[ks, s], pb[ks, s], r1[ks, s], r2[ks, s]], axis=1), rot, org, prm, jnp.asarray(axis),
                jnp.asarray(sign))
            out = out.at[ks, s].set(jnp.where(used[ks, s], value, fill))
    return out


def _far_sides(lay: Layout, r: Resolved, dt):
    """(K, W) bools: the wrap's surface path goes the long way round (`WrapAlgorithm.far_side`)."""
    return _per_wrap(lay, r, dt, "far_side", lambda f, a, b, c, d, p, ax, sg: f(a, b, p, ax, sg), False)


def _tangency(lay: Layout, r: Resolved, dt):
    """(K, W) residuals of the wraps' tangency equations (`WrapAlgorithm.tangency`; 0 for
    kinds without)."""
    return _per_wrap(lay, r, dt, "tangency", lambda f, a, b, c, d, p, ax, sg: f(a, b, c, d, p), jnp.zeros((), dt))


class PathStatus(eqx.Module):
    """Whether each muscle's path at a state can be trusted (`path_status`); every field is
    `(n_muscles,)` bools, so it batches under `jax.vmap` like the lengths.

    - `passes_converged`: OpenSim's passes over a multi-wrap path met their 0.5 mm
      criterion within 8 passes (always True with at most one wrap).
    - `wraps_converged`: every engaged sphere, cylinder and ellipsoid wrap ended at tangent
      points that solve its tangency equations (residuals at most 1e-3): False where an
      iteration stopped at its cap or went astray.
    - `plausible`: the length is finite (and positive for a path given as a function of
      the coordinates, which a fit can take below zero far from its samples), and the
      wraps lengthen the straight path through
      the active points by no less than 0 (-0.5 mm with several wraps) and no more than two
      full turns (2π times the wrap's `turn_radius`) plus two diameters per engaged wrap,
      no one wrap the segment it replaced by more than its own two turns and diameters.
    - `ok`: all three.
    """

    passes_converged: Bool[Array, "*batch n_muscles"]
    wraps_converged: Bool[Array, "*batch n_muscles"]
    plausible: Bool[Array, "*batch n_muscles"]

    @property
    def ok(self) -> Bool[Array, "*batch n_muscles"]:
        return self.passes_converged & self.wraps_converged & self.plausible

    @property
    def result(self) -> RESULTS:
        """One [`jaxmb.RESULTS`][jaxmb.RESULTS] code per muscle (and state, batched as the
        fields): `path_implausible` where the path is not plausible, else
        `path_wrap_not_converged` where a wrap did not converge, else
        `path_passes_not_converged` where the passes did not, else `successful`.
        ``status.result == mb.RESULTS.successful`` is `ok`, and
        ``status.result == mb.RESULTS.path_implausible`` picks one failure; the codes'
        messages say what failed and what to do."""
        def one(passes, wraps, plausible):
            code = RESULTS.where(passes, RESULTS.successful, RESULTS.path_passes_not_converged)
            code = RESULTS.where(wraps, code, RESULTS.path_wrap_not_converged)
            return RESULTS.where(plausible, code, RESULTS.path_implausible)

        shape = self.ok.shape
        flat = (jnp.reshape(x, (-1,)) for x in (self.passes_converged, self.wraps_converged, self.plausible))
        return jax.tree.map(lambda v: jnp.reshape(v, shape), jax.vmap(one)(*flat))


# The largest residual of a wrap's tangency equations `path_status` accepts: ten times the
# 1e-4 that each of them meets where OpenSim's ellipsoid Gauss-Newton stops (a squared sum
# of 1e-8); the closed-form wraps (sphere, cylinder) meet them to round-off.
TANGENCY_TOLERANCE = 1e-3
_PASS_TOLERANCE = 5e-4  # m: OpenSim's multi-wrap passes stop once the length changes less


def path_status(model: Model, q: RealLike) -> PathStatus:
    """Which muscle paths at ``q`` failed: a multi-wrap loop that did not converge, a wrap whose
    tangent points do not solve its equations, or a length no wrapped path can have (e.g. an
    ellipsoid wrap whose tangent-point iteration went astray, which puts metres into a
    centimetre-sized wrap; OpenSim returns such lengths silently).

    Tangency: a wrap on the quadric ``Σ r_i² / a_i² = 1`` (sphere, cylinder across its
    axis, ellipsoid) ends at tangent points ``r`` on the surface, from which the straight
    line to the path end ``p`` is tangent: ``Σ r_i² / a_i² - 1 = 0`` and
    ``2 Σ r_i (p_i - r_i) / a_i² = 0``. These are the equations OpenSim's ellipsoid
    Gauss-Newton solves; a residual over 1e-3 (ten times the 1e-4 where OpenSim
    stops) means the iteration stopped at its cap of 50 or converged elsewhere.

    Plausibility: a wrap replaces the straight segment ``p_a p_b`` by tangent lines and a
    surface path, so it can only lengthen the path, and OpenSim's wraps turn the path less
    than once about the object (wrap angles below 2π), so a wrap about an object of largest
    turning radius ``ρ`` (`AbstractWrapObject.turn_radius`) adds about a turn ``2πρ`` and
    a diameter for the tangent lines at most, where its segment passes the object; twice
    that, ``a = 2 (2π + 2) ρ``, leaves room for OpenSim's torus, whose inner cylinder also
    wraps segments passing beside the tube (MoBL-ARMS's FCR: up to 1.4 turns and
    diameters). Flagged: a path shorter than the straight path through its active points
    (by more than round-off, or with several wraps by more than the 0.5 mm to which
    OpenSim's passes make such a length consistent: its straight segments keep the first
    pass's tangent points), one longer by more than ``Σ a`` over its engaged wraps, and
    one where a single wrap lengthens the segment it replaced by more than its own ``a``
    (a wrap gone astray that the sum hides behind the others' slack: MoBL-ARMS's ECRL,
    whose torus's inner cylinder is forced round by a segment passing 0.1 m off the torus,
    in OpenSim 4.6 too). A heuristic bound, not a theorem: it separates the failures
    (decimetres to metres) from wrapped paths (centimetres).

    Not reported: OpenSim's torus search (its circle point) stopping short of the root
    of its residual, which `WrapTorus(search="converged")` avoids.

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
        return PathStatus(jnp.zeros(0, bool), jnp.zeros(0, bool), jnp.zeros(0, bool))
    dt = q.dtype
    poses = body_transforms(model, q)
    parts = partitions(model)
    conv, tangent, plaus = [], [], []
    for lay, ks in parts:
        r = resolve_all(lay, q, poses)
        length = path_lengths(lay, (r.pos, r.active, r.key, r.wrap_len))
        straight_active = r.active.at[:, lay.P:].set(False)
        straight = path_lengths(lay, (r.pos, straight_active, r.key, r.wrap_len))
        tol = 1e-9 * (1.0 + jnp.abs(straight))
        # With several wraps, OpenSim's straight segments keep the tangent points of the
        # first pass that engaged each wrap while the surface lengths are the last pass's:
        # the length is consistent to the passes' 0.5 mm criterion, not to round-off.
        slack = jnp.where(jnp.asarray(lay.nw > 1), _PASS_TOLERANCE, 0.0)
        ok = jnp.isfinite(length) & (length - straight >= -(tol + slack))
        wraps_ok = jnp.ones(lay.K, bool)
        if lay.W > 0:
            rho = jnp.stack([jnp.stack([w.turn_radius(dt) for w in model.muscles[k].wraps]
                                       + [jnp.zeros((), dt)] * (lay.W - len(model.muscles[k].wraps))) for k in ks])
            allowance = 2.0 * (2.0 * jnp.pi + 2.0) * rho  # two turns and two diameters
            ok = ok & (length - straight <= jnp.sum(jnp.where(r.engaged, allowance, 0.0), axis=1) + tol)
            used, pa, pb, r1, r2 = _last_records(r)
            excess = norm(pa - r1) + r.wrap_len + norm(r2 - pb) - norm(pb - pa)
            ok = ok & jnp.all(~used | (excess <= allowance + 1e-9 * (1.0 + norm(pb - pa))), axis=1)
            wraps_ok = jnp.all(_tangency(lay, r, dt) <= TANGENCY_TOLERANCE, axis=1)
        tangent.append(wraps_ok)
        plaus.append(ok)
        conv.append(r.converged)
    functions = function_part(model)
    if functions is not None:  # no iterations; plausible where the function's value is finite and positive
        parts = parts + [functions]
        conv.append(jnp.ones(len(functions[0]), bool))
        tangent.append(jnp.ones(len(functions[0]), bool))
        fitted = function_path_lengths(functions[0], q)
        plaus.append(jnp.isfinite(fitted) & (fitted > 0.0))
    return PathStatus(merge_parts(parts, conv), merge_parts(parts, tangent), merge_parts(parts, plaus))
