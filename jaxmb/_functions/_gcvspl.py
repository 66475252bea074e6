"""Fitting OpenSim's ``GCVSpline`` (Woltring's GCVSPL smoothing spline), in NumPy.

OpenSim 4.x evaluates a ``GCVSpline`` through Simbody: ``GCVSpline::createSimTKFunction``
calls ``SplineFitter::fitFromErrorVariance(degree, x, y, error_variance)`` (GCVSPL
mode 3) when ``error_variance >= 0`` (the default is 0) and ``SplineFitter::fitFromGCV``
(mode 2, generalized cross-validation) when it is negative, always with unit data
weights (the ``weights`` property is not used), and evaluates the result with
GCVSPL's ``splder``. The ``coefficients`` property is an output (overwritten).

This module re-derives that computation (Woltring 1986, Adv. Eng. Software 8:104):

* The spline of half-order ``m`` (degree ``2m-1``) is a *natural* spline with a knot
  at every abscissa ``x_1 < ... < x_n``: degree ``2m-1`` between the knots, degree
  ``m-1`` outside ``[x_1, x_n]``, ``C^{2m-2}`` everywhere. It is written
  ``s = sum_j c_j N_j`` in GCVSPL's basis, whose ``j``-th function (1-based) is a
  scaled divided difference of truncated powers over the knots ``x_{j-m}..x_{j+m}``
  that exist:

  - ``m < j <= n-m``:  ``N_j(t) = (x_{j+m} - x_{j-m}) [x_{j-m},...,x_{j+m}] (. - t)_+^{2m-1}``
    (the usual normalized B-spline);
  - ``j <= m``:        ``N_j(t) = [x_1,...,x_{j+m}] (. - t)_+^{2m-1}``;
  - ``j > n-m``:       ``N_j(t) = (-1)^{j-n+m} [x_{j-m},...,x_n] (t - .)_+^{2m-1}``.

* For a smoothing parameter ``p`` the coefficients solve ``(B + p E) c = y``, with
  ``B_ij = N_j(x_i)`` and ``E_ij = (-1)^m (2m-1)! g_j w_ij`` (``g_j`` the scale above,
  ``w_ij`` the divided-difference weight of ``x_i`` in ``N_j``): ``E c`` is
  ``(-1)^m`` times the jumps of ``s^{(2m-1)}`` at the knots, so the residuals are
  ``y - s(x) = p (-1)^m [s^{(2m-1)}]``, the condition for the minimizer of
  ``sum (y_i - s(x_i))^2 + p' int (s^{(m)})^2``.
* ``p`` is chosen by GCVSPL's search: starting at ``1/el`` (``el`` the mean absolute
  band entry of ``E`` over that of ``B``), halving while the criterion decreases,
  else doubling, then a golden-section search to a relative bracket of 1e-6. In mode
  3 the criterion is ``R - v (2 T - 1)`` (``R`` the mean squared residual, ``T`` the
  mean of ``p tr(E (B + p E)^{-1})``, ``v`` the error variance), in mode 2 the GCV
  function ``R / T^2``. ``p el`` is kept within ``[1e-15, 1e15]``. With the default
  ``v = 0`` the criterion is ``R``, the search ends at ``p el = 1e-15`` and the
  spline interpolates the data (to about 1e-15).

The fitted spline is returned as one polynomial per interval (``n + 1`` intervals:
``t < x_1``, ``[x_k, x_{k+1})``, ``t >= x_n``), in powers of ``t`` minus the interval's
left knot (``x_1`` for the first), which is how [`jaxmb.io.GCVSpline`][jaxmb.io.GCVSpline]
evaluates it in JAX. GCVSPL's ``splder`` uses the same right-continuous intervals.
"""

from __future__ import annotations

import math

import numpy as np

from .._checks import is_count

__all__ = ["gcvspline_fit", "gcvspline_basis_pieces"]

_EPS = 1e-15  # GCVSPL keeps p * el within [_EPS, 1 / _EPS]
_GOLDEN = 1.618033983
_TOL = 1e-6
_P_HUGE = 999999999999999.88  # GCVSPL's "p clipped at its maximum" test


