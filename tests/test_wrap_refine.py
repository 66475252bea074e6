"""OpenSim's multi-wrap sliding runs only on the segments GeometryPath's choice of segment
reads (`jaxmb._muscles._paths._refined_wraps`, gathered into narrow rounds): every segment's
WrapAction equals the wrap's on every candidate segment, and their results equal its to
round-off (the narrower calls may round the last bit differently), also where a muscle needs
several rounds and under `jax.vmap`."""

import jax
import jax.numpy as jnp
import numpy as np

from jaxmb._muscles._cylinder import _CYLINDER_MULTI
from jaxmb._muscles._paths import _REFINED_LANES, _one_wrap, _refined_wraps, _segment_wraps, _segments
from jaxmb._muscles._wrap_base import MANDATORY_WRAP, WRAPPED

P, G = 6, 6  # path points per muscle (one wrap slot), muscles in the group
OWNER = np.concatenate([np.full(P, -1), [0, 0]])


def _group(seed):
    """Paths about a cylinder (radius 2 cm, along z): points on circles of 2.5-8 cm, quadrants
    +x, all, +x, -x, +y, -y (the quadrant cylinder calls many segments WRAPPED)."""
    rng = np.random.default_rng(seed)
    ang = rng.uniform(0.0, 2.0 * np.pi, (G, P))
    rad = rng.uniform(0.025, 0.08, (G, P))
    pts = np.stack([rad * np.cos(ang), rad * np.sin(ang), rng.uniform(-0.05, 0.05, (G, P))], axis=-1)
    pos = jnp.asarray(np.concatenate([pts, np.zeros((G, 2, 3))], axis=1))
    active = jnp.asarray(np.concatenate([np.ones((G, P)), np.zeros((G, 2))], axis=1).astype(bool))
    key = jnp.asarray(np.tile(np.concatenate([np.arange(P), np.zeros(2)]), (G, 1)))
    wrap = (jnp.tile(jnp.eye(3), (G, 1, 1)), jnp.zeros((G, 3)), jnp.tile(jnp.array([0.02, 0.2]), (G, 1)),
            jnp.array([0, 0, 0, 0, 1, 1]), jnp.array([1, 0, 1, -1, 1, -1]))
    return pos, active, key, wrap, jnp.zeros(G, int), jnp.full(G, P - 1)


def _refined(pos, active, key, wrap, start, end):
    return _refined_wraps(_CYLINDER_MULTI, 0, P, OWNER, pos, active, key, *wrap, start, end)


def _every_segment(pos, active, key, wrap, start, end):
    a_, b_, cand = jax.vmap(lambda *x: _segments(0, P, OWNER, *x)[3:6])(pos, active, key, start, end)
    out = jax.vmap(lambda a, b, c, *w: _segment_wraps(_CYLINDER_MULTI, *w)(a, b, c))(a_, b_, ~cand, *wrap)
    return out, cand


_refined_jit = jax.jit(_refined)
_refined_vmap = jax.jit(jax.vmap(_refined))
_every_jit = jax.jit(_every_segment)


def test_refined_segments_equal_the_wrap_on_every_segment():
    counts = []
    groups = [_group(seed) for seed in range(3)]
    for g in groups:
        (code, r1, r2, wl), cand = _every_jit(*g)
        got = _refined_jit(*g)
        np.testing.assert_array_equal(got[0], code)
        mand = np.asarray(cand & (code == MANDATORY_WRAP))
        wrapped = np.asarray(cand & (code == WRAPPED))
        need = np.where(mand.any(axis=1, keepdims=True), np.arange(P - 1 + 2)[None] == mand.argmax(axis=1)[:, None],
                        wrapped)
        counts += list(need.sum(axis=1))
        for x, y in zip(got[1:], (r1, r2, wl)):
            np.testing.assert_allclose(np.asarray(x)[need], np.asarray(y)[need], rtol=1e-14, atol=1e-17)
    # Both kinds of choice, and muscles that need more than one round.
    assert max(counts) > _REFINED_LANES and min(counts) <= 1
    # Under vmap (the rounds' condition reduced over the batch): the same as state by state.
    batched = _refined_vmap(*jax.tree.map(lambda *x: jnp.stack(x), *groups))
    for i, g in enumerate(groups):
        for x, y in zip(batched, _refined_jit(*g)):
            np.testing.assert_allclose(np.asarray(x)[i], np.asarray(y), rtol=1e-14, atol=1e-17)


def _applied(pos, active, key, wrap, start, end, narrowed):
    """The wrap step's new path and its record (`_one_wrap`), its segments' results from the
    narrowed rounds or, as before them, from the sliding wrap on every candidate segment."""
    pre = _refined(pos, active, key, wrap, start, end) if narrowed else None
    one = lambda *x: _one_wrap(_CYLINDER_MULTI, 0, P, OWNER, True, *x)  # noqa: E731
    return jax.vmap(one)(pos, active, key, jnp.zeros((G, 1)), *wrap, start, end, pre)


_applied_jit = jax.jit(_applied, static_argnums=6)


def test_narrowed_rounds_leave_the_chosen_path_unchanged():
    # GeometryPath's choice, the new path, its wrap length, the record and the tangent points'
    # Jacobian do not depend on the segments the choice does not read.
    for seed in range(3):
        g = _group(seed)
        new = jax.tree.leaves(_applied_jit(*g, True))
        old = jax.tree.leaves(_applied_jit(*g, False))
        for x, y in zip(new, old):
            np.testing.assert_allclose(np.asarray(x, float), np.asarray(y, float), rtol=1e-13, atol=1e-15)
