"""WrapTorus's converged circle-point search (jaxmb._muscles._torus): which root of OpenSim's
residual it converges to (against an independent grid-and-Brent search), its implicit-function
derivative (against central differences, both modes), degenerate segments, and OpenSim's
Levenberg-Marquardt iterate kept as ``search="opensim"``. The port of that iteration is
checked against MINPACK in test_muscles.py; parity with OpenSim 4.6 in test_muscle_parity.py.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from scipy.optimize import brentq

import jaxmb as mb
# Private: the search itself, checked against an independent root finder.
from jaxmb._muscles._torus import _torus_closest_u_converged, _torus_resid_fn

R_OUT = 0.04
TOL_CLOSED_VS_AUTODIFF = 1e-10


def _segments(n=150, seed=7):
    """Half anywhere near the torus, half threading its hole (the residual then has a dip:
    up to three roots, or one with a stationary point of resid^2 beside it)."""
    rng = np.random.default_rng(seed)
    p1 = rng.uniform(-0.3, 0.3, (n, 3))
    p2 = -0.5 * p1 + rng.uniform(-0.1, 0.1, (n, 3))
    q1 = rng.uniform(-0.05, 0.05, (n, 3))
    q1[:, 2] = rng.uniform(-0.3, 0.3, n)
    q2 = q1 * np.array([1.0, 1.0, -1.0]) + np.concatenate([rng.uniform(-0.03, 0.03, (n, 2)), np.zeros((n, 1))], 1)
    return np.concatenate([p1, q1]), np.concatenate([p2, q2])


def _resid_np(u, p1, p2):
    """OpenSim's WrapTorus::calcCircleResids, in numpy (test_muscles.py checks the formula)."""
    n = (p2 - p1) / np.linalg.norm(p2 - p1)
    x = p1[None] + u[:, None] * n[None]
    rho = np.hypot(x[:, 0], x[:, 1])
    return 2.0 * (p1 @ n) + 2.0 * u - 4.0 * R_OUT * (n[0] * x[:, 0] + n[1] * x[:, 1]) / rho


def _reference(p1, p2):
    """The root a search from u = 0 converges to, found independently: every
    sign change and every turn of the residual on a fine grid, refined by Brent's method.
    With three roots: the one on the monotone piece (between the turns) that holds u = 0;
    with one, it. Returns (u, kind): kind 1 (one root, no turn), 2 (one root, u = 0 on
    its piece), 3 (one root, u = 0 on a piece without one: a descent would stall at a
    turn), 4 (three roots), or None (a near-double root: skipped)."""
    n = (p2 - p1) / np.linalg.norm(p2 - p1)
    um = -(p1 @ n)
    grid = np.linspace(um - 2.0 * R_OUT - 0.01, um + 2.0 * R_OUT + 0.01, 40001)
    f = _resid_np(grid, p1, p2)
    fun = lambda u: _resid_np(np.array([u]), p1, p2)[0]  # noqa: E731
    roots = [brentq(fun, grid[i], grid[i + 1], xtol=1e-16, rtol=1e-15)
             for i in np.nonzero(np.sign(f[:-1]) != np.sign(f[1:]))[0]]
    df = np.diff(f)
    turns = list(grid[1:-1][np.sign(df[:-1]) != np.sign(df[1:])])
    if len(roots) == 1 and not turns:
        return roots[0], 1
    if len(turns) != 2 or min(abs(np.diff(roots + turns))) < 1e-4:
        return None, None
    a, b = turns
    if len(roots) == 3:
        return roots[0] if 0.0 <= a else roots[2] if 0.0 >= b else roots[1], 4
    r = roots[0]
    return r, 2 if (r < a and 0.0 <= a) or (r > b and 0.0 >= b) else 3


_CONVERGED = jax.jit(jax.vmap(lambda a, b: _torus_closest_u_converged(a, b, R_OUT)))
_RESID = jax.jit(jax.vmap(lambda a, b, u: _torus_resid_fn(a, b, R_OUT)(u)))


def test_converged_search_is_the_root_a_descent_from_the_start_reaches():
    p1, p2 = _segments()
    u = np.asarray(_CONVERGED(p1, p2))
    ref = [_reference(a, b) for a, b in zip(p1, p2)]
    kinds = np.array([k or 0 for _, k in ref])
    keep = kinds > 0
    # Every case occurs: no dip, a lone root on the start's piece or beyond a dip, three roots.
    assert all((kinds == k).sum() >= 10 for k in (1, 2, 3, 4)), np.bincount(kinds)
    expected = np.array([r for r, _ in ref], dtype=float)
    np.testing.assert_allclose(u[keep], expected[keep], rtol=0, atol=1e-12)
    # At machine precision: the residual (of order 0.1 here) vanishes to round-off.
    assert np.abs(np.asarray(_RESID(p1, p2, u))).max() < 1e-13