def _basis_knots(j: int, n: int, m: int) -> tuple[int, int, str, float | None]:
    """Knot range ``[a, b]`` (0-based, inclusive), truncated-power side, sign of ``N_j``.

    ``j`` is 0-based here. The scale of an interior function is its knot span
    (returned as ``None``; the caller computes it from x).
    """
    jj = j + 1  # GCVSPL's 1-based index
    if jj <= m:
        return 0, jj + m - 1, "left", 1.0
    if jj > n - m:
        return jj - m - 1, n - 1, "right", float((-1) ** (jj - n + m))
    return jj - m - 1, jj + m - 1, "left", None


def _piece_of_basis(x, a, b, side, degree, k, origin):
    """``[x_a..x_b] T(.)`` restricted to interval ``k`` as coefficients in ``tau = t - origin``.

    ``T(u) = (u - t)_+^degree`` (side "left") or ``(t - u)_+^degree`` (side "right").
    Interval ``k`` is ``(x_k, x_{k+1})`` with ``k = -1`` below ``x_0`` and ``k = n-1``
    above ``x_{n-1}``. Uses the two-sided (Cox-de Boor) recurrence
    ``D[a..b]_d = ((x_b - t) D[a+1..b]_{d-1} + (t - x_a) D[a..b-1]_{d-1}) / (x_b - x_a)``
    (with a minus sign for the right side), which is stable.
    """
    ncoef = degree + 1
    memo: dict[tuple[int, int, int], np.ndarray] = {}

    def shifted_power(c, d):  # (c - tau)^d  as coefficients in tau
        out = np.zeros(ncoef)
        for r in range(d + 1):
            out[r] = math.comb(d, r) * c ** (d - r) * (-1.0) ** r
        return out

    def D(lo, hi, d):
        key = (lo, hi, d)
        if key in memo:
            return memo[key]
        if lo == hi:
            if side == "left":  # (x_lo - t)_+^d, nonzero for t < x_lo
                active = lo >= k + 1
                val = shifted_power(x[lo] - origin, d) if active else np.zeros(ncoef)
            else:  # (t - x_lo)_+^d = (-1)^d (x_lo - t)^d for t > x_lo
                active = lo <= k
                val = (-1.0) ** d * shifted_power(x[lo] - origin, d) if active else np.zeros(ncoef)
        elif d == 0:
            val = (D(lo + 1, hi, 0) - D(lo, hi - 1, 0)) / (x[hi] - x[lo])
        else:
            right = D(lo + 1, hi, d - 1)
            left = D(lo, hi - 1, d - 1)
            # (x_hi - t) = (x_hi - origin) - tau ;  (t - x_lo) = (origin - x_lo) + tau
            num = (x[hi] - origin) * right + (origin - x[lo]) * left
            num[1:] += left[:-1] - right[:-1]
            val = num / (x[hi] - x[lo])
            if side == "right":
                val = -val
        memo[key] = val
        return val

    return D(a, b, degree)


def gcvspline_basis_pieces(x: np.ndarray, m: int) -> np.ndarray:
    """Polynomial pieces of every basis function: array ``(n, n + 1, 2m)``.

    ``P[j, k + 1]`` are the coefficients (ascending powers of ``t - origin_k``) of
    ``N_j`` on interval ``k`` (``k = -1..n-1``; origin ``x_max(k, 0)``).
    """
    x = np.asarray(x, dtype=float)
    n = x.size
    degree = 2 * m - 1
    pieces = np.zeros((n, n + 1, 2 * m))
    for j in range(n):
        a, b, side, scale = _basis_knots(j, n, m)
        interior = scale is None
        if interior:
            scale = x[b] - x[a]
        for k in range(-1, n):
            if side == "left" and k >= b:  # zero at and after the last knot
                continue
            if interior and k < a:  # a 2m-th divided difference of a polynomial of degree 2m-1
                continue
            if side == "right" and k < a:  # zero before the first knot
                continue
            origin = x[max(k, 0)]
            pieces[j, k + 1] = scale * _piece_of_basis(x, a, b, side, degree, k, origin)
    # Outside [x_0, x_{n-1}] a natural spline has degree m-1: the higher coefficients
    # are round-off.
    pieces[:, 0, m:] = 0.0
    pieces[:, n, m:] = 0.0
    return pieces


