"""Joint functions f(q): values, closed-form gradients/Hessians against autodiff, fits."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmb as mb
from assertions import assert_tree_allclose

Q = jnp.array([0.37, -1.2, 0.8])


def _sine_data(x, revolving=False):
    """``(y, y', y'')`` of ``sin 2x + 0.3 cos x`` (minus x when `revolving`) at `x`."""
    y = jnp.sin(2.0 * x) + 0.3 * jnp.cos(x) - (x if revolving else 0.0)
    d1 = 2.0 * jnp.cos(2.0 * x) - 0.3 * jnp.sin(x) - (1.0 if revolving else 0.0)
    d2 = -4.0 * jnp.sin(2.0 * x) - 0.3 * jnp.cos(x)
    return y, d1, d2


def _functions():
    x = jnp.linspace(-1.5, 1.5, 9)
    y = jnp.sin(2.0 * x) + 0.3 * x**2
    return {
        "coordinate": mb.Coordinate(1),
        "constant": mb.Constant(0.25),
        "linear": mb.Linear((0, 2), (0.5, -2.0), 0.1),
        "polynomial": mb.Polynomial(0, (0.1, -0.4, 0.3, 0.05)),
        "spline_natural": mb.CubicSpline.fit(0, x, y, "natural"),
        "spline_fmm": mb.CubicSpline.fit(2, x, y, "not-a-knot-fmm"),
        "fourier": mb.FourierSeries(1, 0.2, jnp.array([0.5, -0.1]), jnp.array([0.3, 0.2]), 1.3),
        "fourier_secular": mb.FourierSeries(1, 0.2, jnp.array([0.5, -0.1]), jnp.array([0.3, 0.2]), 1.3, -1.0),
        # Q[1] = -1.2 lies below this grid: the linear continuation is checked too.
        "quintic": mb.QuinticSpline.fit(1, x / 1.5, *_sine_data(x / 1.5)),
        "quintic_periodic": mb.QuinticSpline.fit(2, jnp.linspace(0.0, 2 * np.pi, 17),
                                                 *_sine_data(jnp.linspace(0.0, 2 * np.pi, 17), revolving=True),
                                                 periodic=True, slope=-1.0),
        "composed": mb.Composed(mb.CubicSpline.fit(0, x, y), mb.Linear((0, 1), (1.0, 0.5))),
        "scaled": mb.Scaled(mb.FourierSeries(2, 0.0, jnp.array([1.0]), jnp.array([0.5]), 2.0), -1.5),
        "callable_two_coordinates": mb.JaxFunction(lambda q, p: p[0] * q[0] * q[1] + jnp.sin(p[1] * q[1]),
                                                   jnp.array([0.4, 1.7]), (0, 1)),
    }


@pytest.mark.parametrize("name", list(_functions()))
def test_coordinate_indices_list_every_coordinate_read(name):
    """The dynamics of small models skip derivatives with respect to coordinates a
    function does not list (the unrolled projected pass), so the autodiff gradient
    must vanish outside ``coordinate_indices`` and should not vanish on all of them."""
    fn = _functions()[name]
    grad = np.asarray(jax.grad(fn)(Q))
    listed = list(fn.coordinate_indices())
    others = [k for k in range(Q.shape[0]) if k not in listed]
    assert np.all(grad[others] == 0.0)
    assert not listed or np.any(grad[listed] != 0.0)


@pytest.mark.parametrize("name", list(_functions()))
def test_gradient_and_hessian_equal_autodiff(name):
    f = _functions()[name]
    for q in (Q, Q * -0.5, Q + 0.9):
        grad_ad = jax.grad(lambda x: f(x))(q)
        hess_ad = jax.hessian(lambda x: f(x))(q)
        np.testing.assert_allclose(f.gradient(q), grad_ad, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(f.hessian(q), hess_ad, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", list(_functions()))
def test_rates_are_value_gradient_and_velocity_product(name):
    """``rates(q, q') = (f, ∇f·q', q'ᵀHq')`` (closed forms where a function has them)
    against the autodiff gradient and Hessian."""
    f = _functions()[name]
    qd = jnp.array([0.7, -1.3, 2.1])
    for q in (Q, Q * -0.5):
        v, d1, d2 = f.rates(q, qd)
        np.testing.assert_allclose(v, f(q), rtol=1e-13, atol=1e-14)
        np.testing.assert_allclose(d1, jax.grad(f)(q) @ qd, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(d2, qd @ jax.hessian(f)(q) @ qd, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", list(_functions()))
def test_rates_and_gradient_are_rates_and_autodiff_gradient(name):
    """``rates_and_gradient(q, q') = (*rates(q, q'), ∇f(q))``, the gradient against
    autodiff; closed-form functions return it from their one evaluation."""
    f = _functions()[name]
    qd = jnp.array([0.7, -1.3, 2.1])
    for q in (Q, Q + 0.9):
        v, d1, d2, grad = f.rates_and_gradient(q, qd)
        assert_tree_allclose((v, d1, d2), tuple(f.rates(q, qd)), rtol=1e-13, atol=1e-14)
        np.testing.assert_allclose(grad, jax.grad(f)(q), rtol=1e-12, atol=1e-12)


def test_fourier_secular_term_fit():
    """A revolving angle ``-x + periodic`` is fitted exactly once its slope is given."""
    x = jnp.linspace(0.0, 2 * jnp.pi, 65)
    y = -x + 0.3 * jnp.sin(x) - 0.1 * jnp.cos(2 * x) + 0.05
    f = mb.FourierSeries.fit(0, x, y, 3, 1.0, slope=-1.0)
    np.testing.assert_allclose(f.a, [0.0, -0.1, 0.0], atol=1e-13)
    np.testing.assert_allclose(f.b, [0.3, 0.0, 0.0], atol=1e-13)
    xs = x + 0.1
    want = -xs + 0.3 * jnp.sin(xs) - 0.1 * jnp.cos(2 * xs) + 0.05
    np.testing.assert_allclose(jax.vmap(lambda t: f(jnp.atleast_1d(t)))(xs), want, atol=1e-12)


@pytest.mark.parametrize("end", ["natural", "not-a-knot-fmm"])
def test_spline_interpolates_and_is_c2(end):
    x = jnp.array([-1.0, -0.4, 0.1, 0.5, 1.2, 2.0])
    y = jnp.array([0.3, -0.2, 0.5, 0.4, -0.7, 0.1])
    s = mb.CubicSpline.fit(0, x, y, end)
    vals = jax.vmap(lambda v: s(jnp.array([v])))(x)
    np.testing.assert_allclose(vals, y, rtol=0, atol=1e-14)
    # Continuity of s' and s'' at interior knots, from the two adjacent cubic pieces.
    h = jnp.diff(x)
    for k in range(1, x.shape[0] - 1):
        slope_left = s.b[k - 1] + 2 * s.c[k - 1] * h[k - 1] + 3 * s.d[k - 1] * h[k - 1] ** 2
        curv_left = 2 * s.c[k - 1] + 6 * s.d[k - 1] * h[k - 1]
        np.testing.assert_allclose(slope_left, s.b[k], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(curv_left, 2 * s.c[k], rtol=1e-12, atol=1e-12)


def test_natural_spline_has_zero_end_curvature():
    x = jnp.linspace(0.0, 1.0, 7)
    s = mb.CubicSpline.fit(0, x, jnp.exp(x), "natural")
    assert abs(float(s._derivatives(x[0])[2])) < 1e-12
    assert abs(float(s._derivatives(x[-1] - 1e-12)[2])) < 1e-9


def test_fmm_spline_reproduces_cubics_exactly():
    """SimmSpline's end conditions match the third derivative of the end cubics, so any
    cubic polynomial is reproduced exactly (a natural spline would not)."""
    x = jnp.array([0.0, 0.3, 0.7, 1.0, 1.6, 2.0])
    cubic = lambda v: 0.5 - v + 2.0 * v**2 - 0.7 * v**3  # noqa: E731
    fmm = mb.CubicSpline.fit(0, x, cubic(x), "not-a-knot-fmm")
    nat = mb.CubicSpline.fit(0, x, cubic(x), "natural")
    xs = jnp.linspace(0.0, 2.0, 41)
    err_fmm = jnp.max(jnp.abs(jax.vmap(lambda v: fmm(v[None]))(xs) - cubic(xs)))
    err_nat = jnp.max(jnp.abs(jax.vmap(lambda v: nat(v[None]))(xs) - cubic(xs)))
    assert err_fmm < 1e-13
    assert err_nat > 1e-3


def test_spline_extrapolates_linearly():
    x = jnp.array([0.0, 1.0, 2.0, 3.0])
    s = mb.CubicSpline.fit(0, x, jnp.array([0.0, 1.0, 0.0, 2.0]), "not-a-knot-fmm")
    slope_end = s.gradient(jnp.array([3.0]))[0]
    np.testing.assert_allclose(s(jnp.array([4.0])), 2.0 + slope_end, rtol=1e-14)
    assert float(s.hessian(jnp.array([5.0]))[0, 0]) == 0.0


def test_spline_fit_is_differentiable_in_data():
    x = jnp.linspace(0.0, 2.0, 6)
    y = jnp.cos(x)
    loss = lambda yy: mb.CubicSpline.fit(0, x, yy)(jnp.array([0.77])) ** 2  # noqa: E731
    g = jax.grad(loss)(y)
    e = jnp.zeros_like(y).at[2].set(1e-6)
    fd = (loss(y + e) - loss(y - e)) / 2e-6
    np.testing.assert_allclose(g[2], fd, rtol=1e-7)


def test_fourier_fit_recovers_coefficients():
    x = jnp.linspace(-np.pi, np.pi, 50)
    y = 0.3 + 0.8 * jnp.cos(x) - 0.2 * jnp.sin(2 * x)
    f = mb.FourierSeries.fit(0, x, y, order=3, omega=1.0)
    np.testing.assert_allclose(f.a0, 0.3, atol=1e-12)
    np.testing.assert_allclose(f.a, [0.8, 0.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(f.b, [0.0, -0.2, 0.0], atol=1e-12)


TensorSpline = mb.constraints.TensorSpline
_GRID = (jnp.linspace(0.0, 1.0, 4), jnp.linspace(0.0, 1.0, 5),
         jnp.outer(jnp.linspace(0.0, 1.0, 4), jnp.linspace(0.0, 1.0, 5)))


@pytest.mark.parametrize(
    "build, match",
    [
        (lambda: mb.CubicSpline.fit(0, [0.0, 1.0, 1.0], [0.0, 1.0, 2.0]), "strictly increasing"),
        (lambda: mb.CubicSpline.fit(0, [0.0], [0.0]), "length >= 2"),
        (lambda: mb.CubicSpline.fit(0, [0.0, 1.0, 2.0], [0.0, 1.0, 2.0], "clamped"), "end condition"),
        (lambda: mb.Linear((0, 1), (1.0,)), "one weight per coordinate"),
        (lambda: mb.FourierSeries(0, 0.0, [1.0], [1.0, 2.0], 1.0), "equal length"),
        (lambda: mb.FourierSeries(0, 0.0, [1.0], [1.0], 0.0), "non-zero frequency"),
        (lambda: jax.jit(lambda w: mb.FourierSeries(0, 0.0, [1.0], [1.0], w).a)(1.0), "concrete number"),
        (lambda: mb.QuinticSpline.fit(0, [0.0, 0.5, 2.0], *_sine_data(jnp.array([0.0, 0.5, 2.0]))), "uniform"),
        (lambda: mb.QuinticSpline.fit(0, [0.0, 1.0], [0.0, 1.0], [0.0, 1.0], [0.0]), "x's shape"),
        (lambda: mb.QuinticSpline.fit(0, jnp.linspace(0.0, 3.0, 7), *_sine_data(jnp.linspace(0.0, 3.0, 7)),
                                      periodic=True), "must repeat"),
        (lambda: mb.QuinticSpline(0, 0.0, -0.1, jnp.zeros((3, 6))), "positive step"),
        (lambda: mb.QuinticSpline(0, 0.0, 0.1, jnp.zeros((3, 5))), r"shape \(n, 6\)"),
        # These evaluated to numbers (a vector joint variable, or a spline with no piece found).
        (lambda: mb.CubicSpline(0, [0.0, 2.0, 1.0], *[jnp.zeros(3)] * 4), "knots x must be strictly increasing"),
        (lambda: mb.CubicSpline(0, [0.0], *[jnp.zeros(1)] * 4), r"one shape \(n,\) with n >= 2"),
        (lambda: mb.CubicSpline(0, [0.0, 1.0], jnp.zeros(3), *[jnp.zeros(2)] * 3), r"got shapes \[\(2,\), \(3,\)\]"),
        (lambda: mb.FourierSeries(0, [0.0, 1.0], [1.0], [0.0], 1.0), "a0 and slope must be scalars"),
        (lambda: mb.FourierSeries(0, 0.0, [1.0], [0.0], 1.0, slope=[1.0, 2.0]), "a0 and slope must be scalars"),
        (lambda: mb.Constant([1.0, 2.0]), r"value must be a scalar, got shape \(2,\)"),
        # A minimum-norm series through too few samples passed for a fit (21 coefficients, 5 samples).
        (lambda: mb.FourierSeries.fit(0, _X5, jnp.sin(_X5), 10, 1.0), "order 10 has 21 coefficients, more than the 5"),
        (lambda: mb.FourierSeries.fit(0, _X5, jnp.sin(_X5), 1, 1.0, slope=[1.0, 2.0]), "slope must be a scalar"),
        (lambda: mb.Coordinate(-1), r"Coordinate: a coordinate index must be an integer >= 0 .* got -1"),
        # The tensor spline ignored a third index and took one coordinate twice.
        (lambda: TensorSpline((0, 1, 2), *_GRID), r"TensorSpline: indices must name two coordinates .* \(0, 1, 2\)"),
        (lambda: TensorSpline((0, 0), *_GRID), "TensorSpline: indices must be two different coordinates"),
        (lambda: TensorSpline((0,), *_GRID), "TensorSpline: indices must name two coordinates"),
        (lambda: TensorSpline((0, 1), _GRID[0][::-1], *_GRID[1:]), "TensorSpline: x0 must hold at least two strictly"),
        # x = (inner(q),) has one element: x[1] read x[0].
        (lambda: mb.Composed(mb.Polynomial(1, [0.0, 1.0]), mb.Coordinate(0)), r"Composed: .* reads indices \[1\]"),
        (lambda: mb.Linear((0,), (1.0,), offset=[0.0, 1.0]), r"offset must be a scalar, got shape \(2,\)"),
        # Called on their own with a short q or a scalar: JAX clamped the index (another coordinate's value).
        (lambda: mb.CubicSpline.fit(3, [0.0, 1.0, 2.0], [0.0, 1.0, 4.0])(jnp.array([1.0])),
         r"CubicSpline: reads q\[3\], but q has shape \(1,\)"),
        (lambda: mb.Linear((0, 2), (1.0, 1.0))(jnp.ones(2)), r"Linear: reads q\[2\], but q has shape \(2,\)"),
    ],
)
def test_bad_function_definitions_raise(build, match):
    with pytest.raises(mb.ModelError, match=match):
        build()


def test_fourier_series_derivatives_equal_the_sums_of_cosines_and_sines():
    """Value, first and second derivative of an order-37 series (one product of its
    coefficients with the harmonics) equal the plain sums of cosines and sines written
    out in numpy, to round-off, also far from x = 0."""
    rng = np.random.default_rng(7)
    a, b = rng.normal(size=37), rng.normal(size=37)
    f = mb.FourierSeries(0, 0.3, a, b, 0.9, slope=0.2)
    k = np.arange(1, 38)
    for x in (-2.7, 0.0, 0.4, 3.1, 11.0):
        arg = 0.9 * k * x
        want = 0.3 + 0.2 * x + a @ np.cos(arg) + b @ np.sin(arg)
        d1 = 0.2 + (0.9 * k * b) @ np.cos(arg) - (0.9 * k * a) @ np.sin(arg)
        d2 = -((0.9 * k) ** 2 * a) @ np.cos(arg) - ((0.9 * k) ** 2 * b) @ np.sin(arg)
        v, g, h = f.rates(jnp.array([x]), jnp.array([1.0]))
        np.testing.assert_allclose([v, g, h], [want, d1, d2], rtol=1e-13, atol=1e-12)


def _exact_cos_sin(k: int, x: float) -> tuple[float, float]:
    """cos(k x), sin(k x) of the float64 `x` taken exactly, by a 50-digit Taylor series."""
    from decimal import Decimal, localcontext

    with localcontext() as ctx:
        ctx.prec = 50
        two_pi = 2 * Decimal("3.14159265358979323846264338327950288419716939937510582097494")
        t = (k * Decimal(x)) % two_pi
        c = s = Decimal(0)
        term, i = Decimal(1), 0
        while i < 12 or abs(term) > Decimal("1e-45"):
            if i % 4 == 0:
                c += term
            elif i % 4 == 1:
                s += term
            elif i % 4 == 2:
                c -= term
            else:
                s -= term
            i += 1
            term = term * t / i
        return float(c), float(s)


def test_fourier_series_of_order_zero_is_its_constant_and_slope():
    f = mb.FourierSeries(0, 0.3, [], [], 1.0, slope=0.2)
    v, d1, d2 = f.rates(jnp.array([0.5]), jnp.array([2.0]))
    np.testing.assert_allclose([v, d1, d2], [0.3 + 0.2 * 0.5, 0.2 * 2.0, 0.0], rtol=0, atol=1e-15)


@pytest.mark.parametrize("n", [1, 5, 24, 37])
def test_fourier_harmonics_from_binary_powers_are_exact_to_a_few_ulp(n):
    """cos kθ, sin kθ (k = 1..n) as products of the powers e^{i 2^b θ} equal the exact
    values to 4e-16, also at large θ, where cos(kθ) of the rounded product kθ does not."""
    from jaxmb._functions import _harmonics  # private: FourierSeries' internal harmonics, checked alone

    for theta in (-2.1, 0.0, 0.3, 7.9, 123.4):
        c, s = _harmonics(n, jnp.asarray(theta))
        exact = np.array([_exact_cos_sin(k, theta) for k in range(1, n + 1)])
        np.testing.assert_allclose(c, exact[:, 0], rtol=0, atol=4e-16)
        np.testing.assert_allclose(s, exact[:, 1], rtol=0, atol=4e-16)
    if n >= 24:
        # The direct form rounds kθ first: at θ = 123.4 it is off by about 1e-13.
        k = np.arange(1, n + 1)
        exact = np.array([_exact_cos_sin(int(kk), 123.4) for kk in k])
        assert np.max(np.abs(np.cos(k * 123.4) - exact[:, 0])) > 1e-14


def _quintic_pieces_at_knots(s):
    """Left and right limits of ``(s, h s', h² s'')`` at the interior knots, from the
    adjacent pieces' coefficients (``t = 1`` of one, ``t = 0`` of the next)."""
    c = np.asarray(s.coefficients)
    i = np.arange(6)
    left = np.stack([c.sum(1), (i * c).sum(1), (i * (i - 1) * c).sum(1)], axis=1)[:-1]
    right = np.stack([c[:, 0], c[:, 1], 2 * c[:, 2]], axis=1)[1:]
    return left, right


def test_quintic_spline_interpolates_its_data_and_is_c2_to_round_off():
    """At every knot the value and both derivatives are the data, and the two pieces
    meeting there agree in value, slope and curvature to an ulp: the coefficients are
    the exact combinations of the data, rounded once. Formed in float64 arithmetic
    (the traced path of ``fit``) the curvatures disagree by far more, since the higher
    coefficients are small differences of O(1) data: that is why ``fit`` sums exactly."""
    x = jnp.linspace(0.0, 2 * np.pi, 513)
    y, d1, d2 = _sine_data(x, revolving=True)
    s = mb.QuinticSpline.fit(0, x, y, d1, d2, periodic=True, slope=-1.0)
    at = jax.vmap(lambda v: s._derivatives(v))(x[:-1])
    assert_tree_allclose(tuple(at), (y[:-1], d1[:-1], d2[:-1]), rtol=0, atol=1e-13)
    left, right = _quintic_pieces_at_knots(s)
    h = float(x[1] - x[0])
    jump_curvature = np.max(np.abs(left[:, 2] - right[:, 2])) / h**2
    assert np.max(np.abs(left[:, :2] - right[:, :2])) < 1e-15
    assert jump_curvature < 1e-12
    traced = jax.jit(lambda yy: mb.QuinticSpline.fit(0, x, yy, d1, d2, periodic=True, slope=-1.0))(y)
    np.testing.assert_allclose(traced.coefficients, s.coefficients, rtol=0, atol=1e-14)
    left_t, right_t = _quintic_pieces_at_knots(traced)
    assert np.max(np.abs(left_t[:, 2] - right_t[:, 2])) / h**2 > 100 * jump_curvature


def test_quintic_spline_converges_at_sixth_fourth_order():
    """Interpolation error of value and curvature under halving of the step: O(h⁶) and
    O(h⁴) (ratios 64 and 16)."""
    def errors(n):
        x = jnp.linspace(-1.0, 2.0, n + 1)
        s = mb.QuinticSpline.fit(0, x, *_sine_data(x))
        xs = jnp.linspace(-1.0, 2.0, 3001)
        got = jax.vmap(lambda v: s._derivatives(v))(xs)
        want = _sine_data(xs)
        return [float(jnp.max(jnp.abs(g - w))) for g, w in zip(got, want)]

    coarse, fine = errors(12), errors(24)
    assert 50 < coarse[0] / fine[0] < 80
    assert 12 < coarse[2] / fine[2] < 20


def test_quintic_spline_repeats_its_period_with_the_secular_term():
    x = jnp.linspace(0.0, 2 * np.pi, 33)
    s = mb.QuinticSpline.fit(0, x, *_sine_data(x, revolving=True), periodic=True, slope=-1.0)
    for v in (0.3, 2.9, -4.1):
        base = s._derivatives(jnp.asarray(v))
        for turns in (-3, 1, 5):
            shifted = s._derivatives(jnp.asarray(v + 2 * np.pi * turns))
            np.testing.assert_allclose(shifted[0], base[0] - 2 * np.pi * turns, rtol=0, atol=1e-13)
            np.testing.assert_allclose(shifted[1:], base[1:], rtol=0, atol=1e-12)


def test_quintic_spline_continues_linearly_outside_its_grid():
    x = jnp.linspace(0.0, 1.0, 5)
    s = mb.QuinticSpline.fit(0, x, *_sine_data(x))
    y, d1, _ = _sine_data(x)
    for end, beyond in ((0, -0.7), (-1, 1.6)):
        v, slope, curvature = s._derivatives(jnp.asarray(beyond))
        np.testing.assert_allclose(v, y[end] + d1[end] * (beyond - x[end]), rtol=1e-14)
        np.testing.assert_allclose(slope, d1[end], rtol=1e-14)
        assert float(curvature) == 0.0


# ---------------------------------------------------------------------------
# Bad data: NaN or inf is an error naming the function and the fix
# ---------------------------------------------------------------------------

NAN, INF = float("nan"), float("inf")
_X5 = jnp.linspace(0.0, 1.0, 5)
_QY, _QD1, _QD2 = _sine_data(_X5)

_BAD_DATA = {
    "cubic_fit_y": (lambda: mb.CubicSpline.fit(0, [0.0, 1.0, 2.0], [0.0, NAN, 1.0]),
                    "CubicSpline.fit of coordinate 0: y holds 1 non-finite"),
    "cubic_fit_x": (lambda: mb.CubicSpline.fit(2, [0.0, 1.0, INF], [0.0, 1.0, 1.0], "not-a-knot-fmm"),
                    "CubicSpline.fit of coordinate 2: x holds 1 non-finite"),
    "cubic_coefficients": (lambda: mb.CubicSpline(1, [0.0, 1.0], [0.0, 1.0], [1.0, NAN], [0.0, 0.0], [0.0, 0.0]),
                           "CubicSpline of coordinate 1: b holds 1 non-finite"),
    "quintic_fit": (lambda: mb.QuinticSpline.fit(0, _X5, _QY.at[2].set(NAN), _QD1, _QD2),
                    "QuinticSpline.fit of coordinate 0: y holds 1 non-finite"),
    "quintic_fit_curvature": (lambda: mb.QuinticSpline.fit(0, _X5, _QY, _QD1, _QD2.at[0].set(-INF)),
                              "QuinticSpline.fit of coordinate 0: d2ydx2 holds 1 non-finite"),
    "quintic_coefficients": (lambda: mb.QuinticSpline(0, 0.0, 0.5, jnp.zeros((2, 6)).at[1, 3].set(INF)),
                             "QuinticSpline of coordinate 0: coefficients holds 1 non-finite"),
    "fourier_amplitudes": (lambda: mb.FourierSeries(1, 0.0, [1.0, NAN], [0.0, 0.0], 1.0),
                           "FourierSeries of coordinate 1: a holds 1 non-finite"),
    "fourier_fit": (lambda: mb.FourierSeries.fit(0, _X5, _QY.at[4].set(NAN), 1, 2.0),
                    "FourierSeries.fit of coordinate 0: y holds 1 non-finite"),
    "polynomial": (lambda: mb.Polynomial(0, [1.0, NAN, 2.0]),
                   "Polynomial of coordinate 0: coefficients holds 1 non-finite"),
    "linear_weights": (lambda: mb.Linear((0, 2), (INF, 1.0)),
                       "Linear joint function of coordinates (0, 2): weights holds 1 non-finite"),
    "linear_offset": (lambda: mb.Linear((0,), (1.0,), NAN),
                      "Linear joint function of coordinates (0,): offset holds 1 non-finite"),
    "constant": (lambda: mb.Constant(NAN), "Constant joint function: value holds 1 non-finite"),
    "scaled": (lambda: mb.Scaled(mb.Coordinate(0), INF), "Scaled joint function: scale holds 1 non-finite"),
}


@pytest.mark.parametrize("name", list(_BAD_DATA))
def test_non_finite_data_is_an_error_naming_the_function_and_the_fix(name):
    """NaN or inf in a function's data gave NaN coefficients (and NaN dynamics) silently."""
    build, names = _BAD_DATA[name]
    with pytest.raises(mb.ModelError) as info:
        build()
    message = str(info.value)
    assert names in message, message
    fix = message.split("; ", 1)[1]  # after the cause: what to do
    assert "finite" in fix or "NaN" in fix, message


def test_traced_data_are_not_inspected_and_still_fit():
    """Inside jit the data cannot be checked at construction; the fit still runs."""
    x = jnp.linspace(0.0, 1.0, 5)
    fit = jax.jit(lambda y: mb.CubicSpline.fit(0, x, y, "not-a-knot-fmm").c)
    y = jnp.sin(3.0 * x)
    np.testing.assert_allclose(fit(y), mb.CubicSpline.fit(0, x, y, "not-a-knot-fmm").c, rtol=1e-12, atol=1e-12)
