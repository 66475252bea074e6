"""The padded structure-of-arrays layout of all muscle paths of a model.

All muscles of a model are evaluated together so that the traced graph does
not grow with the number of muscles. The muscles are padded to P points and
W wrap slots; every path has N = P + 2W nodes: its points, then the two
tangent points of each wrap slot. A node is ordered along the path by a float
key (points: their index; tangent points: inserted between the ends of the
segment they wrap). Wrap slot s of all muscles is applied at once, one
vmapped call per wrap algorithm present in that slot, so the graph holds each wrap
algorithm at most W times whatever the number of muscles, and once where the slots
are a scan (`Layout.kinds`: an algorithm at several slots). Body transforms are
computed once per state and gathered (ground is an extra identity pose).
"""

import jax
import jax.numpy as jnp
import numpy as np

from .._errors import ModelError
from .._model import GROUND, Model
from .._safe import norm
from .._spatial import body_fixed_xyz


class Layout:
    """Static (numpy) description of the padded muscle paths of a model."""

    def __init__(self, muscles, body_names):
        nb = len(body_names)
        index = {b: i for i, b in enumerate(body_names)}
        index[GROUND] = nb

        def body_of(name):
            if name not in index:
                raise ModelError(f"Path point or wrap object on unknown body {name!r}; bodies: {body_names}.")
            return index[name]

        self.muscles = muscles
        self.nb = nb
        self.K = K = len(muscles)
        self.P = P = max((len(m.points) for m in muscles), default=2)
        self.W = W = max((len(m.wraps) for m in muscles), default=0)
        self.N = N = P + 2 * W
        self.npts = np.array([len(m.points) for m in muscles], int)
        self.nw = np.array([len(m.wraps) for m in muscles], int)
        self.valid = np.zeros((K, P), bool)
        self.pbody = np.full((K, P), nb, int)
        self.fixed, self.moving, self.cond = [], [], []
        for k, m in enumerate(muscles):
            for j, pt in enumerate(m.points):
                self.valid[k, j] = True
                self.pbody[k, j] = body_of(pt.body)
                (self.moving if pt.moves else self.fixed).append((k, j))
                if pt.conditional:
                    self.cond.append((k, j))
        self.wbody = np.full((K, W), nb, int)
        self.wpresent = np.zeros((K, W), bool)
        self.wstart = np.zeros((K, W), int)
        self.wend = np.zeros((K, W), int)
        for k, m in enumerate(muscles):
            n = len(m.points)
            for s, w in enumerate(m.wraps):
                self.wbody[k, s] = body_of(w.body)
                self.wpresent[k, s] = True
                start = 0 if w.range[0] < 1 else w.range[0] - 1
                end = n - 1 if w.range[1] < 1 else w.range[1] - 1
                self.wstart[k, s] = min(max(start, 0), n - 1)
                self.wend[k, s] = min(max(end, 0), n - 1)
        # Per wrap slot s, per wrap algorithm: the muscles whose s-th PathWrap uses it
        # (so that each slot computes exactly the wraps it has, no masked work).
        self.groups = []
        for s in range(W):
            at_s = {}
            for k, m in enumerate(muscles):
                if s < len(m.wraps):
                    at_s.setdefault(m.wraps[s].algorithm(len(m.wraps)), []).append(k)
            self.groups.append([(algorithm, np.array(ks, int)) for algorithm, ks in at_s.items()])
        # The same lanes per wrap algorithm, for a pass that scans over the slots (its program
        # holds each algorithm once, whatever W): (algorithm, src (W, G), slot (W, G), dst (W, G),
        # present (W,)), G the algorithm's largest group over the slots. Lane g at slot s wraps
        # muscle src[s, g] with its wrap slot[s, g] and writes its result to muscle dst[s, g];
        # the padded lanes copy a real lane of theirs (same data, so no lane iterates longer)
        # and have dst = K (their scatter is dropped); slots without the algorithm are not run.
        algorithms = list(dict.fromkeys(a for slot in self.groups for a, _ in slot))
        # Scanned where it at least halves the kernels the pass holds (MoBL-ARMS's multi-wrap
        # muscles: 13 -> 4; compile of lengths 2.3x, of L and R 1.7-2x faster); the padded
        # lanes cost run time (MoBL-ARMS's R +15-24% per state), and arm26's 3 kernels over
        # 2 algorithms gained no compile time scanned and ran 3-27% slower, so they stay unrolled.
        self.scan_slots = W > 1 and sum(len(slot) for slot in self.groups) >= 2 * len(algorithms)
        self.kinds = []
        for algorithm in algorithms if self.scan_slots else ():
            at = [dict(slot).get(algorithm) for slot in self.groups]
            G = max(len(ks) for ks in at if ks is not None)
            s0 = next(s for s, ks in enumerate(at) if ks is not None)
            src, slot, dst = np.zeros((W, G), int), np.zeros((W, G), int), np.full((W, G), K)
            for s, ks in enumerate(at):
                real = at[s0] if ks is None else ks
                src[s] = np.concatenate([real, np.full(G - len(real), real[0])])
                slot[s] = s0 if ks is None else s
                if ks is not None:
                    dst[s, :len(ks)] = ks
            self.kinds.append((algorithm, src, slot, dst, np.array([ks is not None for ks in at])))
        self.owner = np.concatenate([np.full(P, -1), np.repeat(np.arange(W), 2)]).astype(int)
        self.node_body = np.concatenate([self.pbody, np.repeat(self.wbody, 2, axis=1)], axis=1)
        self.multi = bool(np.any(self.nw > 1))


