"""Musculotendon paths, wrapping and moment arms (jaxmb._muscles, jaxmb.io._osim_forces).

Oracles: autodiff -dL/dq for the closed form (Ehsani 2016, Eq. 195), central differences, exact
constructions (a sphere-shaped ellipsoid), MINPACK for the torus search. Parity with
OpenSim 4.6 is in test_muscle_parity.py.
"""

import dataclasses
import pathlib

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmb as mb
# Private: the wrap algorithms' internals, checked one by one against closed forms and OpenSim.
from jaxmb._muscles._cylinder import _cyl_multi_adjust, _cyl_multi_slide, _cyl_spiral, cylinder_wrap
from jaxmb._muscles import _ellipsoid as E
from jaxmb._muscles import _sweep
from jaxmb._muscles._ellipsoid import _ellipsoid_closest, _ellipsoid_wrap
from jaxmb._muscles._layout import layout
from jaxmb._muscles._lm import lmdif_1d
from jaxmb._muscles._path_points import ClampedCoordinate
from jaxmb._muscles._paths import paths_iterate, resolve_all
from jaxmb._muscles._torus import _torus_resid
from jaxmb._muscles._wrap_base import AbstractWrapObject
from jaxmb._safe import norm

TOL_CLOSED_VS_AUTODIFF = 1e-10


def _arm(wrap, extra=()):
    """Two-link arm; one muscle per entry of `wrap` (a wrap object, None, or a list of them)."""
    b = mb.ModelBuilder("t")
    a = b.add_coordinate("shoulder", range=(-1, 1))
    c = b.add_coordinate("elbow", range=(0, 2))
    b.add_body(mb.Body("upper", 2.0, (0, -0.15, 0), jnp.diag(jnp.array([0.01, 0.001, 0.01]))))
    b.add_body(mb.Body("lower", 1.0, (0, -0.15, 0), jnp.diag(jnp.array([0.01, 0.001, 0.01]))))
    b.add_joint(mb.revolute("sh", "ground", "upper", (0, 0, 1), mb.Coordinate(a)))
    b.add_joint(mb.revolute("el", "upper", "lower", (0.3, 0.2, 1), mb.Coordinate(c), offset=(0, -0.3, 0)))
    pts = [mb.PathPoint("ground", (0.02, 0.1, 0.01)), mb.PathPoint("upper", (0.03, -0.1, 0.02)),
           mb.ConditionalPathPoint("upper", (0.035, -0.25, 0.0), mb.Coordinate(c), (0.0, 1.0)),
           mb.MovingPathPoint("lower", mb.Constant(0.02), mb.Polynomial(1, [-0.05, 0.01, 0.02]),
                             mb.Constant(0.01)),
           mb.PathPoint("lower", (0.0, -0.1, 0.0))]
    wraps = wrap if isinstance(wrap, dict) else {"m": wrap}
    for name, w in wraps.items():
        ws = [] if w is None else (list(w) if isinstance(w, (list, tuple)) else [w])
        b.muscles.append(mb.Muscle(name, pts, ws))
    return b.build()


WRAPS = {
    "none": None,
    "cylinder": mb.WrapCylinder("cyl", "upper", 0.02, 0.2, translation=(0, -0.3, 0)),
    "cylinder_quadrant": mb.WrapCylinder("cylq", "upper", 0.02, 0.2, translation=(0, -0.3, 0), quadrant="x"),
    "sphere": mb.WrapSphere("sph", "upper", 0.025, translation=(0, -0.3, 0)),
    "ellipsoid": mb.WrapEllipsoid("ell", "upper", (0.03, 0.02, 0.025), translation=(0, -0.3, 0),
                                 xyz_body_rotation=(0.1, 0.2, 0.3)),
    # The path threads the torus near the elbow. (OpenSim's torus is a 10 km cylinder at
    # the circle point nearest the segment, so a torus beside the path "wraps" it too.)
    "torus": mb.WrapTorus("tor", "upper", 0.01, 0.04, translation=(0.05, -0.2, 0.0),
                         xyz_body_rotation=(np.pi / 2, 0.0, 0.0)),
}
# Two wraps on one muscle exercise the multi-pass loop.
WRAPS_MULTI = {**WRAPS, "sphere_cylinder": [mb.WrapSphere("sph2", "ground", 0.02, translation=(0.0, 0.02, 0.0)),
                                            WRAPS["cylinder"]]}
# Generic states: none of them is at a path discontinuity.
STATES = jnp.array([(0.1, 0.3), (0.23, 1.5), (-0.3, 1.9)])


_H = 1e-6
_SHIFTS = jnp.concatenate([jnp.zeros((1, 2)), _H * jnp.eye(2), -_H * jnp.eye(2)])  # (5, 2)


@pytest.fixture(scope="module")
def hand_models():
    """Every wrap kind (one muscle each) plus a two-wrap muscle, in one compiled program (the
    suite is compile-bound): at STATES the autodiff R, and L with the closed-form R at STATES
    and at STATES +- h e_i (`_SHIFTS`). L and the closed-form R come
    from one resolution of the paths, muscle_lengths_and_moment_arms, which
    test_lengthening_speed_is_minus_R_transpose_qd checks against muscle_lengths and
    moment_arms."""
    model = _arm(WRAPS_MULTI)
    f = jax.jit(lambda qs: (
        jax.lax.map(lambda q: mb.moment_arms(model, q, method="autodiff"), qs),
        jax.lax.map(lambda q: mb.muscle_lengths_and_moment_arms(model, q),
                    (qs[None] + _SHIFTS[:, None]).reshape(-1, 2))))
    ra, (lengths, rc) = f(STATES)
    lengths = np.asarray(lengths).reshape(len(_SHIFTS), len(STATES), -1)
    return model, np.asarray(ra), lengths, np.asarray(rc)[:len(STATES)]


def test_closed_form_equals_autodiff_hand_models(hand_models):
    """Closed-form R == autodiff R on every wrap kind, and == central differences of L."""
    model, ra, lengths, rc = hand_models
    assert np.all(np.isfinite(rc)) and np.all(np.isfinite(lengths))
    np.testing.assert_allclose(rc, ra, atol=TOL_CLOSED_VS_AUTODIFF, rtol=0)
    # Every wrap engages in at least one state (a wrap lengthens the unwrapped path).
    assert np.all((lengths[0, :, 1:] > lengths[0, :, :1] + 1e-9).any(axis=0)), lengths[0]
    # Central differences of L agree with R.
    for i in range(2):
        fd = -(lengths[1 + i] - lengths[3 + i]) / (2 * _H)
        np.testing.assert_allclose(fd, rc[:, i], atol=1e-6)


def test_frozen_path_moment_arms_are_minus_dl_dq_where_the_wrap_is_a_geodesic(hand_models):
    """`method="frozen_path"` (OpenSim's computeMomentArm: the path frozen at q, a
    MovingPathPoint's own motion included) is -dL/dq where the length is stationary in the
    tangent points: no wrap, and the sphere's great circle (the path here has a
    MovingPathPoint and a ConditionalPathPoint). OpenSim's cylinder, ellipsoid and torus
    place their tangent points by rules whose length is not stationary in them, so there the
    two differ (tests/test_frozen_path.py holds this route to OpenSim's computeMomentArm).
    The autodiff R is the hand models' (the same muscles and one more)."""
    model = _arm(WRAPS)
    names = model.muscle_names
    frozen_r = lambda q: mb.moment_arms(model, q, method="frozen_path")  # noqa: E731
    frozen = np.stack([np.asarray(frozen_r(q)) for q in STATES])  # one program, kept for the differences below
    autodiff = hand_models[1][:, :, [hand_models[0].muscle_names.index(n) for n in names]]
    exact = [names.index("none"), names.index("sphere")]
    np.testing.assert_allclose(frozen[:, :, exact], autodiff[:, :, exact], rtol=0, atol=TOL_CLOSED_VS_AUTODIFF)
    assert np.min(np.abs(autodiff[-1, :, exact])) > 0.005  # both coordinates move both paths
    for name in ("cylinder", "ellipsoid", "torus"):
        assert np.max(np.abs(frozen[:, :, names.index(name)] - autodiff[:, :, names.index(name)])) > 5e-5, name
    # R's own derivative (the path re-resolved as q moves) against central differences
    q, h = STATES[1], 1e-6
    d_r = np.asarray(jax.jacfwd(frozen_r)(q))
    fd = np.stack([(np.asarray(frozen_r(q + h * e)) - np.asarray(frozen_r(q - h * e))) / (2 * h) for e in np.eye(2)], -1)
    assert np.max(np.abs(d_r)) > 1e-3
    np.testing.assert_allclose(d_r, fd, rtol=0, atol=1e-6)


