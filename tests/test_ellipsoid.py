"""WrapEllipsoid's derivative rules (jaxmb._muscles._ellipsoid): the closest-point Newton is
differentiated as its iterate by sensitivities carried in its loop, which must equal that
iterate's derivative by forward mode and by central differences; the surface polyline's
length is differentiated by one reverse pass applied to every tangent direction, which must
equal forward mode through the polyline's 499 points, to first and second order. Parity
of the whole wrap with OpenSim 4.6 is in test_muscle_parity.py, closed-form against
autodiff moment arms in test_muscles.py.
"""

import jax
import jax.numpy as jnp
import numpy as np

# Private: the polyline and its plain (rule-free) form, compared with each other.
from jaxmb._muscles import _ellipsoid as E


def test_polyline_length_rule_equals_forward_mode_through_the_points():
    """First and second derivatives on the short way, the long way (a quadrant) and a
    3-segment polyline; the semi-axes' contribution included."""
    a = jnp.array([1.4, 0.8, 0.8])
    r1 = E._ellipsoid_closest(a, jnp.array([1.0, 0.5, -0.2]))
    r2 = E._ellipsoid_closest(a, jnp.array([-1.0, 0.4, 0.3]))
    vs = jnp.cross(r1, r2) / jnp.linalg.norm(jnp.cross(r1, r2))
    x = jnp.concatenate([r1, r2, vs, -(vs @ r1)[None]])

    @jax.jit
    def both(x, a, n, sign):
        f = lambda x, a: E._ell_polyline_length(x, a, n, sign, 2 * r1, 2 * r2)  # noqa: E731
        g = lambda x, a: E._ell_polyline_plain(x, a, n, sign, 2 * r1, 2 * r2)  # noqa: E731
        return ((jax.jacfwd(f, argnums=(0, 1))(x, a), jax.jacrev(f, argnums=(0, 1))(x, a), jax.hessian(f)(x, a)),
                jax.jacfwd(g, argnums=(0, 1))(x, a), jax.jacfwd(jax.jacfwd(g))(x, a))

    for n, sign in ((150, 0), (150, -1), (3, 1)):
        (fwd, rev, hess), ref, ref2 = both(x, a, jnp.int32(n), sign)
        assert float(jnp.max(jnp.abs(ref[0]))) > 0.1 and float(jnp.max(jnp.abs(ref[1]))) > 0.1
        for g, r in zip((*fwd, *rev), (*ref, *ref)):
            np.testing.assert_allclose(g, r, rtol=0, atol=1e-14)
        np.testing.assert_allclose(hess, ref2, rtol=0, atol=1e-12 * float(jnp.max(jnp.abs(ref2))))


def test_closest_point_rule_is_the_newton_iterates_derivative():
    """The closest-point Newton's rule (`_newton_derivative`: sensitivities carried in the
    loop, no tangent through it) equals the derivative of the iterate OpenSim stops at, by
    two routes: forward mode through the plain loop (to round-off) and central differences
    of the plain iterate (the number of steps is locally constant). Points: outside, inside,
    and inside near the axis of a spheroid (arm26's TRIlong ellipsoid, scaled as in the wrap),
    where Newton converges slowly, stops 1e-9 short of the root in |f|, and the root's
    derivative (the implicit function theorem's) is several per cent off the iterate's."""
    a3 = jnp.array([0.025, 0.02, 0.02]) * (3.0 / 0.065)
    cases = ((jnp.array([1.2, 0.8, 1.0]), jnp.array([1.5, 0.9, -0.7])),
             (jnp.array([1.2, 0.8, 1.0]), jnp.array([0.3, -0.2, 0.4])),
             (a3, jnp.array([0.00612355, 0.00168843, -0.00377171])))
    rule = jax.jit(jax.jacfwd(E._ellipsoid_lagrange, argnums=(0, 1)))
    rev = jax.jit(jax.grad(E._ellipsoid_lagrange, argnums=(0, 1)))
    fwd = jax.jit(jax.jacfwd(E._ellipsoid_newton_plain, argnums=(0, 1)))
    plain = jax.jit(jax.vmap(E._ellipsoid_newton_plain))
    h = 1e-7
    for a, p in cases:
        got, ref = np.concatenate(rule(a, p)), np.concatenate(fwd(a, p))
        scale = np.abs(ref).max()
        np.testing.assert_allclose(got, ref, rtol=0, atol=1e-12 * scale)
        np.testing.assert_allclose(np.concatenate(rev(a, p)), ref, rtol=0, atol=1e-12 * scale)
        x = jnp.concatenate([a, p])
        steps = h * jnp.eye(6)
        y = plain(*jnp.split(jnp.concatenate([x[None] + steps, x[None] - steps]), 2, axis=1))
        fd = np.asarray((y[:6] - y[6:]) / (2 * h))
        np.testing.assert_allclose(got, fd, rtol=0, atol=1e-6 * scale)
    # The slow case tells the iterate's derivative from the root's: -(df/dp) / (df/dt).
    a, p = cases[2]
    t = E._ellipsoid_newton_plain(a, p)
    ift = -jax.grad(lambda q: E._ellipsoid_f_fp(a, q, t)[0])(p) / E._ellipsoid_f_fp(a, p, t)[1]
    got = rule(a, p)[1]
    assert np.abs(got - ift).max() > 1e-3 * np.abs(got).max()
    # Second order: the rule's loop differentiated again, as forward mode through the plain one.
    hess = jax.jit(jax.hessian(lambda q: E._ellipsoid_lagrange(a, q)))(p)
    ref2 = jax.jit(jax.jacfwd(jax.jacfwd(lambda q: E._ellipsoid_newton_plain(a, q))))(p)
    np.testing.assert_allclose(hess, ref2, rtol=0, atol=1e-9 * float(jnp.max(jnp.abs(ref2))))