def layout(model: Model) -> Layout:
    """The `Layout` of all of `model`'s muscles (one padded structure)."""
    return Layout(model.muscles, model.body_names)


def partitions(model: Model) -> list[tuple[Layout, np.ndarray]]:
    """`model`'s muscles with path points split by how their paths resolve, each part padded
    to its own sizes:
    ``[(layout, ks), ...]`` with ``ks`` the part's muscle indices in `model.muscles`.

    Muscles with at most one PathWrap resolve in one pass; only those with several
    run OpenSim's multi-pass loop (up to 8 passes, `resolve_all`), so that the passes
    after the first recompute just the muscles that need them (and pad to their sizes).
    """
    geometric = [k for k, m in enumerate(model.muscles) if m.path is None]
    parts = [[k for k in geometric if len(model.muscles[k].wraps) <= 1],
             [k for k in geometric if len(model.muscles[k].wraps) > 1]]
    return [(Layout([model.muscles[k] for k in ks], model.body_names), np.array(ks, int)) for ks in parts if ks]


def function_part(model: Model):
    """The muscles whose path is a function of the coordinates (`Muscle.path`), left out of
    `partitions`: ``(paths, ks)`` with ``ks`` their indices in `model.muscles`, or None."""
    ks = [k for k, m in enumerate(model.muscles) if m.path is not None]
    return ([model.muscles[k].path for k in ks], np.array(ks, int)) if ks else None


def merge_parts(parts, values, axis=0):
    """Per-part arrays (muscles along `axis`, in each part's order) as one array in model order."""
    ks = np.concatenate([k for _, k in parts])
    joined = jnp.concatenate(values, axis=axis)
    return joined if np.array_equal(ks, np.arange(ks.size)) else jnp.take(joined, np.argsort(ks), axis=axis)


def ext_poses(poses):
    """Rotations (nb+1, 3, 3) and origins (nb+1, 3) with ground appended as the last body."""
    rot = jnp.concatenate([poses[:, :3, :3], jnp.eye(3, dtype=poses.dtype)[None]])
    org = jnp.concatenate([poses[:, :3, 3], jnp.zeros((1, 3), poses.dtype)])
    return rot, org


def point_locals(lay: Layout, q):
    """Body-frame locations (K, P, 3) and activity (K, P) of all path points at q."""
    dt = q.dtype
    loc = jnp.zeros((lay.K, lay.P, 3), dt)
    if lay.fixed:
        k, j = np.array(lay.fixed).T
        loc = loc.at[k, j].set(jnp.stack([lay.muscles[a].points[b].location(q) for a, b in lay.fixed]).astype(dt))
    if lay.moving:
        k, j = np.array(lay.moving).T
        loc = loc.at[k, j].set(moving_locals(lay, q))
    active = jnp.asarray(lay.valid)
    if lay.cond:
        k, j = np.array(lay.cond).T
        active = active.at[k, j].set(jnp.stack([lay.muscles[a].points[b].is_active(q) for a, b in lay.cond]))
    return loc, active


def moving_locals(lay: Layout, q):
    """Body-frame locations (M, 3) of the moving points (`lay.moving`) at q."""
    return jnp.stack([lay.muscles[a].points[b].location(q) for a, b in lay.moving]).astype(q.dtype)


