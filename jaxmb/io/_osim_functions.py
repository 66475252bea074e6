"""OpenSim function elements as jaxmb joint functions.

`parse_function` turns the XML element of an OpenSim ``Function``
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
* ``PiecewiseLinearFunction``, ``PiecewiseConstantFunction``, ``GCVSpline``: see
  [`jaxmb.io.PiecewiseLinear`][jaxmb.io.PiecewiseLinear], [`jaxmb.io.PiecewiseConstant`][jaxmb.io.PiecewiseConstant] and
  [`jaxmb.io.GCVSpline`][jaxmb.io.GCVSpline]. For ``GCVSpline`` with the default ``error_variance``
  0 the spline interpolates the data, a positive value selects the smoothing from
  the known variance, a negative one by generalized cross-validation; ``weights``
  are ignored, as OpenSim ignores them.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Callable

import numpy as np

from .._functions import (
    AbstractJointFunction,
    Composed,
    Constant,
    Coordinate,
    CubicSpline,
    GCVSpline,
    Linear,
    PiecewiseConstant,
    PiecewiseLinear,
    Polynomial,
    Scaled,
    fmm_spline_coefficients,
    gcvspline_fit,
)
from ._xml import XmlReader

__all__ = ["parse_function", "is_function_element", "is_identically_zero", "SUPPORTED_FUNCTIONS"]

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

# Every function element name OpenSim knows (used to recognise a function element).
_FUNCTION_TAGS = SUPPORTED_FUNCTIONS + (
    "MultivariatePolynomialFunction", "Sine", "StepFunction", "PiecewiseStepFunction",
    "ExpressionBasedFunction", "SmoothSegmentedFunction", "MultiStepFunction", "BSpline",
    "SimmPiecewiseLinearFunction",
)


def _xy(xml: XmlReader, el: ET.Element, minimum: int) -> tuple[np.ndarray, np.ndarray]:
    xml.check_children(el, {"x", "y"}, f"<{el.tag}>")
    x = xml.floats(el, "x")
    y = xml.floats(el, "y")
    _check_xy(xml, el, x, y, minimum)
    return x, y


def _check_xy(xml, el, x, y, minimum, why=""):
    if x.shape != y.shape:
        xml.fail(el, f"<x> has {x.size} values but <y> has {y.size}; give one y per x.")
    if x.size < minimum:
        xml.fail(el, f"needs at least {minimum} points, got {x.size}{why}.")
    if not np.all(np.diff(x) > 0):
        xml.fail(el, f"<x> must be strictly increasing, got {x.tolist()}; sort the points and remove "
                     "duplicates.")


def _univariate(inner: AbstractJointFunction, build: Callable[[int], AbstractJointFunction]):
    """Apply a univariate function built by ``build(index)`` to ``inner``."""
    if isinstance(inner, Coordinate):
        return build(inner.index)
    return Composed(build(0), inner)


def parse_function(element: ET.Element, inner: AbstractJointFunction,
                   reader: XmlReader | None = None) -> AbstractJointFunction:
    """The OpenSim function `element` applied to `inner`, as a jaxmb joint function.

    **Arguments:**

    - `element`: the function's XML element (e.g. ``<SimmSpline name="function">``).
    - `inner`: the joint function of ``q`` that gives the OpenSim function's argument
      (``Coordinate(k)`` for the k-th independent coordinate). For a ``Coordinate``
      the result reads ``q[k]`` directly; otherwise it is ``Composed(outer, inner)``.
    - `reader`: the file's reader (the importer passes it, so that errors name the
      file and line); by default the element alone.

    **Returns:** an [`jaxmb.AbstractJointFunction`][jaxmb.AbstractJointFunction].

    Raises [`jaxmb.ModelError`][jaxmb.ModelError] naming the element for an unsupported
    function type (``MultivariatePolynomialFunction``, ``Sine``, ``StepFunction``, ...)
    or malformed data (missing, non-numeric or non-finite numbers, unsorted ``x``).
    """
    xml = reader if reader is not None else XmlReader(element)
    tag = element.tag
    if tag == "Constant":
        xml.check_children(element, {"value"}, "<Constant>")
        return Constant(xml.number(element, "value"))
    if tag == "LinearFunction":
        xml.check_children(element, {"coefficients"}, "<LinearFunction>")
        coef = xml.floats(element, "coefficients")
        if coef.size != 2:
            xml.fail(element, f"<coefficients> must be 'slope intercept' (2 numbers), got {coef.tolist()}.")
        slope, intercept = float(coef[0]), float(coef[1])
        if isinstance(inner, Coordinate) and slope == 1.0 and intercept == 0.0:
            return inner
        return _univariate(inner, lambda i: Linear((i,), (slope,), intercept))
    if tag == "PolynomialFunction":
        xml.check_children(element, {"coefficients"}, "<PolynomialFunction>")
        coef = xml.floats(element, "coefficients")
        if coef.size == 0:
            xml.fail(element, "<coefficients> is empty; list the coefficients, highest order first.")
        # OpenSim lists the highest order first; jaxmb's Polynomial the lowest first.
        return _univariate(inner, lambda i: Polynomial(i, coef[::-1].copy()))
    if tag in ("SimmSpline", "NaturalCubicSpline"):
        x, y = _xy(xml, element, minimum=2)
        b, c, d = fmm_spline_coefficients(x, y)
        return _univariate(inner, lambda i: CubicSpline(i, x, y, b, c, d))
    if tag == "PiecewiseLinearFunction":
        x, y = _xy(xml, element, minimum=2)
        return _univariate(inner, lambda i: PiecewiseLinear(i, x, y))
    if tag == "PiecewiseConstantFunction":
        x, y = _xy(xml, element, minimum=1)
        return _univariate(inner, lambda i: PiecewiseConstant(i, x, y))
    if tag == "MultiplierFunction":
        return _parse_multiplier(xml, element, inner)
    if tag == "GCVSpline":
        return _parse_gcvspline(xml, element, inner)
    xml.fail(element, f"OpenSim function type {tag!r} is not supported by jaxmb "
                      f"(supported: {', '.join(SUPPORTED_FUNCTIONS)}); refit the data as one of them.")


def _parse_gcvspline(xml: XmlReader, element, inner):
    if xml.children(element, "degree"):
        xml.fail(element, "GCVSpline has <degree>, which is not an OpenSim property; "
                          "OpenSim reads <half_order> m (degree 2m - 1) and fails on this element.")
    xml.check_children(element, {"half_order", "error_variance", "x", "y", "weights", "coefficients"},
                       "<GCVSpline>")
    half_order = xml.floats(element, "half_order", default=None)
    if half_order is None or half_order.size != 1 or half_order[0] != int(half_order[0]) \
            or half_order[0] < 1:
        xml.fail(element, f"GCVSpline needs <half_order> m, an integer >= 1 (degree 2m - 1), got "
                          f"{None if half_order is None else half_order.tolist()}; OpenSim fails without it.")
    m = int(half_order[0])
    variance = xml.number(element, "error_variance", default=0.0)
    # <weights> and <coefficients> are read by OpenSim but not used for the fit.
    for tag in ("weights", "coefficients"):
        xml.floats(element, tag, default=None)
    x = xml.floats(element, "x")
    y = xml.floats(element, "y")
    _check_xy(xml, element, x, y, 2 * m, f" for a GCVSpline of half order {m} (OpenSim fails too)")
    _, pieces = gcvspline_fit(x, y, m, variance)
    return _univariate(inner, lambda i: GCVSpline(i, x, pieces))


def _parse_multiplier(xml: XmlReader, element, inner):
    xml.check_children(element, {"function", "scale"} | set(_FUNCTION_TAGS), "<MultiplierFunction>")
    scale = xml.number(element, "scale", default=1.0)
    # OpenSim 4 wraps the function in <function>; older files put it directly inside.
    holders = xml.children(element, "function")
    if holders:
        candidates = xml.children(holders[0])
    else:
        candidates = [c for c in xml.children(element) if c.tag in _FUNCTION_TAGS]
    if len(candidates) != 1:
        xml.fail(element, f"expected exactly one wrapped function, found {len(candidates)}.")
    wrapped = parse_function(candidates[0], inner, xml)
    if isinstance(wrapped, Constant):
        return Constant(scale * float(wrapped.value))
    return Scaled(wrapped, scale)


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