def test_converged_search_derivative_is_the_roots():
    """du/d(p1, p2, r) by the implicit function theorem: forward and reverse mode agree and
    equal central differences of the converged u."""
    p1, p2 = (jnp.asarray(a[::15]) for a in _segments())
    x = jnp.concatenate([p1, p2, jnp.full((len(p1), 1), R_OUT)], axis=1)
    u = lambda x: _torus_closest_u_converged(x[0:3], x[3:6], x[6])  # noqa: E731
    fwd, rev = (np.asarray(jax.jit(jax.vmap(j(u)))(x)) for j in (jax.jacfwd, jax.jacrev))
    h, eye = 1e-6, jnp.eye(7)
    uu = jax.jit(jax.vmap(jax.vmap(u, in_axes=(0,)), in_axes=(0,)))
    fd = np.asarray(uu(x[:, None] + h * eye[None]) - uu(x[:, None] - h * eye[None])) / (2 * h)
    assert np.all(np.isfinite(fwd))
    np.testing.assert_allclose(rev, fwd, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(fwd, fd, rtol=1e-5, atol=1e-6)


def test_converged_search_is_finite_at_degenerate_segments():
    """A segment through the torus axis (the residual jumps there), parallel to it (no dip,
    c4 = 0), on it, and of zero length: finite u and gradients (one compilation)."""
    p1, p2 = (jnp.asarray(a) for a in zip(
        ((0.02, 0.02, 0.1), (-0.02, -0.02, -0.1)),  # through the axis
        ((0.03, 0.01, 0.1), (0.03, 0.01, -0.1)),  # parallel to it
        ((0.0, 0.0, 0.1), (0.0, 0.0, -0.1)),  # on it
        ((0.03, 0.01, 0.1), (0.03, 0.01, 0.1))))  # zero length
    u, g = jax.jit(jax.vmap(jax.value_and_grad(
        lambda a, b: _torus_closest_u_converged(a, b, R_OUT), argnums=(0, 1))))(p1, p2)
    assert np.all(np.isfinite(np.asarray(u))) and all(np.all(np.isfinite(np.asarray(x))) for x in g)
    # Parallel to the axis the residual is 2 (p1·n + u): u = 0.1, level with the circle; by the
    # implicit function theorem du/dp1 = ((1 - 2R/ρ) p1_xy / L, 1) and du/dp2 = (-(1 - 2R/ρ) p1_xy / L, 0),
    # with ρ = |p1_xy| and L = |p2 - p1| = 0.2.
    xy = (1.0 - 2.0 * R_OUT / np.hypot(0.03, 0.01)) * np.array([0.03, 0.01]) / 0.2
    np.testing.assert_allclose([u[1], *g[0][1], *g[1][1]], [0.1, *xy, 1.0, *-xy, 0.0], rtol=1e-13, atol=1e-15)


def test_opensims_iterate_is_an_option_and_agrees_where_it_converges():
    """search="opensim" (the default) keeps OpenSim's Levenberg-Marquardt iterate (stopped at ftol =
    xtol = 1e-4; test_muscles.py checks it against MINPACK, test_muscle_parity.py its
    moment arms on MoBL-ARMS' ECRB). On segments threading the hole where that iterate has
    converged to a root, the two searches give the same wrap."""
    p1, p2 = _segments(40, seed=11)
    p1, p2 = jnp.asarray(p1[40:]), jnp.asarray(p2[40:])  # threading the hole
    torus = mb.WrapTorus("tor", "ground", 0.01, R_OUT)
    wraps = {s: jax.jit(jax.vmap(dataclasses.replace(torus, search=s).wrap_line)) for s in ("converged", "opensim")}
    (cc, c1, c2, cl), (oc, o1, o2, ol) = (wraps[s](p1, p2) for s in ("converged", "opensim"))
    assert torus.search == "opensim"  # the default: OpenSim's iterate
    wrapped = np.asarray(cc) > 0
    same = np.asarray(cc == oc) & np.isclose(np.asarray(cl), np.asarray(ol), rtol=0, atol=1e-9)
    assert wrapped.sum() > 20 and same[wrapped].mean() > 0.9, (wrapped.sum(), same[wrapped].mean())
    np.testing.assert_allclose(np.asarray(c1)[same & wrapped], np.asarray(o1)[same & wrapped], atol=1e-9)