def _wrap_frames(lay: Layout, ks, ss, rot_e, org_e, dt):
    """The wraps of muscles `ks` at slots `ss` (index arrays, one per lane): frame rotations
    (G, 3, 3) and origins (G, 3) in ground, params (G, n), axis (G,), sign (G,)."""
    ws = [lay.muscles[k].wraps[s] for k, s in zip(ks, ss)]
    rw = jax.vmap(body_fixed_xyz)(jnp.stack([w.xyz_body_rotation.astype(dt) for w in ws]))
    tw = jnp.stack([w.translation.astype(dt) for w in ws])
    b = lay.wbody[ks, ss]
    rot = jnp.einsum("gij,gjk->gik", rot_e[b], rw)
    org = jnp.einsum("gij,gj->gi", rot_e[b], tw) + org_e[b]
    prm = jnp.stack([w.wrap_parameters(dt) for w in ws])
    return rot, org, prm, np.array([w.wrap_axis for w in ws], int), np.array([w.wrap_sign for w in ws], int)


def wrap_groups(lay: Layout, rot_e, org_e, dt):
    """Per wrap slot, per wrap algorithm: (algorithm, muscles ks (G,), frame rotations (G, 3, 3),
    origins (G, 3), params (G, n), axis (G,), sign (G,)), frames in ground."""
    return [[(algorithm, ks) + _wrap_frames(lay, ks, np.full(len(ks), s), rot_e, org_e, dt) for algorithm, ks in slot]
            for s, slot in enumerate(lay.groups)]


def wrap_kinds(lay: Layout, rot_e, org_e, dt):
    """`wrap_groups` per wrap algorithm for the scanned pass (`Layout.kinds`): (algorithm,
    src, dst, present, frame rotations (W, G, 3, 3), origins (W, G, 3), params (W, G, n),
    axis (W, G), sign (W, G), start (W, G), end (W, G)), frames in ground."""
    out = []
    for algorithm, src, slot, dst, present in lay.kinds:
        frames = _wrap_frames(lay, src.ravel(), slot.ravel(), rot_e, org_e, dt)
        out.append((algorithm, src, dst, present) + tuple(x.reshape(src.shape + x.shape[1:]) for x in frames)
                   + (lay.wstart[src, slot], lay.wend[src, slot]))
    return out


def _path_length_one(pos, active, key, wrap_len, owner):
    order = jnp.argsort(jnp.where(active, key, jnp.inf))
    p = pos[order]
    act = active[order]
    own = jnp.asarray(owner)[order]
    seg = norm(p[1:] - p[:-1])
    both = act[1:] & act[:-1]
    same = (own[1:] == own[:-1]) & (own[1:] >= 0)
    wl = jnp.where(same, wrap_len[jnp.clip(own[1:], 0, None)] if wrap_len.shape[0] else 0.0, seg)
    return jnp.sum(jnp.where(both, wl, 0.0))


def unwrapped_segments(pos, active):
    """The straight segments of a path without wrap slots, its points in path order (no sort):
    per point, whether it and a later point are active (``has_next``) and, where it does, the
    first active point after it (``nxt`` (P, 3)); likewise ``has_prev`` and the last active
    point before it (``prv``). Two sweeps over the (static, few) points, each a selection:
    elementwise under vmap, where a sort or gathers are not."""
    P = active.shape[0]
    later, nxt = [jnp.zeros((), bool)] * P, [pos[P - 1]] * P
    earlier, prv = [jnp.zeros((), bool)] * P, [pos[0]] * P
    for j in range(P - 2, -1, -1):
        later[j] = active[j + 1] | later[j + 1]
        nxt[j] = jnp.where(active[j + 1], pos[j + 1], nxt[j + 1])
    for j in range(1, P):
        earlier[j] = active[j - 1] | earlier[j - 1]
        prv[j] = jnp.where(active[j - 1], pos[j - 1], prv[j - 1])
    return active & jnp.stack(later), jnp.stack(nxt), active & jnp.stack(earlier), jnp.stack(prv)


def _unwrapped_length_one(pos, active):
    has_next, nxt, _, _ = unwrapped_segments(pos, active)
    return jnp.sum(jnp.where(has_next, norm(nxt - pos), 0.0))


def path_lengths(lay: Layout, state):
    """Path lengths (K,) of the resolved nodes `state` = (pos, active, key, wrap_len)."""
    pos, active, key, wrap_len = state
    if lay.W == 0:  # the points in path order: no sort
        return jax.vmap(_unwrapped_length_one)(pos, active)
    return jax.vmap(lambda a, b, c, d: _path_length_one(a, b, c, d, lay.owner))(pos, active, key, wrap_len)