def _penalty_matrix(x: np.ndarray, m: int) -> np.ndarray:
    """GCVSPL's ``E``: ``E[i, j] = (-1)^m (2m-1)! g_j / prod_{l != i} (x_i - x_l)``."""
    n = x.size
    f1 = (-1.0) ** m * math.factorial(2 * m - 1)
    e = np.zeros((n, n))
    for j in range(n):
        a, b, _side, scale = _basis_knots(j, n, m)
        if scale is None:
            scale = x[b] - x[a]
        for i in range(a, b + 1):
            others = np.concatenate([x[a:i], x[i + 1:b + 1]])
            e[i, j] = f1 * scale / np.prod(x[i] - others)
    return e


class _Criterion:
    """GCVSPL's ``splc``: fit for a smoothing parameter and score it."""

    def __init__(self, b, e, y, el, mode, val):
        self.b, self.e, self.y, self.el = b, e, y, el
        self.mode, self.val = mode, val
        self.p_reported = 0.0  # GCVSPL's stat(4): p, 0 if clipped low, the clip if high
        self.c = None

    def __call__(self, p: float) -> float:
        dp = p
        self.p_reported = p
        pel = p * self.el
        if pel < _EPS:
            dp = _EPS / self.el
            self.p_reported = 0.0
        if pel * _EPS > 1.0:
            dp = 1.0 / (self.el * _EPS)
            self.p_reported = dp
        n = self.y.size
        system = self.b + dp * self.e
        c = np.linalg.solve(system, self.y)
        self.c = c
        residual = self.b @ c - self.y
        esn = float(residual @ residual) / n
        trn = dp * float(np.trace(self.e @ np.linalg.inv(system))) / n
        with np.errstate(divide="ignore", invalid="ignore"):
            if self.mode == 3:
                return esn - self.val * (2.0 * trn - 1.0)
            return esn / trn / trn  # mode 2: the GCV function


