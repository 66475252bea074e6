"""Musculotendon path lengths and path events, all muscles of a model at once.

Wrapping follows OpenSim's semantics (GeometryPath::applyWrapObjects): a wrap
object is tried on every path segment in its PathWrap range, the first
segment the straight line would penetrate ("mandatory" wrap) wins, otherwise
the wrap that lengthens the path least; with several wrap objects the passes
repeat (at most 8) until the length changes by less than 0.5 mm. Where exact
parity with OpenSim is impossible or not attempted the deviation is documented
on the OpenSim-parity page and measured by the tests.

Path discontinuities and failures are explicit: `jaxmb._muscles._path_events`.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._batching import CHUNK, batch_max, batches_in_chunks, in_rounds, live_first, where_lanes
from .._checks import finite_coordinate_vector
from .._eager import compiled_per_model
from .._kinematics import body_transforms
from .._model import Model
from .._safe import norm
from .._typing import RealLike
from ._function_path import function_path_lengths
from ._layout import (Layout, ext_poses, function_part, merge_parts, partitions, path_lengths, point_locals,
                      wrap_groups, wrap_kinds)
from ._wrap_base import MANDATORY_WRAP, WRAPPED


def _world_wrap(algorithm, rot, org, prm, axis, sign, skip):
    """``x = (p_a, p_b)`` (6,) in ground -> ``(r1, r2, wrap length)`` (7,) in ground."""
    def world(x):
        _, r1, r2, wl = algorithm.wrap((x[:3] - org) @ rot, (x[3:] - org) @ rot, prm, axis, sign, skip)
        return jnp.concatenate([r1 @ rot.T + org, r2 @ rot.T + org, jnp.reshape(wl, (1,))])
    return world


def _value_and_jacobian(fn, x):
    """``fn(x)`` and its Jacobian by forward mode (one pass, len(x) tangents)."""
    def both(y):
        v = fn(y)
        return v, v

    jac, value = jax.jacfwd(both, has_aux=True)(x)
    return value, jac


def _segments(s, P, owner, pos, active, key, start, end):
    """The path's segments (in path order) that wrap slot `s` may wrap: its tangent nodes
    cleared, then ``(active, order, k, a_, b_, cand, any_active)``."""
    n1, n2 = P + 2 * s, P + 2 * s + 1
    active = active.at[n1].set(False).at[n2].set(False)
    idx = jnp.arange(P)
    inr = (idx >= start) & (idx <= end) & active[:P]
    any_active = jnp.any(inr)
    ks = jnp.min(jnp.where(inr, key[:P], jnp.inf))
    ke = jnp.max(jnp.where(inr, key[:P], -jnp.inf))
    order = jnp.argsort(jnp.where(active, key, jnp.inf))
    p = pos[order]
    act = active[order]
    k = key[order]
    own = jnp.asarray(owner)[order]
    a_, b_ = p[:-1], p[1:]
    cand = act[:-1] & act[1:] & (k[:-1] >= ks) & (k[1:] <= ke)
    cand = cand & ~((own[:-1] == own[1:]) & (own[:-1] >= 0))
    return active, order, k, a_, b_, cand, any_active


def _segment_wraps(algorithm, rot, org, prm, axis, sign):
    """The wrap of `algorithm` on segments ``(a (S, 3), b (S, 3), skip (S,))`` in ground."""
    to_w = lambda x: (x - org) @ rot  # noqa: E731
    return jax.vmap(lambda x, y, c: algorithm.wrap(to_w(x), to_w(y), prm, axis, sign, c))


def _one_wrap(algorithm, s, P, owner, with_jac, pos, active, key, wrap_len, rot, org, prm, axis, sign, start, end,
              pre=None):
    """Apply wrap slot `s` (wrapped by `algorithm`) to one muscle's path (OpenSim's applyWrapObjects step).

    Returns the new ``(pos, active, key, wrap_len)`` and the record of this wrap
    computation for the closed-form moment arms: ``(engaged, node_a, node_b, p_a, p_b,
    r1, r2, jac)``, the nodes (and their positions now) of the segment that was
    wrapped, the tangent points in ground and, with `with_jac` (static), the Jacobian
    (7, 6) of ``(r1, r2, wrap length)`` with respect to ``(p_a, p_b)`` (forward mode,
    in the same pass: the reverse sweep then needs no wrap evaluation); zeros without.
    `pre`: every segment's ``(code, r1, r2, wl)`` where the caller has computed them
    (`_refined_wraps`).
    """
    n1, n2 = P + 2 * s, P + 2 * s + 1
    active, order, k, a_, b_, cand, any_active = _segments(s, P, owner, pos, active, key, start, end)
    to_w = lambda x: (x - org) @ rot  # noqa: E731
    if algorithm.code is not None:
        # A kind that is either a mandatory wrap or none: the segment GeometryPath picks
        # (the first mandatory one) follows from the cheap crossing test alone, and the
        # costly wrap runs once.
        code = jax.vmap(lambda x, y: algorithm.code(to_w(x), to_w(y), prm))(a_, b_)
        mand = cand & (code == MANDATORY_WRAP)
        j = jnp.argmax(mand)
        engaged = jnp.any(mand) & any_active
        # Not engaged (no mandatory segment, or a finished muscle's hidden points): the
        # result is not used, and the wrap makes no iteration.
        world = _world_wrap(algorithm, rot, org, prm, axis, sign, ~engaged)
        x = jnp.concatenate([a_[j], b_[j]])
        out, jac = _value_and_jacobian(world, x) if with_jac else (world(x), jnp.zeros((7, 6), x.dtype))
        r1g_j, r2g_j, wl_j = out[:3], out[3:6], out[6]
    else:
        code, r1, r2, wl = _segment_wraps(algorithm, rot, org, prm, axis, sign)(a_, b_, ~cand) if pre is None else pre
        r1g = r1 @ rot.T + org[None]
        r2g = r2 @ rot.T + org[None]
        change = norm(a_ - r1g) + wl + norm(b_ - r2g) - norm(b_ - a_)
        mand = cand & (code == MANDATORY_WRAP)
        wrapped = cand & (code == WRAPPED)
        first_m = jnp.argmax(mand)
        masked = jnp.where(wrapped, change, jnp.inf)
        best_w = jnp.argmin(masked)
        has_m = jnp.any(mand)
        has_w = jnp.any(wrapped) & jnp.isfinite(jnp.min(masked))
        j = jnp.where(has_m, first_m, best_w)
        engaged = (has_m | has_w) & any_active
        r1g_j, r2g_j, wl_j = r1g[j], r2g[j], wl[j]
        x = jnp.concatenate([a_[j], b_[j]])
        jac = (_value_and_jacobian(_world_wrap(algorithm, rot, org, prm, axis, sign, ~engaged), x)[1] if with_jac
               else jnp.zeros((7, 6), x.dtype))
    ka, kb = k[j], k[j + 1]
    pos = pos.at[n1].set(jnp.where(engaged, r1g_j, pos[n1])).at[n2].set(jnp.where(engaged, r2g_j, pos[n2]))
    key = key.at[n1].set(ka + (kb - ka) / 3.0).at[n2].set(ka + 2.0 * (kb - ka) / 3.0)
    active = active.at[n1].set(engaged).at[n2].set(engaged)
    wrap_len = wrap_len.at[s].set(jnp.where(engaged, wl_j, 0.0))
    record = (engaged, order[j].astype(jnp.int32), order[j + 1].astype(jnp.int32), a_[j], b_[j], r1g_j, r2g_j, jac)
    return (pos, active, key, wrap_len), record


_REFINED_LANES = 2  # segments per muscle in one round of `_refined_wraps`


def _refined_wraps(algorithm, s, P, owner, pos, active, key, rot, org, prm, axis, sign, start, end):
    """Every segment's ``(code, r1, r2, wl)`` for `_one_wrap`, of a group of muscles (G, ...)
    whose wrap at slot `s` refines (`WrapAlgorithm.refines`: OpenSim's multi-wrap sliding).

    The WrapActions of every segment come from the wrap without refinement
    (`WrapAlgorithm.unrefined`). GeometryPath's choice then reads the first mandatory segment's
    result if there is one, else every wrapped segment's (their lengths compete): only those are
    computed again by the refining wrap, as OpenSim computes them; the others keep results that
    the choice does not read. They are one or two of a path's segments, so they are gathered,
    `_REFINED_LANES` per muscle at a time, into rounds run while a muscle has some left (a scan
    of `lax.cond`, which both modes of differentiation go through): a batched loop (up to 100
    restarts of the sliding) costs its width on every trip, all its lanes running to the
    slowest, and a round is that much narrower than a call over every segment."""
    a_, b_, cand = jax.vmap(lambda *x: _segments(s, P, owner, *x)[3:6])(pos, active, key, start, end)

    def wraps(alg):  # over (G, S) segments
        return jax.vmap(lambda a, b, c, *w: _segment_wraps(alg, *w)(a, b, c))

    code, r1, r2, wl = wraps(algorithm.unrefined)(a_, b_, ~cand, rot, org, prm, axis, sign)
    S = a_.shape[1]
    M = min(_REFINED_LANES, S)
    rounds = -(-S // M)
    mand = cand & (code == MANDATORY_WRAP)
    need = jnp.where(jnp.any(mand, axis=1, keepdims=True), jnp.arange(S)[None] == jnp.argmax(mand, axis=1)[:, None],
                     cand & (code == WRAPPED))
    count = jnp.sum(need, axis=1)
    # Per muscle, the needed segments first, then padding (S: out of range, never written).
    order = live_first(need, rounds * M, S)

    def one_round(out, r):
        lanes = jax.lax.dynamic_slice_in_dim(order, r * M, M, axis=1)
        live = (r * M + jnp.arange(M))[None] < count[:, None]
        take = lambda x: jnp.take_along_axis(x, jnp.minimum(lanes, S - 1)[..., None], axis=1)  # noqa: E731
        _, n1, n2, nw = wraps(algorithm)(take(a_), take(b_), ~live, rot, org, prm, axis, sign)
        drop = jnp.where(live, lanes, S)
        put = jax.vmap(lambda u, i, v: u.at[i].set(v, mode="drop"))
        return tuple(put(u, drop, v) for u, v in zip(out, (n1, n2, nw)))

    return (code,) + in_rounds(one_round, (r1, r2, wl), rounds, M, jnp.max(count))


def _apply_slot(algorithm, s, lay, with_jac, state, rot, org, prm, axis, sign, start, end):
    """`_one_wrap` over a group of muscles (leading axis), the refining wraps by `_refined_wraps`."""
    pre = None
    if algorithm.refines:
        pre = _refined_wraps(algorithm, s, lay.P, lay.owner, *state[:3], rot, org, prm, axis, sign, start, end)
    fn = lambda *a: _one_wrap(algorithm, s, lay.P, lay.owner, with_jac, *a)  # noqa: E731
    return jax.vmap(fn)(*state, rot, org, prm, axis, sign, start, end, pre)


def _empty_records(K, W, dt):
    """Per-slot records of one pass (see `_one_wrap`), all "not engaged"."""
    return (jnp.zeros((K, W), bool), jnp.zeros((K, W), jnp.int32), jnp.zeros((K, W), jnp.int32),
            jnp.zeros((K, W, 3), dt), jnp.zeros((K, W, 3), dt), jnp.zeros((K, W, 3), dt),
            jnp.zeros((K, W, 3), dt), jnp.zeros((K, W, 7, 6), dt))


def _wrap_pass(lay, groups, state, with_jac=False, live=None):
    """One pass of every wrap slot in order (OpenSim's inner loop over the PathWrapSet).

    Slot by slot, each wrap algorithm present at the slot is applied (vmapped) to the
    muscles whose wrap it is there. Returns the new state and the pass's records (K, W)
    of `_one_wrap`. With `lay.scan_slots` (an algorithm at several slots) the slots are
    a `jax.lax.scan` holding each algorithm once (`_scanned_pass`), else unrolled.
    """
    rec = _empty_records(lay.K, lay.W, state[0].dtype)
    if lay.scan_slots:
        return _scanned_pass(lay, groups, state, rec, with_jac, live)
    for s, slot in enumerate(groups):
        for algorithm, ks, rot, org, prm, axis, sign in slot:
            new, made = _apply_slot(algorithm, s, lay, with_jac, tuple(x[ks] for x in state), rot, org, prm,
                                    jnp.asarray(axis), jnp.asarray(sign), jnp.asarray(lay.wstart[ks, s]),
                                    jnp.asarray(lay.wend[ks, s]))
            state = tuple(x.at[ks].set(y) for x, y in zip(state, new))
            rec = tuple(x.at[ks, s].set(y) for x, y in zip(rec, made))
    return state, rec


_NARROW = 4  # a `gathers_live` algorithm runs on chunks of a quarter of its lanes


def _scanned_pass(lay, kinds, state, rec, with_jac, live=None):
    """`_wrap_pass` as a scan over the slots: at slot s, each algorithm present there runs
    once, vmapped over its padded lanes (`Layout.kinds`, `wrap_kinds`); the padded lanes'
    results are dropped. Per lane the same arithmetic as the unrolled pass.

    The presence flags are computed from the scan's own slot counter (unbatched) and the
    layout's static slot lists, not read from arrays the scan closes over: under a user's
    `jax.vmap` the multi-pass loop's `lax.cond` batches every array it closes over, and a
    batched flag would turn the presence `lax.cond` into a select that runs every
    algorithm at every slot."""
    def apply(s, algorithm, src, dst, lanes, carry):
        state, rec = carry
        new, made = _apply_slot(algorithm, s, lay, with_jac, tuple(x[src] for x in state), *lanes)
        state = tuple(x.at[dst].set(y, mode="drop") for x, y in zip(state, new))
        rec = tuple(x.at[dst, s].set(y, mode="drop") for x, y in zip(rec, made))
        return state, rec

    def run(s, kind, carry):
        algorithm, src, dst, *lanes = kind
        G = src.shape[0]
        if not algorithm.gathers_live or G < 2 * _NARROW:
            return apply(s, algorithm, src, dst, lanes, carry)
        # The lanes of muscles still live (padding and done muscles dropped) go through
        # the algorithm a chunk of G/_NARROW at a time, as many chunks as they fill: one
        # narrow copy of the algorithm in the program, and a later pass where one slow
        # muscle is left costs one chunk, not the whole batch (docs/dev/performance.md).
        alive = jnp.ones(lay.K, bool) if live is None else live
        on = alive[jnp.minimum(src, lay.K - 1)] & (dst < lay.K)
        g = -(-G // _NARROW)
        order = live_first(on, g * _NARROW, 0)
        count = jnp.sum(on)

        def chunk(cc, i):
            pick = jax.lax.dynamic_slice_in_dim(order, i * g, g)
            ok = (i * g + jnp.arange(g)) < count
            return apply(s, algorithm, src[pick], jnp.where(ok, dst[pick], lay.K), [x[pick] for x in lanes], cc)

        return in_rounds(chunk, carry, _NARROW, g, count)

    def slot(carry, per_kind):
        s, sr = carry
        for (algorithm, _, _, present, *_), arrays in zip(kinds, per_kind):
            here = functools.reduce(jnp.logical_or, [s == int(t) for t in np.flatnonzero(present)])
            sr = jax.lax.cond(here, lambda c, a=algorithm, x=arrays: run(s, (a, *x), c), lambda c: c, sr)
        return (s + 1, sr), None

    per_kind = tuple((jnp.asarray(src), jnp.asarray(dst), rot, org, prm, jnp.asarray(axis), jnp.asarray(sign),
                      jnp.asarray(start), jnp.asarray(end))
                     for _, src, dst, _, rot, org, prm, axis, sign, start, end in kinds)
    return jax.lax.scan(slot, (jnp.zeros((), jnp.int32), (state, rec)), per_kind)[0][1]


class Resolved:
    """All muscle paths at one q: nodes (K, N) (points, then 2 per wrap slot), ordered by key."""

    def __init__(self, pos, active, key, wrap_len, engaged, rot, org, groups, history=None, converged=None):
        # (K, N, 3) ground positions; a wrap tangent point's is OpenSim's cached one, from
        # the first pass that engaged its wrap (the straight segments use these)
        self.pos = pos
        self.active = active  # (K, N) bool
        self.key = key  # (K, N) order keys
        self.wrap_len = wrap_len  # (K, W) surface lengths
        self.engaged = engaged  # (K, W) bool
        self.rot, self.org = rot, org  # (nb+1, 3, 3), (nb+1, 3): body poses, ground last
        self.groups = groups
        # Every wrap computation, pass by pass: applied (T, K) (the pass was kept for the
        # muscle) and the records (T, K, W, ...) of _one_wrap; None without wrap slots.
        self.history = history
        # (K,) bool: OpenSim's multi-pass loop met its 0.5 mm criterion within 8 passes
        # (True for muscles with at most one wrap).
        self.converged = converged


def resolve_all(lay: Layout, q, poses, jacobians: bool = False) -> Resolved:
    """Resolve all muscle paths at `q` (body `poses` (nb, 4, 4)): points, then the wrap passes;
    with `jacobians`, each wrap computation's record holds its local Jacobian (`_one_wrap`)."""
    dt = q.dtype
    rot_e, org_e = ext_poses(poses.astype(dt))
    loc, act = point_locals(lay, q)
    b = lay.pbody
    pos = jnp.einsum("kpij,kpj->kpi", rot_e[b], loc) + org_e[b]
    K, W = lay.K, lay.W
    pos = jnp.concatenate([pos, jnp.zeros((K, 2 * W, 3), dt)], axis=1)
    active = jnp.concatenate([act, jnp.zeros((K, 2 * W), bool)], axis=1)
    key = jnp.tile(jnp.concatenate([jnp.arange(lay.P, dtype=dt), jnp.zeros(2 * W, dt)]), (K, 1))
    wrap_len = jnp.zeros((K, W), dt)
    state = (pos, active, key, wrap_len)
    groups = (wrap_kinds if lay.scan_slots else wrap_groups)(lay, rot_e, org_e, dt)
    history = None
    converged = jnp.ones(K, bool)
    if W > 0 and not lay.multi:
        state, rec = _wrap_pass(lay, groups, state, jacobians)
        history = (jnp.ones((1, K), bool),) + tuple(x[None] for x in rec)
        cached = state[0]
    elif W > 0:
        # Muscles with several wraps: up to 8 passes, each muscle stopping (as
        # OpenSim) once its length changes by less than 0.5 mm; one pass for the others.
        # OpenSim caches each path point's ground location once per state, and moving a
        # PathWrapPoint does not invalidate it: the straight segments (of the length, the
        # convergence check and the returned path) use each tangent point's position
        # from the first pass that engaged its wrap, the surface lengths the current
        # ones. `seen` (K, W) flags the slots engaged so far, `fpos` (K, 2W, 3) holds
        # their tangent points' first positions.
        single = jnp.asarray(lay.nw <= 1)
        P = lay.P

        def step(carry):
            st, last, done, seen, fpos = carry
            # Finished muscles' points are hidden from the pass, so that their wraps find
            # no segment and skip their iterations; their state is kept below.
            hidden = (st[0], st[1] & ~done[:, None], *st[2:])
            new, rec = _wrap_pass(lay, groups, hidden, jacobians, ~done)
            new = where_lanes(done, st, new)
            fresh = jnp.repeat(new[1][:, P::2] & ~seen & ~done[:, None], 2, axis=1)
            fpos = jnp.where(fresh[..., None], new[0][:, P:], fpos)
            seen = seen | (new[1][:, P::2] & ~done[:, None])
            cached = jnp.concatenate([new[0][:, :P], fpos], axis=1)
            length = path_lengths(lay, (cached,) + new[1:])
            stop = done | single | (jnp.abs(length - last) < 0.0005)
            return (new, jnp.where(done, last, length), stop, seen, fpos), (~done,) + rec

        def skip(carry):
            return carry, (jnp.zeros(K, bool),) + _empty_records(K, W, dt)

        def body(carry, _):
            # Under `vmap` the passes run while some state of the batch has a muscle left
            # (`step` keeps finished muscles as they are); on a batched predicate the
            # `lax.cond` would run all 8 passes for every state.
            return jax.lax.cond(batch_max(jnp.sum(~carry[2])) == 0, skip, step, carry)

        init = (state, jnp.full(K, jnp.inf, dt), jnp.zeros(K, bool), jnp.zeros((K, W), bool),
                jnp.zeros((K, 2 * W, 3), dt))
        (state, _, converged, _, fpos), history = jax.lax.scan(body, init, None, length=8)
        cached = jnp.concatenate([state[0][:, :P], fpos], axis=1)
    else:
        cached = state[0]
    pos, active, key, wrap_len = state
    return Resolved(cached, active, key, wrap_len, active[:, lay.P::2], rot_e, org_e, groups, history, converged)


def paths_iterate(model: Model) -> bool:
    """Whether resolving the model's paths runs loops whose trip count depends on the
    state: OpenSim's passes over a muscle with several wraps, or a wrap algorithm's
    stopped iteration (`WrapAlgorithm.iterates`: ellipsoid, torus, multi-wrap cylinder)."""
    return any(len(m.wraps) > 1 or any(w.algorithm(len(m.wraps)).iterates for w in m.wraps) for m in model.muscles)


def state_by_state(fn):
    """Decorate ``fn(model, q, *static, **options)`` (static extras): for a model whose paths iterate (`paths_iterate`),
    a `jax.vmap` over it maps the states one at a time on CPU (`batches_in_chunks` with
    chunk 1); other models batch in chunks of `jaxmb._batching.CHUNK` states, as the
    dynamics do.

    Why: a batched loop runs every lane to the slowest lane of the whole batch, so on a
    CPU a batch of iterating paths costs more per state than the states one by one
    (MoBL-ARMS, arm26), while paths without iterations batch well (gait2354, fitted
    paths) until the batch's intermediates leave the caches; the figures are in
    docs/dev/performance.md."""
    @functools.wraps(fn)
    def wrapper(model, q, *static, **options):
        chunk = 1 if paths_iterate(model) else CHUNK
        return batches_in_chunks(lambda m, x: fn(m, x, *static, **options), chunk=chunk)(model, q)

    return wrapper


@compiled_per_model
@state_by_state
def _lengths(model: Model, q):
    # One compiled program per model structure (equinox caches it on the static parts
    # and the array shapes), so that eager calls do not re-trace the wraps every time.
    if not model.muscles:
        return jnp.zeros(0, q.dtype)
    poses = body_transforms(model, q)
    parts = partitions(model)
    out = []
    for lay, _ in parts:
        r = resolve_all(lay, q, poses)
        out.append(path_lengths(lay, (r.pos, r.active, r.key, r.wrap_len)))
    functions = function_part(model)
    if functions is not None:
        parts, out = parts + [functions], out + [function_path_lengths(functions[0], q)]
    return merge_parts(parts, out)


def muscle_lengths(model: Model, q: RealLike) -> Float[Array, " n_muscles"]:
    """Musculotendon path lengths ``L(q)``: the sum of the straight segments between the
    active path points and the wrap tangent points, plus the lengths on the wrap surfaces;
    for a path given as a function (`jaxmb.FunctionBasedPath`), that function's value.

    **Arguments:**

    - `model`: a model with muscles (e.g. from `jaxmb.load_osim`).
    - `q`: `(nq,)` independent coordinates (rad or m).

    **Returns:**

    `(n_muscles,)` lengths (m), in the order of `model.muscle_names`.
    """
    q = finite_coordinate_vector(model, q, "muscle_lengths", "q")
    return _lengths(model, q)


def muscle_lengthening_speeds(model: Model, q: RealLike, qd: RealLike) -> Float[Array, " n_muscles"]:
    """Musculotendon lengthening speeds ``dL/dt = (dL/dq) q' = -Rᵀ q'``.

    **Arguments:**

    - `model`: a model with muscles.
    - `q`, `qd`: `(nq,)` coordinates and their time derivatives (rad, m; rad/s, m/s).

    **Returns:**

    `(n_muscles,)` speeds (m/s), positive when the muscle lengthens.
    """
    q = finite_coordinate_vector(model, q, "muscle_lengthening_speeds", "q")
    qd = finite_coordinate_vector(model, qd, "muscle_lengthening_speeds", "qd", dtype=q.dtype)
    return _lengthening_speeds(model, q, qd)


@compiled_per_model
def _lengthening_speeds(model: Model, q, qd):
    return jax.jvp(lambda x: _lengths(model, x), (q,), (qd,))[1]