def test_a_batch_maps_its_states_one_at_a_time_where_paths_iterate():
    """On CPU a batched loop runs every state to the slowest one's trip count, so `jax.vmap` of
    the path functions maps the states one at a time (a scan over the batch) for a model whose
    paths iterate (several wraps on a muscle: the multi-pass loop; an ellipsoid's solves) and
    batches them otherwise. Either way the values are the state-by-state ones."""
    iterating, plain = _arm(WRAPS_MULTI["sphere_cylinder"]), _arm({"s": WRAPS["sphere"], "c": WRAPS["cylinder"]})
    assert paths_iterate(iterating) and paths_iterate(_arm(WRAPS["ellipsoid"])) and not paths_iterate(plain)
    qs = jnp.stack([jnp.linspace(-0.5, 0.5, 11), jnp.linspace(0.2, 1.8, 11)], axis=1)
    for model, maps in ((iterating, True), (plain, False)):
        both = jax.vmap(lambda q, m=model: mb.muscle_lengths_and_moment_arms(m, q))
        assert ("length=11" in str(jax.make_jaxpr(both)(qs))) == maps
        L, R = jax.jit(both)(qs)
        L_len = jax.jit(jax.vmap(lambda q, m=model: mb.muscle_lengths(m, q)))(qs)
        ok = jax.vmap(lambda q, m=model: mb.path_status(m, q).ok)(qs)
        for i in (0, 4, 10):
            ref_L, ref_R = mb.muscle_lengths_and_moment_arms(model, qs[i])
            np.testing.assert_allclose(L[i], ref_L, rtol=1e-13, atol=0)
            np.testing.assert_allclose(L_len[i], ref_L, rtol=1e-13, atol=0)
            np.testing.assert_allclose(R[i], ref_R, rtol=0, atol=1e-13 * float(jnp.max(jnp.abs(ref_R))))
            assert bool(jnp.all(ok[i] == mb.path_status(model, qs[i]).ok))


def test_closed_form_moment_arms_differentiate_forward_through_the_lane_loops():
    """``jacfwd`` of the closed-form R, through the wraps' iterate rules and their per-lane
    loops (`iterate_lanes`: multi-wrap cylinder restarts, ellipsoid solves, torus search),
    is ``dR/dq = -d²L/dq²``: symmetric in its two coordinates to round-off and equal to
    central differences of R (h = 1e-5: truncation and round-off both near 1e-10 m; measured
    3e-11 and 8e-11 m here). A derivative rule that dropped or mis-scaled the iterates'
    motion would break both. (Autodiff of the autodiff R, `moment_arm_derivatives`, agreed
    to 2e-15 when checked once; it compiles for a minute more, so it is not the oracle here.)"""
    model = _arm({"a": WRAPS_MULTI["sphere_cylinder"], "e": WRAPS["ellipsoid"], "t": WRAPS["torus"]})
    h = 1e-5
    shifts = jnp.concatenate([jnp.zeros((1, 2)), h * jnp.eye(2), -h * jnp.eye(2)])

    def r_and_dr(x):  # R(x) and dR/dq(x), (nq, n_muscles) and (nq, n_muscles, nq)
        return jax.vmap(lambda v: jax.jvp(lambda y: mb.moment_arms(model, y), (x,), (v,)),
                        out_axes=(None, -1))(jnp.eye(2))

    states = jnp.array([[0.1, 0.9], [-0.3, 1.5]])
    # One program (eager `lax.map`, no enclosing jit) for R and its derivative at both
    # states and at the four shifted states of each: compiled once, for the oracle too.
    r, d_r = (np.asarray(x).reshape(2, 5, *x.shape[1:])
              for x in jax.lax.map(r_and_dr, (states[:, None] + shifts[None]).reshape(-1, 2)))
    for k in range(2):
        d_r_k, r_k = d_r[k, 0], r[k]
        fd = np.stack([(r_k[1 + i] - r_k[3 + i]) / (2 * h) for i in range(2)], axis=-1)
        assert np.abs(d_r_k).max() > 0.05
        np.testing.assert_allclose(d_r_k, np.swapaxes(d_r_k, 0, 2), rtol=0, atol=1e-13)
        np.testing.assert_allclose(d_r_k, fd, rtol=0, atol=1e-9)


def _chained_wraps_model():
    """Two muscles from ground to body "two", each over a cylinder on "one" and then a
    sphere / ellipsoid on "two", both on the same straight segment: at the states
    below the second wrap is computed from the first one's tangent point and the
    first (in the next pass) from the second one's."""
    b = mb.ModelBuilder("chained")
    a = b.add_coordinate("a", range=(-1, 1))
    c = b.add_coordinate("c", range=(-1, 1))
    inertia = jnp.diag(jnp.array([0.01, 0.01, 0.01]))
    b.add_body(mb.Body("one", 1.0, (0.05, 0, 0), inertia))
    b.add_body(mb.Body("two", 1.0, (0.05, 0, 0), inertia))
    b.add_joint(mb.revolute("j1", "ground", "one", (0.1, 0.2, 1), mb.Coordinate(a)))
    b.add_joint(mb.revolute("j2", "one", "two", (0, 0.3, 1), mb.Coordinate(c), offset=(0.1, 0, 0)))
    pts = [mb.PathPoint("ground", (-0.08, 0.01, 0.005)), mb.PathPoint("two", (0.08, 0.012, -0.004))]
    cyl = mb.WrapCylinder("cyl", "one", 0.015, 0.2)
    b.muscles.append(mb.Muscle("cyl_sphere", pts, [cyl, mb.WrapSphere("sph", "two", 0.015)]))
    b.muscles.append(mb.Muscle("cyl_ellipsoid", pts, [cyl, mb.WrapEllipsoid(
        "ell", "two", (0.02, 0.012, 0.016), xyz_body_rotation=(0.1, 0.2, 0.3))]))
    return b.build()


@pytest.mark.slow  # CI: every wrap kind (hand models); TMIN, ECRL against OpenSim (MoBL-ARMS parity)
def test_closed_form_equals_autodiff_chained_wraps():
    """Closed form == autodiff when one wrap's tangent point feeds the next wrap, and the
    multi-wrap passes stop before the path is consistent (docs/concepts/muscles.md, Wrapping)."""
    model = _chained_wraps_model()
    lay = layout(model)
    states = jnp.array([(0.25, -0.4), (0.0, 0.0)])

    def one(q):
        r = resolve_all(lay, q, mb.body_transforms(model, q))
        return mb.moment_arms(model, q), mb.moment_arms(model, q, method="autodiff"), r.history

    rc, ra, (applied, engaged, node_a, node_b, *_) = jax.jit(lambda qs: jax.lax.map(one, qs))(states)
    rc, ra = np.asarray(rc), np.asarray(ra)
    # the chain happens: in the second pass the cylinder (slot 0) wraps the segment that
    # ends at the second wrap's r1 (node P + 2) and the second wrap starts at the
    # cylinder's r2 (node P + 1)
    P = lay.P
    for k in range(2):
        assert bool(applied[0, 1, k]) and bool(engaged[0, 1, k, 0]) and bool(engaged[0, 1, k, 1])
        assert int(node_b[0, 1, k, 0]) == P + 2 and int(node_a[0, 1, k, 1]) == P + 1
    assert np.all(np.isfinite(rc))
    scale = np.abs(ra).max()
    np.testing.assert_allclose(rc, ra, atol=TOL_CLOSED_VS_AUTODIFF * max(scale, 1.0), rtol=0)


def _primitive_count(jaxpr, name):
    """How many `name` primitives `jaxpr` holds, nested jaxprs (jit, scan, cond, while) included."""
    n = 0
    for eqn in jaxpr.eqns:
        n += eqn.primitive.name == name
        for param in eqn.params.values():
            for sub in param if isinstance(param, (tuple, list)) else (param,):
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns"):
                    n += _primitive_count(inner, name)
    return n