def test_a_skipped_wrap_makes_no_iteration_and_stays_finite():
    """`skip` (the caller will not use the result: a muscle whose ellipsoid is not engaged,
    or whose passes are done) makes the closest-point Newton and the tangent Gauss-Newton
    stop before their first step, and the wrap's values and Jacobian stay finite, on a
    segment that crosses the ellipsoid and on one that misses it; without `skip` the
    crossing segment's wrap is the one OpenSim computes (its Newton makes steps)."""
    dims = jnp.array([0.03, 0.02, 0.025])
    a = dims * (3.0 / float(jnp.sum(dims)))
    p = jnp.array([1.5, 0.9, -0.7])
    t0 = E._ellipsoid_t0(a, p)
    assert float(E._ellipsoid_lagrange(a, p, True)) == float(t0)
    assert abs(float(E._ellipsoid_lagrange(a, p)) - float(t0)) > 1e-3  # unskipped: Newton moves t
    x = jnp.concatenate([jnp.array([0.3, 0.7, -0.2]), jnp.array([2.0, 1.0, -0.1]), jnp.array([0.0, 0.0, 1.0]),
                         jnp.array([0.05])])
    np.testing.assert_array_equal(E._ell_tangent_iterate(x, a, True), x[0:3])
    crossing = (jnp.array([0.05, 0.004, 0.001]), jnp.array([-0.05, 0.006, 0.002]))
    missing = (jnp.array([0.05, 0.08, 0.001]), jnp.array([-0.05, 0.09, 0.002]))

    @jax.jit
    def wrap(p1, p2, skip):
        f = lambda y: jnp.concatenate(E._ellipsoid_wrap(y[:3], y[3:], dims, 0, 0, skip)[1:3])  # noqa: E731
        y = jnp.concatenate([p1, p2])
        return E._ellipsoid_wrap(p1, p2, dims, 0, 0, skip), jax.jacfwd(f)(y)

    (code, r1, r2, wl), _ = wrap(*crossing, False)
    assert int(code) == 2 and float(wl) > 0.0  # a mandatory wrap
    for p1, p2 in (crossing, missing):
        out, jac = wrap(p1, p2, True)
        assert all(np.all(np.isfinite(np.asarray(v))) for v in (*out, jac))


def test_passes_run_the_ellipsoid_on_the_live_muscles_in_chunks(monkeypatch):
    """With 8 ellipsoid lanes at a slot of the scanned multi-wrap pass (8 muscles wrap an
    ellipsoid first, a ninth second), the ellipsoid runs on the
    lanes of the muscles still live, a chunk of 2 at a time (`_paths._NARROW`): the paths
    and every record of every pass (what the closed-form moment arms read) equal those of
    one chunk of all lanes (`_NARROW = 1`) to round-off. The records are compared as values
    (the chunking is the same code with or without each wrap's local Jacobian); the
    closed-form moment arms, which read the Jacobian records of the chunked pass, are
    held to reverse mode through the chunks below."""
    import jaxmb as mb
    from jaxmb._muscles import _paths
    from jaxmb._muscles._layout import layout
    from test_muscles import STATES, _arm

    def ell(i):
        return mb.WrapEllipsoid(f"e{i}", "upper", (0.03, 0.02, 0.025), translation=(0.002 * i, -0.3, 0.0),
                                xyz_body_rotation=(0.1, 0.2, 0.3))

    sph = mb.WrapSphere("s", "ground", 0.02, translation=(0.0, 0.02, 0.0))
    model = _arm({f"m{i}": [sph, ell(i)] if i == 8 else [ell(i), sph] for i in range(9)})
    lay = layout(model)
    assert lay.scan_slots and any(k[0].gathers_live and k[1].shape == (2, 8) for k in lay.kinds)

    def paths(narrow):
        monkeypatch.setattr(_paths, "_NARROW", narrow)

        def one(q):
            r = _paths.resolve_all(lay, q, mb.body_transforms(model, q))
            return (r.pos, r.active, r.wrap_len, r.converged) + tuple(r.history)
        return jax.jit(lambda qs: jax.lax.map(one, qs))(STATES)

    chunked, whole = paths(4), paths(1)
    assert np.asarray(chunked[5]).any()  # the ellipsoids engage
    for a, b in zip(whole, chunked):
        np.testing.assert_allclose(np.asarray(b, float), np.asarray(a, float), rtol=1e-12, atol=1e-15)
    # Reverse mode goes through the chunks (a scan of branches): the gradient of the total
    # length is -R summed over the muscles.
    monkeypatch.setattr(_paths, "_NARROW", 4)
    grad, r = jax.jit(lambda q: (jax.grad(lambda x: jnp.sum(mb.muscle_lengths(model, x)))(q),
                                 mb.moment_arms(model, q)))(STATES[1])
    np.testing.assert_allclose(np.asarray(grad), -np.asarray(r).sum(axis=1), rtol=1e-10, atol=1e-12)