def gcvspline_fit(x, y, half_order: int, error_variance: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """OpenSim's GCVSpline of ``(x, y)``: GCVSPL coefficients and polynomial pieces.

    **Returns:** ``(c, pieces)`` with ``c`` the ``n`` GCVSPL coefficients (OpenSim's
    ``getCoefficients()``) and ``pieces`` the ``(n + 1, 2m)`` polynomial coefficients
    of the spline on each interval (see the module docstring).

    Raises ``ValueError`` for ``half_order < 1``, fewer than ``2 * half_order``
    points or non-increasing ``x``.
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if not is_count(half_order, 1):
        raise ValueError(f"half_order must be an integer >= 1, got {half_order!r}")  # int() cut 2.5 to 2
    if np.ndim(error_variance) != 0:
        raise ValueError(f"error_variance must be a number, got {error_variance!r}")
    m = int(half_order)
    n = x.size
    if x.ndim != 1 or y.shape != x.shape:
        raise ValueError(f"x and y must be 1-D of equal length, got {x.shape} and {y.shape}")
    if n < 2 * m:
        raise ValueError(f"a spline of half order {m} needs at least {2 * m} points, got {n}")
    if not np.all(np.diff(x) > 0):
        raise ValueError("x must be strictly increasing")
    mode, val = (3, float(error_variance)) if error_variance >= 0.0 else (2, float(error_variance))

    pieces = gcvspline_basis_pieces(x, m)
    # B[i, j] = N_j(x_i): the value at the left end of interval i (continuous functions).
    bmat = pieces[:, 1:, 0].T.copy()
    emat = _penalty_matrix(x, m)
    bl = float(np.sum(np.abs(bmat))) / n
    el = float(np.sum(np.abs(emat))) / n / bl

    f = _Criterion(bmat, emat, y, el, mode, val)
    r1 = 1.0 / el
    r2 = 2.0 * r1
    gf2 = f(r2)
    final = None
    while True:  # halve p while the criterion decreases
        gf1 = f(r1)
        if gf1 > gf2:
            break
        if f.p_reported <= 0.0:
            final = r1
            break
        r2, gf2 = r1, gf1
        r1 /= 2.0
    if final is None:
        r3 = 2.0 * r2
        while True:  # double p while the criterion decreases
            gf3 = f(r3)
            if gf3 > gf2:
                break
            if f.p_reported >= _P_HUGE:
                final = r1
                break
            r2, gf2 = r3, gf3
            r3 *= 2.0
    if final is None:  # golden-section search on [r1, r3]
        r2, gf2 = r3, gf3
        alpha = (r2 - r1) / _GOLDEN
        r4 = r1 + alpha
        r3 = r2 - alpha
        gf3 = f(r3)
        gf4 = f(r4)
        while True:
            if gf3 <= gf4:
                r2, gf2 = r4, gf4
                err = (r2 - r1) / (r1 + r2)
                if err * err + 1.0 == 1.0 or err <= _TOL:
                    break
                r4, gf4 = r3, gf3
                alpha /= _GOLDEN
                r3 = r2 - alpha
                gf3 = f(r3)
            else:
                r1, gf1 = r3, gf3
                err = (r2 - r1) / (r1 + r2)
                if err * err + 1.0 == 1.0 or err <= _TOL:
                    break
                r3, gf3 = r4, gf4
                alpha /= _GOLDEN
                r4 = r1 + alpha
                gf4 = f(r4)
        final = (r1 + r2) / 2.0
    f(final)
    c = f.c
    return c, np.einsum("j,jkr->kr", c, pieces)


def gcvspline_interpolation_operators(x, half_order: int, xq, orders=(0, 1, 2)) -> list[np.ndarray]:
    """Linear maps from data ``y`` (n,) to the derivatives at ``xq`` of OpenSim's
    ``GCVSpline`` with error variance 0 (the default) through ``(x, y)``.

    With error variance 0 GCVSPL's criterion is the mean squared residual, which its
    search drives to the lower clip of the smoothing parameter, ``p el = 1e-15``
    (module docstring), whatever ``y``: the spline then is ``s = N (B + p E)⁻¹ y``
    for that ``p``, linear in ``y``. This returns ``W_d = N⁽ᵈ⁾(xq) (B + p E)⁻¹``
    (len(xq), n) for each ``d`` in `orders` (``d < 2m``), so that
    ``s⁽ᵈ⁾(xq) = W_d y`` for any data, differentiably.

    Raises ``ValueError`` for fewer than ``2 * half_order`` points or non-increasing ``x``.
    """
    x = np.asarray(x, dtype=float)
    xq = np.atleast_1d(np.asarray(xq, dtype=float))
    m = int(half_order)
    n = x.size
    if m < 1 or n < 2 * m:
        raise ValueError(f"a spline of half order {m} needs at least {2 * m} points, got {n}")
    if not np.all(np.diff(x) > 0):
        raise ValueError("x must be strictly increasing")
    pieces = gcvspline_basis_pieces(x, m)
    bmat = pieces[:, 1:, 0].T.copy()
    emat = _penalty_matrix(x, m)
    el = float(np.sum(np.abs(emat))) / float(np.sum(np.abs(bmat)))
    inverse = np.linalg.inv(bmat + (_EPS / el) * emat)
    # GCVSPL's right-continuous intervals: k = -1 below x_0 (origin x_0), n - 1 from x_{n-1} on.
    k = np.searchsorted(x, xq, side="right") - 1
    tau = xq - x[np.maximum(k, 0)]
    local = pieces[:, k + 1, :]  # (n, len(xq), 2m)
    out = []
    for d in orders:
        powers = np.arange(2 * m)
        coef = np.where(powers >= d, [math.perm(int(r), d) if r >= d else 0 for r in powers], 0.0)
        tau_pow = np.where(powers >= d, tau[:, None] ** np.maximum(powers - d, 0), 0.0)  # (len(xq), 2m)
        basis = np.einsum("jqr,qr->qj", local, coef * tau_pow)  # N_j^(d)(xq)
        out.append(basis @ inverse)
    return out