def test_multi_wrap_passes_stay_a_branch_under_vmap():
    """Under `jax.vmap` the multi-wrap passes (and the other branches of the path
    resolution) stay `lax.cond`s on an unbatched predicate, run while some state of the
    batch has a muscle left, instead of becoming selects that run all 8 passes for every
    state. (That the batch's lengths and moment arms are the states' own is
    `test_a_batch_maps_its_states_one_at_a_time_where_paths_iterate`.)"""
    model = _chained_wraps_model()
    states = jnp.array([(0.25, -0.4), (0.0, 0.0), (-0.5, 0.7)])
    f = lambda q: mb.muscle_lengths_and_moment_arms(model, q)  # noqa: E731
    single = jax.make_jaxpr(f)(states[0]).jaxpr
    batched = jax.make_jaxpr(jax.vmap(f))(states).jaxpr
    assert _primitive_count(single, "cond") >= 3
    assert _primitive_count(batched, "cond") == _primitive_count(single, "cond")


def test_no_nan_gradients_at_degenerate_states():
    model = _arm(WRAPS["sphere"])
    g = jax.jit(jax.grad(lambda q: jnp.sum(mb.muscle_lengths(model, q))))(jnp.zeros(2))
    assert np.all(np.isfinite(np.asarray(g)))


def test_lengthening_speed_is_minus_R_transpose_qd():
    """v = dL/dt = -Rᵀq'; and muscle_lengths_and_moment_arms, which resolves the paths
    once, gives muscle_lengths and the closed-form moment_arms (tests above and the
    OpenSim parity use it for both), here on a muscle over a sphere and a cylinder (the
    multi-pass loop)."""
    model = _arm(WRAPS_MULTI["sphere_cylinder"])
    q, qd = jnp.array([-0.3, 1.9]), jnp.array([0.7, -1.1])
    (l_both, r_both), lengths, r, v = jax.jit(lambda q, qd: (
        mb.muscle_lengths_and_moment_arms(model, q), mb.muscle_lengths(model, q), mb.moment_arms(model, q),
        mb.muscle_lengthening_speeds(model, q, qd)))(q, qd)
    np.testing.assert_allclose(v, -r.T @ qd, atol=1e-12)
    assert np.all(np.abs(np.asarray(v)) > 1e-3)
    np.testing.assert_allclose(np.asarray(l_both), np.asarray(lengths), rtol=1e-14, atol=1e-16)
    np.testing.assert_allclose(np.asarray(r_both), np.asarray(r), rtol=1e-14, atol=1e-16)


def test_eager_calls_compile_once_per_model():
    """Called outside jit, the public entry points run one program, compiled once per model
    structure: a new state, or a model with the same structure and other values, compiles
    nothing (no trace, lowering or compile event)."""
    model = _arm(WRAPS["sphere"])
    other = eqx.tree_at(lambda m: m.muscles[0].wraps[0].radius, model, 0.8 * model.muscles[0].wraps[0].radius)
    q0 = STATES[0]  # concrete, closed over: an eager call
    for call in (mb.muscle_lengths, mb.moment_arms):
        program = jax.make_jaxpr(lambda call=call: call(model, q0))()
        assert [e.primitive.name for e in program.eqns] in (["jit"], ["pjit"]), program
        call(model, STATES[0])
    events = []

    def record(name, secs, **kw):
        events.append(name)

    jax.monitoring.register_event_duration_secs_listener(record)
    try:
        for m, q in ((model, STATES[1]), (other, STATES[2])):
            mb.muscle_lengths(m, q)
            mb.moment_arms(m, q)
    finally:
        jax.monitoring.unregister_event_duration_listener(record)
    assert [e for e in events if e.startswith("/jax/core/compile/")] == []


def test_conditional_point_switch_is_reported():
    model = _arm(None)
    on = mb.path_events(model, jnp.array([0.0, 0.5])).conditional_active[0]
    off = mb.path_events(model, jnp.array([0.0, 1.5])).conditional_active[0]
    assert bool(on[2]) and not bool(off[2])


class _ScaledSphere(AbstractWrapObject):
    """A sphere whose surface length is multiplied by `scale`: a wrap kind gone astray (as
    MoBL-ARMS's TMIN ellipsoid at some states, metres of length), for `path_status`."""

    name: str = eqx.field(static=True)
    body: str = eqx.field(static=True)
    translation: jax.Array
    xyz_body_rotation: jax.Array
    radius: jax.Array
    scale: float = eqx.field(static=True)
    quadrant: str = eqx.field(static=True)
    range: tuple = eqx.field(static=True)
    method: str = eqx.field(static=True)

    def __init__(self, sphere, scale):
        for f in ("name", "body", "translation", "xyz_body_rotation", "radius", "quadrant", "range", "method"):
            setattr(self, f, getattr(sphere, f))
        self.scale = scale

    def wrap_parameters(self, dtype):
        return jnp.stack([self.radius]).astype(dtype)

    def turn_radius(self, dtype):
        return jnp.asarray(self.radius, dtype)

    def algorithm(self, n_wraps):
        from jaxmb._muscles._sphere import _SPHERE
        from jaxmb._muscles._wrap_base import WrapAlgorithm

        def wrap(p1, p2, prm, ax, sg, skip=False):
            code, r1, r2, wl = _SPHERE.wrap(p1, p2, prm, ax, sg, skip)
            return code, r1, r2, self.scale * wl

        return WrapAlgorithm(wrap)


def test_path_status_flags_implausible_lengths_under_vmap():
    """`path_status`: the sphere's paths are plausible at every state; the same sphere with a surface length 300 times too long (metres) or negative is
    flagged where (and only where) it wraps, per state under vmap."""
    sphere = WRAPS["sphere"]
    wraps = {"good": sphere, "long": _ScaledSphere(sphere, 300.0), "negative": _ScaledSphere(sphere, -1.0)}
    model = _arm(wraps)
    st, lengths = jax.jit(jax.vmap(lambda q: (mb.path_status(model, q), mb.muscle_lengths(model, q))))(STATES)
    engaged = np.asarray(jax.vmap(lambda q: mb.path_events(model, q).wrap_engaged[0][0])(STATES))
    assert engaged.any()
    assert st.passes_converged.shape == (len(STATES), 3) and bool(jnp.all(st.passes_converged))
    np.testing.assert_array_equal(np.asarray(st.plausible[:, 0]), True)
    np.testing.assert_array_equal(np.asarray(st.plausible[:, 1]), ~engaged)
    np.testing.assert_array_equal(np.asarray(st.plausible[:, 2]), ~engaged)
    np.testing.assert_array_equal(np.asarray(st.ok), np.asarray(st.plausible))
    np.testing.assert_array_equal(np.asarray(st.result == mb.RESULTS.path_implausible), ~np.asarray(st.plausible))
    np.testing.assert_array_equal(np.asarray(st.result == mb.RESULTS.successful), np.asarray(st.ok))
    assert float(jnp.max(jnp.where(engaged, lengths[:, 1], 0.0))) > 1.0  # metres: the case it catches


def test_fitting_a_path_that_failed_at_every_sample_names_path_status():
    """`fit_function_paths` refuses a path whose geometry failed (`path_status`) at every
    sample state, naming it, instead of "0 sample states cannot fit"."""
    model = _arm({"long": _ScaledSphere(WRAPS["sphere"], 300.0)})
    q = jnp.stack([jnp.linspace(-0.8, 0.8, 12), jnp.linspace(1.8, 2.0, 12)], axis=1)  # the sphere wraps at all
    with pytest.raises(ValueError, match="path 'long' failed at every sample state .*path_status"):
        mb.fit_function_paths(model, q, max_order=2)


class _OffSurfaceSphere(_ScaledSphere):
    """A sphere whose tangent points lie 1 % outside it: a wrap whose iteration stopped
    short of the tangency equations (as an ellipsoid Gauss-Newton stopped at its cap)."""

    def algorithm(self, n_wraps):
        from jaxmb._muscles._sphere import _SPHERE

        def wrap(p1, p2, prm, ax, sg, skip=False):
            code, r1, r2, wl = _SPHERE.wrap(p1, p2, prm, ax, sg, skip)
            return code, 1.01 * r1, 1.01 * r2, wl

        return dataclasses.replace(_SPHERE, wrap=wrap)


