"""OpenSim function elements as jaxmb joint functions.

:func:`parse_function` turns the XML element of an OpenSim ``Function``
(``Constant``, ``LinearFunction``, ``PolynomialFunction``, ``SimmSpline``,
``NaturalCubicSpline``, ``PiecewiseLinearFunction``,
``PiecewiseConstantFunction``, ``MultiplierFunction``, ``GCVSpline``) into a jaxmb joint
function of ``q``, given ``inner``: the joint function of ``q`` that is the
OpenSim function's argument (``Coordinate(k)`` for an independent coordinate,
a coupler function for a dependent one, a ``Constant`` for a locked one).

Each function evaluates as OpenSim 4.x does (opensim-core ``OpenSim/Common``):

* ``SimmSpline``: Forsythe-Malcolm-Moler cubic spline whose end conditions
  match the third derivative of the cubic through the four end points
  (jaxmb's ``"not-a-knot-fmm"``); two points give a line, three a parabola.
  Outside ``[x_0, x_{n-1}]`` it continues linearly with the end slope.
* ``NaturalCubicSpline``: despite its name, OpenSim's implementation computes
  exactly the same coefficients as ``SimmSpline`` (the same FMM end conditions)
  and extrapolates the same way; jaxmb follows the implementation.
* ``PiecewiseLinearFunction``: linear interpolation, linear extrapolation with
  the first/last segment's slope. Not differentiable at the knots (the
  derivative there is that of one of the adjacent segments).
* ``PiecewiseConstantFunction``: ``y_k`` on ``(x_k, x_{k+1})``, ``y_0`` at and
  below ``x_0``, ``y_{n-1}`` at and above ``x_{n-1}``. Its derivative is zero
  everywhere (the jumps are invisible to gradients).
* ``GCVSpline``: Woltring's GCVSPL natural smoothing spline of half order ``m``
  (``half_order``; degree ``2m-1``) with a knot at every ``x``, fitted at load time in
  NumPy exactly as OpenSim/Simbody fit it (:mod:`jaxmb.io._gcvspl`): with the default
  ``error_variance`` 0 it interpolates the data, a positive value selects the
  smoothing from the known variance, a negative one by generalized
  cross-validation; ``weights`` are ignored, as OpenSim ignores them. Outside
  ``[x_0, x_{n-1}]`` it continues as a polynomial of degree ``m-1`` (a natural
  spline). It is evaluated in JAX from one polynomial per interval
  (:class:`GCVSpline`).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Callable

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from .._errors import ModelError
from ._gcvspl import gcvspline_fit
from .._functions import (
    AbstractJointFunction,
    Composed,
    Constant,
    Coordinate,
    CubicSpline,
    Linear,
    Polynomial,
    Scaled,
)

__all__ = ["GCVSpline", "PiecewiseConstant", "PiecewiseLinear", "parse_function", "is_identically_zero",
           "SUPPORTED_FUNCTIONS"]

SUPPORTED_FUNCTIONS = (
    "Constant",
    "LinearFunction",
    "PolynomialFunction",
    "SimmSpline",
    "NaturalCubicSpline",
    "PiecewiseLinearFunction",
    "PiecewiseConstantFunction",
    "MultiplierFunction",
    "GCVSpline",
)

# Describe an element for error messages; the importer installs a describer that
# adds the file name and line number.
Describe = Callable[[ET.Element], str]


def _default_describe(el: ET.Element) -> str:
    name = el.get("name")
    return f"<{el.tag}{f' name={name!r}' if name is not None else ''}>"


class _Piecewise(AbstractJointFunction):
    """Knots ``(x, y)`` of a piecewise function of ``q[index]`` (shared storage and checks)."""

    index: int = eqx.field(static=True)
    x: Float[Array, " n"]
    y: Float[Array, " n"]
    _minimum_knots = 1

    def __init__(self, index: int, x: ArrayLike, y: ArrayLike):
        self.index = int(index)
        self.x = jnp.asarray(np.asarray(x, dtype=float))
        self.y = jnp.asarray(np.asarray(y, dtype=float))
        _check_knots(type(self).__name__, np.asarray(x, float), np.asarray(y, float),
                     minimum=self._minimum_knots)

    def coordinate_indices(self):
        return (self.index,)


class PiecewiseLinear(_Piecewise):
    """Piecewise-linear interpolation of one coordinate (OpenSim's PiecewiseLinearFunction).

    ``f(q) = y_k + (x - x_k) s_k`` on ``[x_k, x_{k+1}]`` with ``x = q[index]`` and
    ``s_k`` the segment slope; outside the knots it continues with the first/last
    slope. Continuous, but not smooth: the gradient jumps at the knots and the
    Hessian is zero.
    """

    _minimum_knots = 2

    def __call__(self, q):
        xq = q[self.index]
        n = self.x.shape[0]
        k = jnp.clip(jnp.searchsorted(self.x, xq, side="right") - 1, 0, n - 2)
        slope = (self.y[k + 1] - self.y[k]) / (self.x[k + 1] - self.x[k])
        return self.y[k] + (xq - self.x[k]) * slope


class PiecewiseConstant(_Piecewise):
    """Step function of one coordinate (OpenSim's PiecewiseConstantFunction).

    ``f = y_0`` for ``x <= x_0``, ``y_k`` for ``x_k < x < x_{k+1}``, ``y_{n-1}`` for
    ``x >= x_{n-1}`` (``x = q[index]``). Its gradient and Hessian are zero
    everywhere: the jumps do not show up in derivatives.
    """

    _minimum_knots = 1

    def __call__(self, q):
        xq = q[self.index]
        n = self.x.shape[0]
        k = jnp.clip(jnp.searchsorted(self.x, xq, side="right") - 1, 0, n - 1)
        val = self.y[k]
        val = jnp.where(xq <= self.x[0], self.y[0], val)
        return jnp.where(xq >= self.x[-1], self.y[-1], val).astype(q.dtype)


class GCVSpline(AbstractJointFunction):
    """OpenSim's GCVSpline of one coordinate: a piecewise polynomial ``f(q) = s(q[index])``.

    ``s`` is a natural spline of degree ``2m-1`` with knots ``x`` (length ``n``); it is
    stored as ``n + 1`` polynomials in ascending powers: ``coefficients[0]`` in powers
    of ``t - x_0`` for ``t < x_0``, ``coefficients[k + 1]`` in powers of ``t - x_k`` for
    ``x_k <= t < x_{k+1}`` (the last for ``t >= x_{n-1}``). Intervals are closed on
    the left, as in GCVSPL's ``splder``, so at a knot a derivative the spline does
    not have continuously (order ``>= 2m-1``) is the right-hand one.

    Build it with :meth:`fit` from the data of an OpenSim ``<GCVSpline>``. The fit is
    NumPy preprocessing; evaluation is JAX (any derivative order by autodiff).
    """

    index: int = eqx.field(static=True)
    x: Float[Array, " n"]
    coefficients: Float[Array, "n_plus_1 order"]

    def __init__(self, index: int, x: ArrayLike, coefficients: ArrayLike):
        self.index = int(index)
        x = np.asarray(x, dtype=float)
        coefficients = np.asarray(coefficients, dtype=float)
        if x.ndim != 1 or x.size < 2 or coefficients.ndim != 2 or coefficients.shape[0] != x.size + 1:
            raise ModelError(f"GCVSpline: need n >= 2 knots and (n + 1, order) coefficients, got "
                             f"shapes {x.shape} and {coefficients.shape}.")
        if not np.all(np.diff(x) > 0):
            raise ModelError(f"GCVSpline: x must be strictly increasing, got {x}.")
        self.x = jnp.asarray(x)
        self.coefficients = jnp.asarray(coefficients)

    @classmethod
    def fit(cls, index: int, x: ArrayLike, y: ArrayLike, half_order: int,
            error_variance: float = 0.0) -> "GCVSpline":
        """OpenSim's ``GCVSpline`` with properties ``half_order``, ``error_variance``,
        ``x``, ``y``, as a function of ``q[index]``. Raises :class:`jaxmb.ModelError`
        where OpenSim fails (``half_order < 1``, fewer than ``2 half_order`` points,
        ``x`` not strictly increasing)."""
        try:
            _, pieces = gcvspline_fit(x, y, half_order, error_variance)
        except ValueError as e:
            raise ModelError(f"GCVSpline: {e}.") from None
        return cls(index, x, pieces)

    def coordinate_indices(self):
        return (self.index,)

    def __call__(self, q):
        xq = q[self.index]
        k = jnp.searchsorted(self.x, xq, side="right")  # interval k - 1, row k
        tau = xq - self.x[jnp.maximum(k - 1, 0)]
        row = self.coefficients[k]
        val = row[-1]
        for r in range(self.coefficients.shape[1] - 2, -1, -1):
            val = row[r] + tau * val
        return val


def _check_knots(kind, x, y, minimum):
    if x.ndim != 1 or x.shape != y.shape or x.shape[0] < minimum:
        raise ModelError(f"{kind}: x and y must be 1-D of equal length >= {minimum}, got "
                         f"shapes {x.shape} and {y.shape}.")
    if not np.all(np.diff(x) > 0):
        raise ModelError(f"{kind}: x must be strictly increasing, got {x}.")


def fmm_spline_coefficients(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Polynomial coefficients of OpenSim's SimmSpline, in NumPy (float64).

    On ``[x_i, x_{i+1}]`` the spline is ``y_i + b_i t + c_i t² + d_i t³``. The second
    moments ``σ = s''/6`` solve the usual tridiagonal continuity rows; the end rows
    set the spline's third derivative to that of the cubic through the four end
    points (Forsythe, Malcolm & Moler 1977), which OpenSim uses for SimmSpline.
    Two points give a line, three a parabola. Same numbers as
    ``jaxmb.CubicSpline.fit(..., end_condition="not-a-knot-fmm")`` without
    compiling JAX kernels at import time.
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    n = x.size
    h = np.diff(x)
    slope = np.diff(y) / h
    if n == 2:
        return np.full(2, slope[0]), np.zeros(2), np.zeros(2)
    a = np.zeros((n, n))
    r = np.zeros(n)
    for i in range(1, n - 1):
        a[i, i - 1], a[i, i], a[i, i + 1] = h[i - 1], 2.0 * (h[i - 1] + h[i]), h[i]
        r[i] = slope[i] - slope[i - 1]
    a[0, 0], a[0, 1] = -h[0], h[0]
    a[n - 1, n - 2], a[n - 1, n - 1] = h[-1], -h[-1]
    if n > 3:
        def third_divided_difference(j):  # of the data at x_j .. x_{j+3}
            dd2_a = (slope[j + 1] - slope[j]) / (x[j + 2] - x[j])
            dd2_b = (slope[j + 2] - slope[j + 1]) / (x[j + 3] - x[j + 1])
            return (dd2_b - dd2_a) / (x[j + 3] - x[j])

        r[0] = h[0] ** 2 * third_divided_difference(0)
        r[n - 1] = -(h[-1] ** 2) * third_divided_difference(n - 4)
    sigma = np.linalg.solve(a, r)
    b = np.empty(n)
    b[:-1] = slope - h * (sigma[1:] + 2.0 * sigma[:-1])
    b[-1] = slope[-1] + h[-1] * (sigma[-2] + 2.0 * sigma[-1])
    c = 3.0 * sigma
    d = np.empty(n)
    d[:-1] = (sigma[1:] - sigma[:-1]) / h
    d[-1] = d[-2]
    return b, c, d


# ---------------------------------------------------------------------------
# XML helpers
# ---------------------------------------------------------------------------


def _children(el: ET.Element) -> list[ET.Element]:
    return [c for c in el if isinstance(c.tag, str)]


def _text_of(el: ET.Element, tag: str, describe: Describe, required: bool = True) -> str | None:
    found = [c for c in _children(el) if c.tag == tag]
    if not found:
        if required:
            raise ModelError(f"{describe(el)} has no <{tag}>; OpenSim needs it to define this function.")
        return None
    if len(found) > 1:
        raise ModelError(f"{describe(found[1])}: <{tag}> given twice in {describe(el)}.")
    return (found[0].text or "").strip()


def _floats(el: ET.Element, tag: str, describe: Describe, required: bool = True) -> np.ndarray | None:
    text = _text_of(el, tag, describe, required)
    if text is None:
        return None
    try:
        values = np.array([float(t) for t in text.split()], dtype=float)
    except ValueError:
        raise ModelError(f"{describe(el)}: <{tag}> must hold numbers, got {text!r}.") from None
    if not np.all(np.isfinite(values)):
        raise ModelError(f"{describe(el)}: <{tag}> holds non-finite numbers {text!r}.")
    return values


def _only_children(el: ET.Element, allowed: set[str], describe: Describe):
    for c in _children(el):
        if c.tag not in allowed:
            raise ModelError(
                f"{describe(c)} inside {describe(el)} is not supported by jaxmb's .osim importer "
                f"(expected only {sorted(allowed)})."
            )


def _xy(el: ET.Element, describe: Describe, minimum: int) -> tuple[np.ndarray, np.ndarray]:
    _only_children(el, {"x", "y"}, describe)
    x = _floats(el, "x", describe)
    y = _floats(el, "y", describe)
    if x.shape != y.shape:
        raise ModelError(f"{describe(el)}: <x> has {x.size} values but <y> has {y.size}.")
    if x.size < minimum:
        raise ModelError(f"{describe(el)}: needs at least {minimum} points, got {x.size}.")
    if not np.all(np.diff(x) > 0):
        raise ModelError(f"{describe(el)}: <x> must be strictly increasing, got {x.tolist()}.")
    return x, y


# ---------------------------------------------------------------------------
# The parser
# ---------------------------------------------------------------------------


def _univariate(inner: AbstractJointFunction, build: Callable[[int], AbstractJointFunction]):
    """Apply a univariate function built by ``build(index)`` to ``inner``."""
    if isinstance(inner, Coordinate):
        return build(inner.index)
    return Composed(build(0), inner)


def parse_function(element: ET.Element, inner: AbstractJointFunction,
                   describe: Describe | None = None) -> AbstractJointFunction:
    """The OpenSim function `element` applied to `inner`, as a jaxmb joint function.

    **Arguments:**

    - `element`: the function's XML element (e.g. ``<SimmSpline name="function">``).
    - `inner`: the joint function of ``q`` that gives the OpenSim function's argument
      (``Coordinate(k)`` for the k-th independent coordinate). For a ``Coordinate``
      the result reads ``q[k]`` directly; otherwise it is ``Composed(outer, inner)``.
    - `describe`: optional ``element -> str`` used in error messages (the importer
      passes one that adds the file and line number).

    **Returns:** an :class:`jaxmb.AbstractJointFunction`.

    Raises :class:`jaxmb.ModelError` naming the element for an unsupported
    function type (``MultivariatePolynomialFunction``, ``Sine``, ``StepFunction``, ...)
    or malformed data.
    """
    describe = describe or _default_describe
    tag = element.tag
    if tag == "Constant":
        _only_children(element, {"value"}, describe)
        value = _floats(element, "value", describe)
        if value.size != 1:
            raise ModelError(f"{describe(element)}: <value> must be one number, got {value.tolist()}.")
        return Constant(float(value[0]))
    if tag == "LinearFunction":
        _only_children(element, {"coefficients"}, describe)
        coef = _floats(element, "coefficients", describe)
        if coef.size != 2:
            raise ModelError(f"{describe(element)}: <coefficients> must be 'slope intercept' "
                             f"(2 numbers), got {coef.tolist()}.")
        slope, intercept = float(coef[0]), float(coef[1])
        if isinstance(inner, Coordinate) and slope == 1.0 and intercept == 0.0:
            return inner
        return _univariate(inner, lambda i: Linear((i,), (slope,), intercept))
    if tag == "PolynomialFunction":
        _only_children(element, {"coefficients"}, describe)
        coef = _floats(element, "coefficients", describe)
        if coef.size == 0:
            raise ModelError(f"{describe(element)}: <coefficients> is empty.")
        # OpenSim lists the highest order first; jaxmb's Polynomial the lowest first.
        return _univariate(inner, lambda i: Polynomial(i, coef[::-1].copy()))
    if tag in ("SimmSpline", "NaturalCubicSpline"):
        x, y = _xy(element, describe, minimum=2)
        b, c, d = fmm_spline_coefficients(x, y)
        return _univariate(inner, lambda i: CubicSpline(i, x, y, b, c, d))
    if tag == "PiecewiseLinearFunction":
        x, y = _xy(element, describe, minimum=2)
        return _univariate(inner, lambda i: PiecewiseLinear(i, x, y))
    if tag == "PiecewiseConstantFunction":
        x, y = _xy(element, describe, minimum=1)
        return _univariate(inner, lambda i: PiecewiseConstant(i, x, y))
    if tag == "MultiplierFunction":
        return _parse_multiplier(element, inner, describe)
    if tag == "GCVSpline":
        return _parse_gcvspline(element, inner, describe)
    raise ModelError(
        f"{describe(element)}: OpenSim function type {tag!r} is not supported by jaxmb "
        f"(supported: {', '.join(SUPPORTED_FUNCTIONS)})."
    )


def _parse_gcvspline(element, inner, describe):
    if any(c.tag == "degree" for c in _children(element)):
        raise ModelError(
            f"{describe(element)}: GCVSpline has <degree>, which is not an OpenSim property; "
            "OpenSim reads <half_order> m (degree 2m - 1) and fails on this element.")
    _only_children(element, {"half_order", "error_variance", "x", "y", "weights", "coefficients"},
                   describe)
    half_order = _floats(element, "half_order", describe, required=False)
    if half_order is None or half_order.size != 1 or half_order[0] != int(half_order[0]) \
            or half_order[0] < 1:
        raise ModelError(
            f"{describe(element)}: GCVSpline needs <half_order> m >= 1 (degree 2m - 1), got "
            f"{None if half_order is None else half_order.tolist()}; OpenSim fails without it.")
    m = int(half_order[0])
    variance = _floats(element, "error_variance", describe, required=False)
    if variance is not None and variance.size != 1:
        raise ModelError(f"{describe(element)}: <error_variance> must be one number.")
    variance = 0.0 if variance is None else float(variance[0])
    # <weights> and <coefficients> are read by OpenSim but not used for the fit.
    for tag in ("weights", "coefficients"):
        _floats(element, tag, describe, required=False)
    x = _floats(element, "x", describe)
    y = _floats(element, "y", describe)
    if x.shape != y.shape:
        raise ModelError(f"{describe(element)}: <x> has {x.size} values but <y> has {y.size}.")
    if x.size < 2 * m:
        raise ModelError(f"{describe(element)}: a GCVSpline of half order {m} needs at least "
                         f"{2 * m} points, got {x.size} (OpenSim fails too).")
    if not np.all(np.diff(x) > 0):
        raise ModelError(f"{describe(element)}: <x> must be strictly increasing, got {x.tolist()}.")
    _, pieces = gcvspline_fit(x, y, m, variance)
    return _univariate(inner, lambda i: GCVSpline(i, x, pieces))


def _parse_multiplier(element, inner, describe):
    _only_children(element, {"function", "scale"} | set(_FUNCTION_TAGS), describe)
    scale_values = _floats(element, "scale", describe, required=False)
    scale = 1.0 if scale_values is None else scale_values
    if np.size(scale) != 1:
        raise ModelError(f"{describe(element)}: <scale> must be one number.")
    scale = float(np.ravel(scale)[0])
    # OpenSim 4 wraps the function in <function>; older files put it directly inside.
    holders = [c for c in _children(element) if c.tag == "function"]
    if holders:
        candidates = _children(holders[0])
    else:
        candidates = [c for c in _children(element) if c.tag in _FUNCTION_TAGS]
    if len(candidates) != 1:
        raise ModelError(f"{describe(element)}: expected exactly one wrapped function, found "
                         f"{len(candidates)}.")
    wrapped = parse_function(candidates[0], inner, describe)
    if isinstance(wrapped, Constant):
        return Constant(scale * float(wrapped.value))
    return Scaled(wrapped, scale)


# Every function element name OpenSim knows (used to recognise a function element).
_FUNCTION_TAGS = SUPPORTED_FUNCTIONS + (
    "MultivariatePolynomialFunction", "Sine", "StepFunction", "PiecewiseStepFunction",
    "ExpressionBasedFunction", "SmoothSegmentedFunction", "MultiStepFunction", "BSpline",
    "SimmPiecewiseLinearFunction",
)


def is_function_element(el: ET.Element) -> bool:
    """Whether `el` is an OpenSim function element (supported or not)."""
    return el.tag in _FUNCTION_TAGS or el.tag.endswith("Function") or el.tag.endswith("Spline")


def is_identically_zero(fn: AbstractJointFunction) -> bool:
    """True only when `fn` is exactly zero for every q (so its joint may be dropped)."""
    if isinstance(fn, Constant):
        return float(fn.value) == 0.0
    if isinstance(fn, Linear):
        return float(fn.offset) == 0.0 and bool(np.all(np.asarray(fn.weights) == 0.0))
    if isinstance(fn, Polynomial):
        return bool(np.all(np.asarray(fn.coefficients) == 0.0))
    if isinstance(fn, CubicSpline | PiecewiseLinear | PiecewiseConstant):
        return bool(np.all(np.asarray(fn.y) == 0.0))
    if isinstance(fn, GCVSpline):
        return bool(np.all(np.asarray(fn.coefficients) == 0.0))
    if isinstance(fn, Scaled):
        return float(fn.scale) == 0.0 or is_identically_zero(fn.inner)
    if isinstance(fn, Composed):
        return is_identically_zero(fn.outer)
    return False