def test_path_status_flags_wraps_whose_tangent_points_do_not_solve_the_tangency_equations():
    """`path_status(...).wraps_converged`: the sphere's, cylinder's and ellipsoid's tangent
    points solve their tangency equations (on the surface, the straight line tangent there;
    OpenSim's ellipsoid iterate within its stopping tolerance) wherever they wrap; a sphere
    whose tangent points lie 1 % off its surface (a residual of 0.02) is flagged where,
    and only where, it wraps, while its length stays plausible."""
    wraps = {k: WRAPS[k] for k in ("sphere", "cylinder", "ellipsoid")}
    model = _arm({**wraps, "off": _OffSurfaceSphere(WRAPS["sphere"], 1.0)})
    states = jnp.concatenate([STATES, jnp.array([(0.5, 0.0), (-0.6, 1.8), (0.7, 1.95)])])
    st, events = jax.jit(jax.vmap(lambda q: (mb.path_status(model, q), mb.path_events(model, q))))(states)
    engaged = np.asarray(jnp.stack([e[:, 0] for e in events.wrap_engaged], axis=1))  # (states, muscles)
    assert engaged[:, :3].sum(axis=0).min() >= 2  # every real kind wraps at some of the states
    np.testing.assert_array_equal(np.asarray(st.wraps_converged[:, :3]), True)
    np.testing.assert_array_equal(np.asarray(st.wraps_converged[:, 3]), ~engaged[:, 3])
    assert engaged[:, 3].any() and not engaged[:, 3].all()
    np.testing.assert_array_equal(np.asarray(st.plausible), True)
    np.testing.assert_array_equal(np.asarray(st.ok), np.asarray(st.wraps_converged))
    failed = np.asarray(st.result == mb.RESULTS.path_wrap_not_converged)
    np.testing.assert_array_equal(failed, ~np.asarray(st.wraps_converged))
    assert "tangency equations" in mb.RESULTS[jax.tree.map(lambda v: v[np.argmax(failed[:, 3]), 3], st.result)]


def test_path_status_result_is_one_code_per_muscle_and_state_worst_failure_first():
    """`PathStatus.result`: an implausible length outranks a wrap that did not converge,
    which outranks passes that did not; batched like the fields."""
    t, f = True, False
    st = mb.PathStatus(jnp.array([[t, f, t, t, f]] * 2), jnp.array([[t, t, f, t, f]] * 2),
                       jnp.array([[t, t, t, f, f]] * 2))
    expected = [mb.RESULTS.successful, mb.RESULTS.path_passes_not_converged, mb.RESULTS.path_wrap_not_converged,
                mb.RESULTS.path_implausible, mb.RESULTS.path_implausible]
    for k, code in enumerate(expected):
        assert np.asarray(st.result == code)[:, k].all()
        assert np.asarray(st.result == code).sum() == 2 * expected.count(code)
    np.testing.assert_array_equal(np.asarray(st.result == mb.RESULTS.successful), np.asarray(st.ok))


def test_the_ellipsoids_far_side_is_a_path_event_where_the_length_jumps():
    """arm26's BIClong: in a band of shoulder elevation near 0.516 rad OpenSim's far-side rule
    sends the ellipsoid's surface path the long way round and the length jumps by 87 mm at
    the band's edges (OpenSim 4.6's getLength at (0.51692513, 1.67395939) and (0.518,
    1.67395939): 0.44489991720069805 and 0.35804894258163317 m, by
    `Model('arm26.osim').getMuscles().get('BIClong').getLength(s)`). `path_events` reports it:
    `PathEvents.crossed` says BIClong crosses a discontinuity across the jump, and no muscle
    does between the two sides outside the band."""
    model = mb.load_osim(pathlib.Path(mb.__file__).parent / "data" / "arm26.osim", wrap_geometry="opensim")
    k = model.muscle_names.index("BIClong")
    states = jnp.array([[0.514, 1.67395939], [0.51692513, 1.67395939], [0.5169, 1.0], [0.518, 1.67395939]])
    lengths, events = jax.jit(jax.vmap(lambda q: (mb.muscle_lengths(model, q), mb.path_events(model, q))))(states)
    np.testing.assert_allclose(lengths[[1, 3], k], [0.44489991720069805, 0.35804894258163317], rtol=0, atol=1e-9)
    assert np.asarray(events.wrap_far_side[k]).tolist() == [[False], [True], [True], [False]]
    assert not any(bool(jnp.any(f)) for i, f in enumerate(events.wrap_far_side) if i != k)
    assert float(lengths[1, k] - lengths[3, k]) > 0.08
    at = lambda i: jax.tree.map(lambda x: x[i], events)  # noqa: E731
    assert bool(at(0).crossed(at(1))[k]) and bool(at(1).crossed(at(3))[k])
    assert not bool(jnp.any(at(0).crossed(at(3))))
    consecutive = at(slice(None, -1)).crossed(at(slice(1, None)))  # batched: (3, n_muscles)
    assert consecutive.shape == (3, len(model.muscles))
    assert np.asarray(consecutive[:, k]).tolist() == [True, False, True]
    with pytest.raises(ValueError, match="compare the events of one model"):
        at(0).crossed(mb.PathEvents((), (), ()))


class _Lowered:
    """Stands for one of the sweep's jitted programs (`_sweep._SWEEP_CHUNK`) and
    counts the programs lowered through it."""

    def __init__(self, jitted):
        self.jitted, self.count = jitted, 0

    def lower(self, *args):
        self.count += 1
        return self.jitted.lower(*args)


def test_sweep_rows_equal_the_moment_arms_by_either_method_in_chunks(monkeypatch):
    """`moment_arm_sweep`: in chunks of 4 (the last one padded), the autodiff route's single
    forward-mode direction and the closed form give row k of `moment_arms` at every
    sweep state, and `progress` sees every chunk. A short sweep takes the program compiled
    at XLA's backend optimization level 0 by default, ``optimize=True`` the other one, and
    both give the same rows. (The suite's own XLA_FLAGS compile everything at level 0, see
    conftest.py, so here the two differ in their entry, not in XLA's code; the optimised
    program's figures are the command line's, docs/dev/performance.md.)"""
    model = _arm(WRAPS["sphere"])
    seen = []
    quick, full = _Lowered(_sweep._SWEEP_CHUNK[False]), _Lowered(_sweep._SWEEP_CHUNK[True])
    monkeypatch.setitem(_sweep._SWEEP_CHUNK, False, quick)
    monkeypatch.setitem(_sweep._SWEEP_CHUNK, True, full)
    x, r_ad = mb.moment_arm_sweep(model, "elbow", n=11, method="autodiff", chunk=4,
                                  progress=lambda i, n: seen.append((i, n)))
    assert (quick.count, full.count) == (1, 0)
    _, r_cf = mb.moment_arm_sweep(model, "elbow", n=11, chunk=4)
    _, r_opt = mb.moment_arm_sweep(model, "elbow", n=11, method="autodiff", chunk=4, optimize=True)
    assert (quick.count, full.count) == (2, 1)
    assert x.shape == (11,) and r_ad.shape == (11, 1)
    assert seen == [(4, 11), (8, 11), (11, 11)]
    k = model.coordinate_index("elbow")
    qs = jnp.tile(model.q_default, (11, 1)).at[:, k].set(x)
    full = jax.vmap(lambda q: mb.moment_arms(model, q, method="autodiff")[k])(qs)
    assert float(jnp.max(jnp.abs(full))) > 0.01  # the sphere wraps: the rows are not all zero
    np.testing.assert_allclose(r_ad, full, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(r_cf, full, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(r_opt, full, rtol=1e-10, atol=1e-14)
    # the frozen path (OpenSim's computeMomentArm) is -dL/dq over a sphere, a geodesic
    _, r_fz = mb.moment_arm_sweep(model, "elbow", n=11, method="frozen_path", chunk=4)
    np.testing.assert_allclose(r_fz, full, rtol=1e-10, atol=1e-14)
    with pytest.raises(ValueError, match="method must be 'closed_form', 'autodiff' or 'frozen_path'"):
        mb.moment_arm_sweep(model, "elbow", method="finite_differences")


def test_sweep_compiles_a_program_per_group_of_muscles_and_each_column_is_its_moment_arm(monkeypatch):
    """The sweep's muscles in groups of their own programs: the muscles with several wraps
    together, then those with one wrap by its class, the muscles without wraps in the last
    group. One program is lowered per group, and every column, whichever group computed
    it, is row k of the whole model's R; `progress` rises to n."""
    from jaxmb._muscles._sweep import _sweep_groups

    model = _arm({"two": WRAPS_MULTI["sphere_cylinder"], "sph": WRAPS["sphere"], "cyl": WRAPS["cylinder"],
                  "none": None, "cyl2": WRAPS["cylinder"]})
    assert _sweep_groups(model.muscles) == [[0], [2, 4], [1, 3]]
    assert _sweep_groups(model.muscles[1:4]) == [[1], [0, 2]]  # no multi-wrap muscle
    assert _sweep_groups(model.muscles[3:4]) == [[0]]  # no wraps at all
    quick = _Lowered(_sweep._SWEEP_CHUNK[False])
    monkeypatch.setitem(_sweep._SWEEP_CHUNK, False, quick)
    seen = []
    x, rows = mb.moment_arm_sweep(model, "elbow", n=7, method="autodiff", chunk=4,
                                  progress=lambda i, n: seen.append(i))
    assert quick.count == 3
    assert seen == sorted(seen) and seen[-1] == 7 and len(seen) == 6  # 2 chunks x 3 groups
    # The programs are kept: the same sweep of a model with other values compiles nothing.
    other = eqx.tree_at(lambda m: m.muscles[1].points[4].location_, model, jnp.array([0.005, -0.1, 0.0]))
    _, again = mb.moment_arm_sweep(other, "elbow", n=7, method="autodiff", chunk=4)
    assert quick.count == 3
    assert not np.allclose(again[:, 1], rows[:, 1])  # the moved point's muscle: its own values
    np.testing.assert_allclose(np.delete(again, 1, axis=1), np.delete(rows, 1, axis=1), rtol=1e-13, atol=1e-16)
    k = model.coordinate_index("elbow")
    qs = jnp.tile(model.q_default, (7, 1)).at[:, k].set(x)
    full = jax.vmap(lambda q: mb.moment_arms(model, q, method="autodiff")[k])(qs)
    assert np.all(np.max(np.abs(np.asarray(full)), axis=0) > 1e-3)
    np.testing.assert_allclose(rows, full, rtol=1e-10, atol=1e-14)


def _one_sided_muscles_model():
    """The two-link arm with three muscles: ground to upper (crosses the shoulder only),
    upper to lower (the elbow only), and one on the upper arm alone whose moving point
    follows the elbow (a joint function of it, no joint crossed)."""
    b = mb.ModelBuilder("sides")
    a = b.add_coordinate("shoulder", range=(-1, 1))
    c = b.add_coordinate("elbow", range=(0, 2))
    inertia = jnp.diag(jnp.array([0.01, 0.001, 0.01]))
    b.add_body(mb.Body("upper", 2.0, (0, -0.15, 0), inertia))
    b.add_body(mb.Body("lower", 1.0, (0, -0.15, 0), inertia))
    b.add_joint(mb.revolute("sh", "ground", "upper", (0, 0, 1), mb.Coordinate(a)))
    b.add_joint(mb.revolute("el", "upper", "lower", (0.3, 0.2, 1), mb.Coordinate(c), offset=(0, -0.3, 0)))
    b.muscles.append(mb.Muscle("shoulder_only", [mb.PathPoint("ground", (0.02, 0.1, 0.01)),
                                                  mb.PathPoint("upper", (0.03, -0.1, 0.02))],
                               [mb.WrapSphere("s1", "ground", 0.02)]))
    b.muscles.append(mb.Muscle("elbow_only", [mb.PathPoint("upper", (0.03, -0.1, 0.02)),
                                               mb.PathPoint("lower", (0.0, -0.1, 0.0))],
                               [mb.WrapSphere("s2", "upper", 0.025, translation=(0, -0.3, 0))]))
    b.muscles.append(mb.Muscle("moving_point", [mb.PathPoint("upper", (0.02, -0.05, 0.0)), mb.MovingPathPoint(
        "upper", mb.Constant(0.02), mb.Polynomial(1, [-0.2, 0.03]), mb.Constant(0.01))], []))
    return b.build()


def test_sweep_computes_only_the_muscles_that_can_depend_on_the_coordinate():
    """A muscle whose bodies all lie on one side of a coordinate's joint, with no joint
    function of it in its points, has a zero row in a sweep of that coordinate and is not
    computed; the others' rows are the moment arms (the computed and the skipped columns
    both equal row k of the whole model's R)."""
    from jaxmb._muscles._sweep import spans_coordinate

    model = _one_sided_muscles_model()
    depends = {name: [spans_coordinate(model, m, model.coordinate_index(name)) for m in model.muscles]
               for name in ("shoulder", "elbow")}
    assert depends == {"shoulder": [True, False, False], "elbow": [False, True, True]}
    for name in ("shoulder", "elbow"):
        k = model.coordinate_index(name)
        x, rows = mb.moment_arm_sweep(model, name, n=5, method="autodiff")
        qs = jnp.tile(model.q_default, (5, 1)).at[:, k].set(x)
        full = jax.vmap(lambda q: mb.moment_arms(model, q, method="autodiff")[k])(qs)
        assert np.all(np.asarray(rows)[:, ~np.asarray(depends[name])] == 0.0)
        assert np.all(np.max(np.abs(np.asarray(full)[:, depends[name]]), axis=0) > 1e-3)  # computed: not zero
        np.testing.assert_allclose(rows, full, rtol=1e-12, atol=1e-15)


def test_a_sweep_of_a_traced_model_says_what_to_do():
    """`moment_arm_sweep` runs compiled programs from Python; called on a traced model (under
    `jax.jit`, `jax.grad`) it ended in an AttributeError of its packing. It now names the
    model, the cause and the call to use under a transformation."""
    model = _one_sided_muscles_model()
    with pytest.raises(ValueError, match=r"moment_arm_sweep: model .* has traced arrays.*outside jax.jit.*"
                                         r"rows of jaxmb.moment_arms"):
        jax.jit(lambda m: mb.moment_arm_sweep(m, "elbow", n=3)[1])(model)
    # n=True was a sweep of one value (a bool is an int to Python).
    with pytest.raises(ValueError, match=r"n \(the number of values\) and chunk must be integers >= 1, got n=True"):
        mb.moment_arm_sweep(model, "elbow", n=True)


# The public entry points of the muscle module, each called with a NaN coordinate.
NAN_Q = jnp.array([0.1, np.nan])
NONFINITE_CALLS = {
    "muscle_lengths": lambda m, q: mb.muscle_lengths(m, q),
    "moment_arms": lambda m, q: mb.moment_arms(m, q),
    "muscle_lengths_and_moment_arms": lambda m, q: mb.muscle_lengths_and_moment_arms(m, q),
    "moment_arm_derivatives": lambda m, q: mb.moment_arm_derivatives(m, q),
    "path_events": lambda m, q: mb.path_events(m, q),
    "muscle_lengthening_speeds": lambda m, q: mb.muscle_lengthening_speeds(m, q, jnp.zeros(2)),
}


@pytest.mark.parametrize("name", sorted(NONFINITE_CALLS))
def test_nonfinite_coordinates_are_refused_naming_the_argument(name):
    """NaN in q used to give plausible lengths (issue 34, item 10): eagerly a ValueError
    names the function, the argument and the coordinate, before any path is resolved."""
    with pytest.raises(ValueError, match=rf"{name}: q must be finite, got NaN or inf at coordinates \['elbow'\]"):
        NONFINITE_CALLS[name](_arm(None), NAN_Q)


def test_nonfinite_coordinates_are_refused_under_jit():
    """Under jit the values are not known at trace time: eqx.error_if raises at run time
    with the same message (also for qd), and finite states still pass."""
    model = _arm(None)
    lengths = eqx.filter_jit(lambda q: mb.muscle_lengths(model, q))
    speeds = eqx.filter_jit(lambda q, qd: mb.muscle_lengthening_speeds(model, q, qd))
    assert np.all(np.isfinite(np.asarray(lengths(STATES[0]))))
    with pytest.raises(eqx.EquinoxRuntimeError, match="muscle_lengths: q must be finite"):
        jax.block_until_ready(lengths(NAN_Q))
    with pytest.raises(eqx.EquinoxRuntimeError, match="muscle_lengthening_speeds: qd must be finite"):
        jax.block_until_ready(speeds(STATES[0], jnp.array([np.inf, 0.0])))
    with pytest.raises(mb.ModelError, match=r"moment_arms: q must have shape \(2,\)"):
        mb.moment_arms(model, jnp.zeros(3))


def test_errors_name_the_element():
    with pytest.raises(mb.ModelError):
        mb.Muscle("m", [mb.PathPoint("ground", (0, 0, 0))])
    with pytest.raises(mb.ModelError):
        mb.WrapSphere("s", "upper", 0.1, quadrant="diagonal")


def _nan_constant():
    """A Constant holding NaN, made without its constructor (whatever that checks)."""
    return eqx.tree_at(lambda f: f.value, mb.Constant(0.0), jnp.asarray(jnp.nan))


BAD_OBJECTS = {
    "point_nan": lambda: mb.PathPoint("upper", (jnp.nan, 0.1, 0.0), name="bad"),
    "point_inf": lambda: mb.PathPoint("upper", (0.0, np.inf, 0.0), name="bad"),
    "conditional_nan": lambda: mb.ConditionalPathPoint("upper", (0.0, 0.1, np.nan), mb.Coordinate(0),
                                                       (0.0, 1.0), name="bad"),
    "conditional_range_nan": lambda: mb.ConditionalPathPoint("upper", (0.0, 0.1, 0.0), mb.Coordinate(0),
                                                             (0.0, np.nan), name="bad"),
    "moving_nan": lambda: mb.MovingPathPoint("upper", mb.Constant(0.0), _nan_constant(), mb.Constant(0.0),
                                             name="bad"),
    "sphere_negative": lambda: mb.WrapSphere("bad", "upper", -0.02),
    "sphere_zero": lambda: mb.WrapSphere("bad", "upper", 0.0),
    "sphere_nan": lambda: mb.WrapSphere("bad", "upper", np.nan),
    "sphere_translation_nan": lambda: mb.WrapSphere("bad", "upper", 0.02, translation=(0.0, np.nan, 0.0)),
    "sphere_rotation_inf": lambda: mb.WrapSphere("bad", "upper", 0.02, xyz_body_rotation=(0.0, 0.0, np.inf)),
    "cylinder_negative_radius": lambda: mb.WrapCylinder("bad", "upper", -0.02, 0.1),
    "cylinder_negative_length": lambda: mb.WrapCylinder("bad", "upper", 0.02, -0.1),
    "ellipsoid_negative": lambda: mb.WrapEllipsoid("bad", "upper", (0.03, -0.02, 0.025)),
    "ellipsoid_nan": lambda: mb.WrapEllipsoid("bad", "upper", (0.03, np.nan, 0.025)),
    "ellipsoid_method": lambda: mb.WrapEllipsoid("bad", "upper", (0.03, 0.02, 0.025), method="hybird"),
    "torus_negative_inner": lambda: mb.WrapTorus("bad", "upper", -0.01, 0.04),
    "torus_nan_outer": lambda: mb.WrapTorus("bad", "upper", 0.01, np.nan),
    "torus_search": lambda: mb.WrapTorus("bad", "upper", 0.01, 0.04, search="newton"),
    "torus_no_hole": lambda: mb.WrapTorus("bad", "upper", 0.04, 0.04),  # the tube as wide as its centre circle
    # These selected no segment or no state (the wrap never engaged, the point never on the path):
    "sphere_range_reversed": lambda: mb.WrapSphere("bad", "upper", 0.02, range=(5, 1)),
    "sphere_range_zero": lambda: mb.WrapSphere("bad", "upper", 0.02, range=(0, 2)),
    "conditional_range_reversed": lambda: mb.ConditionalPathPoint("upper", (0.0, 0.1, 0.0), mb.Coordinate(0),
                                                                  (1.0, 0.0), name="bad"),
}


@pytest.mark.parametrize("case", sorted(BAD_OBJECTS))
def test_bad_path_points_and_wraps_are_refused_at_construction(case):
    """Non-finite locations, ranges, functions' parameters and frames, non-positive radii,
    lengths and semi-axes, and unknown PathWrap methods: a ModelError naming the object."""
    with pytest.raises(mb.ModelError, match="'bad'"):
        BAD_OBJECTS[case]()


# "moving_nan" makes its NaN with a jnp operation, which a jit traces: a traced value.
@pytest.mark.parametrize("case", sorted(set(BAD_OBJECTS) - {"moving_nan"}))
def test_bad_path_points_and_wraps_are_refused_when_built_under_jit(case):
    """The same refusals when the object is built while a jit traces (its parameters given
    as numbers: the cylinder's and sphere's radii and a conditional point's range passed
    silently there, their conversion being traced)."""
    with pytest.raises(mb.ModelError, match="'bad'"):
        jax.jit(lambda: (BAD_OBJECTS[case](), jnp.zeros(()))[1])()


@pytest.mark.parametrize("bounds", [(1.0, -1.0), (np.nan, 1.0)])
def test_clamped_coordinate_needs_an_interval(bounds):
    with pytest.raises(mb.ModelError, match="ClampedCoordinate"):
        ClampedCoordinate(mb.Coordinate(0), *bounds)
    ClampedCoordinate(mb.Coordinate(0), -np.inf, np.inf)


def test_osim_path_point_with_nan_location_does_not_load(tmp_path):
    """A `<location>nan 0.1 0</location>` on a PathPoint of an .osim is an error naming the point."""
    source = pathlib.Path(mb.__file__).parent / "data" / "arm26.osim"
    text = source.read_text()
    good = "<location>-0.053650000000000003 -0.013729999999999999 0.14723</location>"
    assert text.count(good) == 1  # TRIlong-P1
    path = tmp_path / "arm26_nan.osim"
    path.write_text(text.replace(good, "<location>nan 0.1 0</location>"))
    with pytest.raises(mb.ModelError, match="TRIlong-P1"):
        mb.load_osim(path)


# --------------------------------------------------------------------------
# Degenerate wrap geometry: finite values and gradients (never a silent NaN)
# --------------------------------------------------------------------------

_ELLIPSOID = mb.WrapEllipsoid("e", "ground", (1.0, 1.0, 1.0)).algorithm(1)


def _ell_span(p1, p2, dims):
    """Length of the span p1 -> r1 -> (ellipsoid surface) -> r2 -> p2 in the wrap frame."""
    _, r1, r2, wl = _ELLIPSOID.wrap(p1, p2, dims, 0, 0)
    return norm(p1 - r1) + wl + norm(p2 - r2)


# Compiled once and shared by the ellipsoid tests below (op-by-op, each while loop of the
# wrap would compile again at every call).
_span = jax.jit(_ell_span)
_span_grads = jax.jit(lambda p1, p2, dims: (jax.grad(_ell_span, argnums=(0, 1))(p1, p2, dims),
                                            jax.jacfwd(_ell_span, argnums=(0, 1))(p1, p2, dims)))
_ell_wrap = jax.jit(lambda p1, p2, dims: _ellipsoid_wrap(p1, p2, dims, 0, 0))


def _span_and_grads(p1, p2, dims):
    """Ellipsoid span length and its forward- and reverse-mode gradients w.r.t. both ends."""
    rev, fwd = _span_grads(p1, p2, dims)
    return _span(p1, p2, dims), rev, fwd


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_ellipsoid_closest_point_on_a_coordinate_plane_is_the_section_solution(axis):
    """A point within round-off of a coordinate plane goes to OpenSim's 2-D solve in that
    section (one Newton loop; the section is picked at run time). Outside the ellipsoid
    the result is the 3-D closest point: on the surface (to OpenSim's Newton tolerance),
    with p - x along the outward normal; and a point 1e-9 off the plane, which takes the
    general 3-D route, lands within 1e-9 of it. Semi-axes normalised to sum 3, as in
    the wrap."""
    a = jnp.array([0.03, 0.02, 0.025])
    a = a * 3.0 / jnp.sum(a)
    p = jnp.array([1.9, -1.4, 1.2]).at[axis].set(0.0)
    closest = jax.jit(_ellipsoid_closest)
    x = closest(a, p)
    normal = x / a**2
    assert float(x[axis]) == 0.0
    assert abs(float(jnp.sum((x / a) ** 2)) - 1.0) < 1e-9
    sin = jnp.linalg.norm(jnp.cross(p - x, normal)) / (jnp.linalg.norm(p - x) * jnp.linalg.norm(normal))
    assert float(sin) < 1e-12 and float((p - x) @ normal) > 0.0
    np.testing.assert_allclose(closest(a, p.at[axis].set(1e-9)), x, rtol=0, atol=1e-9)


@pytest.mark.parametrize("case", ["circular_section", "collinear", "coincident", "at_centre"])
def test_ellipsoid_wrap_degenerate_inputs_are_finite(case):
    """A sphere-shaped WrapEllipsoid (MoBL's SUPSP, 0.02 m) cuts circular sections, where an
    earlier construction took arctan2(0, 0) with a NaN gradient; collinear/coincident/centre
    inputs leave the wrapping plane undefined."""
    dims = jnp.array([0.02, 0.02, 0.02])
    p1, p2 = {"circular_section": ((0.03, 0.0, 0.0), (-0.03, 0.005, 0.0)),  # q11 = q22, q12 = 0 exactly
              "collinear": ((0.03, 0.0, 0.0), (0.06, 0.0, 0.0)),
              "coincident": ((0.03, 0.01, 0.0), (0.03, 0.01, 0.0)),
              "at_centre": ((0.0, 0.0, 0.0), (0.0, 0.03, 0.0))}[case]
    p1, p2 = jnp.array(p1), jnp.array(p2)
    for out in jax.tree_util.tree_leaves((_ell_wrap(p1, p2, dims), _span_and_grads(p1, p2, dims))):
        assert np.all(np.isfinite(np.asarray(out))), case
    if case == "circular_section":
        # On a sphere OpenSim's wrapping plane holds the centre: tangent lines plus the
        # great-circle arc as a polyline of n = floor(chord / 1 mm) equal-angle chords.
        def arc_angle(a, b, r=0.02):
            da, db = jnp.linalg.norm(a), jnp.linalg.norm(b)
            return jnp.arccos(a @ b / (da * db)) - jnp.arccos(r / da) - jnp.arccos(r / db)

        n = np.floor(float(2 * 0.02 * jnp.sin(arc_angle(p1, p2) / 2)) / 0.001)

        def sphere_span(a, b, r=0.02):
            da, db = jnp.linalg.norm(a), jnp.linalg.norm(b)
            return jnp.sqrt(da**2 - r**2) + jnp.sqrt(db**2 - r**2) + n * 2 * r * jnp.sin(arc_angle(a, b) / (2 * n))

        # OpenSim's tangent-point iteration stops at a squared residual of 1e-8 (in units
        # of the mean semi-axis): the tangent points are exact to ~1e-7 relative only, and
        # the length's derivative is that of the stopped iterate, which central differences
        # see (6.5e-7 from the exact sphere's derivative here, so the FD check can fail).
        length, rev, fwd = _span_and_grads(p1, p2, dims)
        np.testing.assert_allclose(length, sphere_span(p1, p2), rtol=1e-7)
        exact = np.concatenate(jax.grad(sphere_span, argnums=(0, 1))(p1, p2))
        x, h = jnp.concatenate([p1, p2]), 1e-6
        fd = np.array([(_span(*(x + h * e).reshape(2, 3), dims) - _span(*(x - h * e).reshape(2, 3), dims)) / (2 * h)
                       for e in jnp.eye(6)])
        for g in (rev, fwd):
            np.testing.assert_allclose(np.concatenate(g), fd, atol=2e-8)
            np.testing.assert_allclose(np.concatenate(g), exact, atol=2e-6)


# --------------------------------------------------------------------------
# WrapTorus: OpenSim's closest-point search, reproduced
# --------------------------------------------------------------------------

def _torus_segments(n=40, seed=3):
    """Random segments near a torus with centre-circle radius 0.04 (some far enough that the
    search stops away from a root of the residual, at a local minimum of its square)."""
    rng = np.random.default_rng(seed)
    p1 = rng.uniform(-0.3, 0.3, (n, 3))
    p2 = -0.5 * p1 + rng.uniform(-0.1, 0.1, (n, 3))
    return p1, p2


def test_torus_residual_is_opensims():
    """WrapTorus::calcCircleResids is d/du of |x|^2 - 4 r rho (rho: distance of x = p1 + u n
    from the torus axis), not of the squared distance to the circle |x|^2 - 2 r rho: its
    root is the point nearest the circle of radius 2r (docs/errata.md). jaxmb keeps it."""
    p1s, p2s = _torus_segments(8)
    r = 0.04
    for p1, p2 in zip(jnp.asarray(p1s), jnp.asarray(p2s)):
        n = (p2 - p1) / jnp.linalg.norm(p2 - p1)

        def phi(u, k):
            x = p1 + u * n
            return x @ x - 2.0 * k * r * jnp.sqrt(x[0] ** 2 + x[1] ** 2)

        for u in (-0.03, 0.0, 0.02, 0.07):
            g = _torus_resid((p1, p2, r), jnp.asarray(u))
            np.testing.assert_allclose(g, jax.grad(phi)(jnp.asarray(u), 2.0), rtol=1e-12, atol=1e-15)
            assert abs(float(g - jax.grad(phi)(jnp.asarray(u), 1.0))) > 1e-6


def test_torus_levenberg_marquardt_matches_minpack():
    """jaxmb's port of OpenSim's lmdif_C (one residual, one unknown) against MINPACK itself
    (scipy.optimize.leastsq, lmder with the same fixed-step forward-difference Jacobian):
    the same iterate, not just the same root, since OpenSim stops at ftol = xtol = 1e-4."""
    from scipy.optimize import leastsq

    p1s, p2s = _torus_segments()
    r = 0.04
    def solve(**options):
        run = jax.vmap(lambda a, b: lmdif_1d(_torus_resid, (a, b, jnp.asarray(r)), **options))
        return np.asarray(jax.jit(run)(jnp.asarray(p1s), jnp.asarray(p2s)))

    ref, converged = [], []
    for p1, p2 in zip(p1s, p2s):
        fun = lambda x, a=jnp.asarray(p1), b=jnp.asarray(p2): [float(_torus_resid((a, b, r), x[0]))]  # noqa: E731
        jac = lambda x, fun=fun: [[(fun([x[0] + 1e-5])[0] - fun(x)[0]) / 1e-5]]  # noqa: E731
        x, *_ = leastsq(fun, [0.0], Dfun=jac, ftol=1e-4, xtol=1e-4, gtol=0.0, factor=0.2)
        ref.append(x[0])
        converged.append(leastsq(fun, [x[0]], Dfun=jac, ftol=1e-14, xtol=1e-14, gtol=0.0)[0][0])
    ref = np.asarray(ref)
    np.testing.assert_allclose(solve(), ref, rtol=0, atol=1e-11)
    # The tolerance tells iterates apart: OpenSim's stops are not the converged points, and
    # other stopping rules give other iterates.
    assert np.max(np.abs(ref - np.asarray(converged))) > 1e-3
    for options in ({"xtol": 1e-8}, {"ftol": 1e-8}, {"factor": 100.0}):
        assert np.max(np.abs(solve(**options) - ref)) > 1e-10, options


def test_torus_levenberg_marquardt_skipped_lanes_make_no_iteration():
    """Under `vmap`, a lane whose result is not read (`skip`) stays at the start x = 0, and
    the lanes that are read reach the same iterate as without skipped neighbours."""
    p1s, p2s = _torus_segments()
    r = jnp.asarray(0.04)
    skip = jnp.arange(len(p1s)) % 2 == 0
    solve = jax.jit(jax.vmap(lambda a, b, s: lmdif_1d(_torus_resid, (a, b, r), s)))
    every = np.asarray(solve(jnp.asarray(p1s), jnp.asarray(p2s), jnp.zeros_like(skip)))
    some = np.asarray(solve(jnp.asarray(p1s), jnp.asarray(p2s), skip))
    assert np.all(some[np.asarray(skip)] == 0.0) and np.all(every[np.asarray(skip)] != 0.0)
    np.testing.assert_array_equal(some[~np.asarray(skip)], every[~np.asarray(skip)])


def test_ellipsoid_span_gradient_matches_central_differences():
    """The guards leave the generic (triaxial, non-circular) case untouched."""
    dims = jnp.array([0.03, 0.02, 0.025])
    p1, p2 = jnp.array([0.04, 0.01, 0.005]), jnp.array([-0.01, 0.045, -0.004])
    span = lambda a, b: _span(a, b, dims)  # noqa: E731
    (ga, gb), _ = _span_grads(p1, p2, dims)
    h, eye = 1e-7, jnp.eye(3)
    fda = jnp.array([(span(p1 + h * e, p2) - span(p1 - h * e, p2)) / (2 * h) for e in eye])
    fdb = jnp.array([(span(p1, p2 + h * e) - span(p1, p2 - h * e)) / (2 * h) for e in eye])
    np.testing.assert_allclose(np.concatenate([ga, gb]), np.concatenate([fda, fdb]), atol=1e-7)


def test_ellipsoid_iterate_rules_equal_forward_mode_through_the_iterations():
    """The closest-point Newton (`_newton_derivative`) and the tangent Gauss-Newton
    (`iterate_derivative(n_in=2)`) take the semi-axes as an input of their own: with a
    constant size (a symbolic-zero tangent, as along q) and with a live one, their
    Jacobians equal forward mode through the plain iterations (no custom rule) to round-off."""
    a = jnp.array([1.2, 0.8, 1.0])
    vs = jnp.array([0.1, 0.2, 0.97]) / jnp.linalg.norm(jnp.array([0.1, 0.2, 0.97]))
    x = jnp.concatenate([jnp.array([0.3, 0.7, -0.2]), jnp.array([2.0, 1.0, -0.1]), vs, jnp.array([0.05])])
    for p in (jnp.array([0.3, -0.2, 0.4]), jnp.array([1.5, 0.9, -0.7])):  # inside, outside
        ref = jax.jacfwd(E._ellipsoid_newton_plain, argnums=(0, 1))(a, p)
        got = jax.jacfwd(E._ellipsoid_lagrange, argnums=(0, 1))(a, p)
        np.testing.assert_allclose(np.concatenate(got), np.concatenate(ref), rtol=1e-12, atol=1e-13)
        np.testing.assert_allclose(jax.jacfwd(lambda y: E._ellipsoid_lagrange(a, y))(p), ref[1],
                                   rtol=1e-12, atol=1e-13)
    ref = jax.jacfwd(lambda y, b: E._ell_tangent_lm(y[0:3], y[3:6], b, y[6:9], y[9]), argnums=(0, 1))(x, a)
    got = jax.jacfwd(E._ell_tangent_iterate, argnums=(0, 1))(x, a)
    assert float(jnp.max(jnp.abs(ref[0]))) > 1e-2  # a live derivative
    for g, r in zip(got, ref):
        np.testing.assert_allclose(g, r, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(jax.jacfwd(lambda y: E._ell_tangent_iterate(y, a))(x), ref[0], rtol=1e-10, atol=1e-12)


def _sliding_case():
    """A segment over a cylinder (radius 2 cm) whose spiral OpenSim restarts with slid
    tangent points when the muscle has several wraps."""
    p1, p2 = jnp.array([0.0696, 0.028, -0.0398]), jnp.array([-0.0345, 0.0155, 0.0449])
    radius = jnp.asarray(0.02)
    _, r1, r2, _ = cylinder_wrap(p1, p2, radius, 0.3, 0, 1, single=True)
    return p1, p2, r1, r2, radius


def test_cylinder_multi_wrap_sliding_stops_at_a_fixed_point():
    """The restarts run until no end needs sliding: from the result, one more restart
    moves nothing; a segment that does not wrap (`skip`) makes none."""
    p1, p2, r1, r2, radius = _sliding_case()
    no = jnp.asarray(False)
    a1, a2 = _cyl_multi_adjust(p1, p2, r1, r2, radius, no, no)
    assert float(jnp.max(jnp.abs(a1 - r1))) > 1e-4  # the case does slide
    b1, b2 = _cyl_multi_slide(p1, p2, a1, a2, radius, no, no)
    np.testing.assert_array_equal(np.asarray(b1), np.asarray(a1))
    np.testing.assert_array_equal(np.asarray(b2), np.asarray(a2))
    s1, s2 = _cyl_multi_adjust(p1, p2, r1, r2, radius, no, jnp.asarray(True))
    np.testing.assert_array_equal(np.asarray(s1), np.asarray(r1))


def test_cylinder_multi_wrap_span_derivatives_agree_in_both_modes():
    """The custom JVP of the sliding (a forward-mode Jacobian applied linearly) gives
    reverse mode the derivative of the restarts made: jax.grad == jax.jacfwd, and both
    match central differences of the span length (p1, p2 and the radius)."""
    p1, p2, _, _, radius = _sliding_case()
    no = jnp.asarray(False)

    def span(a, b, rad):
        _, r1, r2, _ = cylinder_wrap(a, b, rad, 0.3, 0, 1, single=True)
        s1, s2 = _cyl_multi_adjust(a, b, r1, r2, rad, no, no)
        return jnp.linalg.norm(a - s1) + jnp.linalg.norm(b - s2) + _cyl_spiral(s1, s2, rad, no)[2]

    rev = jax.jit(jax.grad(span, argnums=(0, 1, 2)))(p1, p2, radius)
    fwd = jax.jit(jax.jacfwd(span, argnums=(0, 1, 2)))(p1, p2, radius)
    rev, fwd = (np.concatenate([np.ravel(x) for x in g]) for g in (rev, fwd))
    np.testing.assert_allclose(rev, fwd, rtol=1e-12, atol=1e-14)
    f = jax.jit(span)
    h, x0 = 1e-7, np.concatenate([np.asarray(p1), np.asarray(p2), [float(radius)]])
    fd = []
    for i in range(7):
        e = np.zeros(7)
        e[i] = h
        xp, xm = x0 + e, x0 - e
        fd.append((f(xp[:3], xp[3:6], xp[6]) - f(xm[:3], xm[3:6], xm[6])) / (2 * h))
    np.testing.assert_allclose(rev, np.asarray(fd), rtol=0, atol=1e-6)


def test_moment_arm_derivatives_are_the_symmetric_second_derivative_of_length():
    """dR/dq (autodiff of autodiff) equals central differences of the closed-form R, and is
    symmetric (it is -d²L/dq²). Closed-form wraps only: second derivatives through the
    iterative wraps' rules compile for minutes (checked once; docs/concepts/muscles.md,
    derivatives of iterations)."""
    model = _arm({k: WRAPS[k] for k in ("none", "sphere", "cylinder")})
    q, h = STATES[1], 1e-6
    dr = np.asarray(jax.jit(lambda q: mb.moment_arm_derivatives(model, q))(q))  # (nq, n_muscles, nq)
    assert np.all(np.isfinite(dr)) and np.abs(dr).max() > 1e-3
    r = jax.jit(lambda q: mb.moment_arms(model, q))
    fd = np.stack([(r(q + h * e) - r(q - h * e)) / (2 * h) for e in jnp.eye(2)], axis=-1)
    np.testing.assert_allclose(dr, fd, atol=1e-7, rtol=0)
    np.testing.assert_allclose(dr, np.swapaxes(dr, 0, 2), atol=1e-10, rtol=0)


@pytest.mark.slow
def test_slot_scan_equals_the_slot_by_slot_pass():
    """With a wrap algorithm at several slots the wrap pass is a scan over the slots, each
    algorithm vmapped over its lanes padded to its largest slot (`Layout.kinds`): here the
    multi-wrap cylinder has 2 lanes at slot 0 and 1 at slots 1 and 2, the sphere is absent
    at slots 0 and 2. Every record (they are all the closed-form moment arms use) and the
    resolved paths equal the unrolled slot-by-slot pass's: the same arithmetic per lane.
    (Opt-in, `-m slow`: in CI both layouts meet OpenSim, the scan in
    `test_parity_mobl_arms`, the unrolled pass in `test_parity_arm26`; this is the
    diagnostic when one of them breaks.)"""
    cyl2 = mb.WrapCylinder("cyl2", "upper", 0.015, 0.2, translation=(0.03, -0.05, 0.015))
    sph = mb.WrapSphere("sph3", "upper", 0.015, translation=(0.03, -0.2, 0.01))
    model = _arm({"a": [WRAPS["cylinder"], sph, cyl2], "b": [cyl2, WRAPS["cylinder"]]})
    lay = layout(model)
    assert lay.scan_slots and [k[4].tolist() for k in lay.kinds] == [[True, True, True], [False, True, False]]

    def one(q, scan):
        lay.scan_slots = scan
        r = resolve_all(lay, q, mb.body_transforms(model, q), jacobians=True)
        return (r.pos, r.active, r.key, r.wrap_len, r.converged) + tuple(r.history)

    unrolled, scanned = jax.jit(lambda qs: jax.lax.map(lambda q: (one(q, False), one(q, True)), qs))(STATES)
    engaged = np.asarray(scanned[6])  # (states, passes, K, W)
    assert engaged[:, 0].any(axis=0).tolist() == [[True, True, True], [True, True, False]]
    for a, b in zip(unrolled, scanned):
        np.testing.assert_allclose(np.asarray(b, float), np.asarray(a, float), rtol=1e-12, atol=1e-15)
