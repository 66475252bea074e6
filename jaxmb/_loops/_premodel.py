"""Pre-modeling a loop (Ehsani 2016): sweep the coordinates, solve, fit explicit functions.

`premodel` solves a `LoopClosure` on a grid of ``q`` and fits
smooth joint functions of ``q`` (natural cubic spline, Fourier series, quintic
Hermite spline; a tensor-product spline for two coordinates); `premodeled`
replaces every loop of a model by such fits, so that no loop is solved during a
simulation.
"""

from collections.abc import Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._checks import flag, float_array, is_concrete, is_count
from .._errors import ModelError
from .._functions import AbstractJointFunction, CubicSpline, FourierSeries, QuinticSpline
from .._functions._base import coordinate_index
from .._loop_closure import RESULT_MESSAGES, SUCCESS, LoopClosure, LoopClosureError
from .._model import Model
from ._model_loops import _closures
from .._typing import RealLike


class TensorSpline(AbstractJointFunction):
    """Tensor-product natural cubic spline of two coordinates, ``f(q) = s(q[i0], q[i1])``.

    Interpolates ``values[a, b]`` at ``(x0[a], x1[b])``: a natural spline in ``q[i0]``
    through each column, evaluated at ``q[i0]``, then a natural spline in ``q[i1]``
    through those values (so the second fit happens at every evaluation; it is a
    dense solve of size len(x1)). Pre-modeling for two coordinates.

    **Arguments:**

    - `indices`: the two coordinates ``(i0, i1)``.
    - `x0`: (n0,) knots in ``q[i0]``, strictly increasing (rad or m).
    - `x1`: (n1,) knots in ``q[i1]``, strictly increasing (rad or m).
    - `values`: (n0, n1) the joint variable at the grid points (rad or m).
    """

    indices: tuple[int, int] = eqx.field(static=True)
    columns: CubicSpline  # batched over the x1 grid (vmapped fits)
    x1: Float[Array, " n1"]

    def __init__(self, indices, x0, x1, values):
        indices = tuple(indices) if hasattr(indices, "__iter__") and not isinstance(indices, str) else (indices,)
        if len(indices) != 2:  # a third index was ignored, one index failed with an IndexError
            raise ModelError(f"TensorSpline: indices must name two coordinates (i0, i1), got {indices!r}.")
        self.indices = tuple(coordinate_index(i, "TensorSpline") for i in indices)
        if self.indices[0] == self.indices[1]:
            raise ModelError(f"TensorSpline: indices must be two different coordinates, got {indices!r}.")
        x0, x1, values = float_array(x0), float_array(x1), float_array(values)
        if x0.ndim != 1 or x1.ndim != 1 or values.shape != (x0.size, x1.size):
            raise ModelError(f"TensorSpline: x0 (n0,), x1 (n1,) and values (n0, n1) expected, got shapes {x0.shape}, "
                             f"{x1.shape} and {values.shape}.")
        for name, x in (("x0", x0), ("x1", x1)):
            if is_concrete(x) and not (x.size >= 2 and np.all(np.diff(np.asarray(x)) > 0.0)):
                raise ModelError(f"TensorSpline: {name} must hold at least two strictly increasing knots, got "
                                 f"{np.asarray(x).tolist()}.")
        self.columns = eqx.filter_jit(eqx.filter_vmap(natural_spline_fit, in_axes=(None, None, 1)))(0, x0, values)
        self.x1 = x1

    def coordinate_indices(self):
        return self.indices

    def __call__(self, q):
        a = jnp.reshape(q[self.indices[0]], (1,))
        along = eqx.filter_vmap(lambda s: s(a))(self.columns)  # (n1,)
        return natural_spline_fit(0, self.x1, along)(jnp.reshape(q[self.indices[1]], (1,)))


def natural_spline_fit(index: int, x: Array, y: Array) -> CubicSpline:
    """Natural cubic spline of one coordinate through samples ``(x, y)``.

    ``CubicSpline.fit(index, x, y, "natural")`` (second derivative zero at both
    ends); traceable, so it can be vmapped over columns of samples.

    **Arguments:**

    - `index`: the coordinate ``q[index]`` the spline is a function of.
    - `x`: the knots (n,), increasing, in the coordinate's units (rad or m).
    - `y`: the values at the knots (n,), in the joint variable's units.

    **Returns:**

    The [`jaxmb.CubicSpline`][jaxmb.CubicSpline] joint function ``f(q) = s(q[index])``.
    """
    return CubicSpline.fit(index, x, y, "natural")


class PremodelResult(eqx.Module):
    """Pre-modeled joint functions and their fit error.

    - `functions`: one joint function per dependent variable (CubicSpline,
      FourierSeries, QuinticSpline or TensorSpline).
    - `grid`: the swept coordinate values; `values`: the solved variables there.
    - `fit_error`: max |fit - solve| between grid points (m,): at the midpoints, and
      for one coordinate at the quarter points too.
    - `derivative_error`: one coordinate only (else None): max |fit - loop| of the
      first and second derivatives at those points (m, 2), the loop's from
      `LoopClosure.derivatives` (what velocities and accelerations inherit).
    """

    functions: tuple
    grid: Any
    values: Array
    fit_error: Array
    derivative_error: Array | None = None


def _secular_slopes(x: np.ndarray, values) -> np.ndarray:
    """Per variable, the slope of its secular term over one period ``[x_0, x_n]``: a
    revolving variable (one that gains whole turns per period, e.g. a relative angle to
    a crank) gets ``2π·turns/period``, and its periodic rest is fitted; the others 0
    (up to their solve error)."""
    v = np.asarray(values)
    return 2 * np.pi * np.round((v[-1] - v[0]) / (2 * np.pi)) / (x[-1] - x[0])


@eqx.filter_jit
def _sweep(closure: LoopClosure, points):
    """Solve along a path of points, warm-starting each solve from the previous (a
    module-level jit: one compilation per loop and shape): ``(f (points, m), result codes
    (points,))``, the codes checked by the caller (a closure built with ``throw=False``
    would otherwise hand unconverged values to the fit)."""
    def body(f, qk):
        s = closure.solve(qk, f, throw=False)
        return s.f, (s.f, s.result._value)
    f_start = closure.solve(points[0], throw=False).f
    return jax.lax.scan(body, f_start, points)[1]


@eqx.filter_jit
def _derivatives_along(closure: LoopClosure, q, f):
    """`LoopClosure.derivatives` at many points (a module-level jit: one
    compilation per loop and shape, not one per `premodel` call)."""
    return jax.vmap(closure.derivatives)(q, f)


@eqx.filter_jit
def _fit_rates_along(functions, q):
    """``(f, df/dq, d²f/dq²)`` of each one-coordinate fit at many points (points, m, 3)."""
    return jnp.stack([jax.vmap(lambda p, fn=fn: jnp.stack(fn.rates(p, jnp.ones_like(p))))(q)
                      for fn in functions], axis=1)


def premodel(closure: LoopClosure, lower: RealLike, upper: RealLike, step: float | Sequence[float],
             kind: str = "spline", order: int = 8, omega: float | None = None,
             periodic: bool = False) -> PremodelResult:
    """Ehsani's pre-modeling approach (Ehsani 2016): sweep ``q`` over ``[lower, upper]`` with a fixed
    `step`, solve the loop at every point (warm-started from the previous one, so the
    sweep follows one branch), and fit explicit smooth functions.

    - nq = 1: ``kind="spline"`` (natural `CubicSpline`),
      ``kind="fourier"`` (`FourierSeries` of `order` with fundamental
      `omega`, default ``2π/(upper - lower)``) or ``kind="quintic"``
      (`QuinticSpline` through the solved values and their exact first
      and second derivatives, `LoopClosure.derivatives`; C², and the cheapest
      to evaluate). ``periodic=True`` makes the quintic repeat ``[lower, upper]``
      (one revolution of a crank), with a secular term for a variable that gains
      whole turns over it, as the Fourier fit does.
    - nq = 2: `TensorSpline` on the grid.

    The fit error is measured against fresh solves at the midpoints of the grid (nq =
    1: and at the quarter points, with the derivatives' errors against
    `LoopClosure.derivatives` in `derivative_error`).

    **Arguments:**

    - `closure`: the [`jaxmb.LoopClosure`][jaxmb.LoopClosure] to pre-model (nq of 1 or 2).
    - `lower`, `upper`: the sweep's bounds (nq,), rad or m.
    - `step`: the grid spacing, a scalar or one per coordinate, rad or m; rounded so that
      whole intervals fill each range (``round((upper - lower) / step)`` intervals: 0.3
      over a range of 1 gives three intervals of 1/3).
    - `kind`: ``"spline"``, ``"fourier"`` or ``"quintic"`` (see above).
    - `order`: the Fourier series' number of harmonics.
    - `omega`: the Fourier series' fundamental (rad per unit of ``q``).
    - `periodic`: make the quintic spline repeat ``[lower, upper]``.

    **Returns:**

    A `PremodelResult`: `functions` (one joint function per dependent variable),
    `grid`, `values`, `fit_error` (m,) and `derivative_error` (m, 2) or None.

    **Raises:**

    [`jaxmb.LoopClosureError`][jaxmb.LoopClosureError] for bounds of the wrong length, not finite
    or not increasing, a step that is not positive or exceeds the range, an unknown `kind`, a
    Fourier `order` below 1, an `omega` for another kind, a `periodic` fit other than quintic,
    more than two coordinates, or a `closure` that is not a `LoopClosure`.
    """
    if not isinstance(closure, LoopClosure):
        raise LoopClosureError(f"premodel: closure must be a jaxmb.LoopClosure (an ImplicitJointFunction's "
                               f"`.closure`), got {type(closure).__name__}; for a whole model use premodeled(model, "
                               "...).")
    lower = np.atleast_1d(np.asarray(lower, dtype=float))
    upper = np.atleast_1d(np.asarray(upper, dtype=float))
    try:
        steps = np.broadcast_to(np.atleast_1d(np.asarray(step, dtype=float)), lower.shape)
    except ValueError:
        raise LoopClosureError(f"premodel: step must be one number or one per coordinate ({lower.size}), "
                               f"got {step!r}.") from None
    nq = closure.nq
    if lower.shape != (nq,) or upper.shape != (nq,):
        raise LoopClosureError(f"premodel: lower/upper must have {nq} entries.")
    if kind not in ("spline", "fourier", "quintic"):
        raise LoopClosureError(f"premodel: kind must be 'spline', 'fourier' or 'quintic', got {kind!r}.")
    if not (np.all(np.isfinite(lower)) and np.all(np.isfinite(upper)) and np.all(lower < upper)):
        raise LoopClosureError(f"premodel: the sweep's bounds must be finite with lower < upper, got lower={lower}, "
                               f"upper={upper}.")
    if not (np.all(np.isfinite(steps)) and np.all(steps > 0) and np.all(steps <= upper - lower)):
        raise LoopClosureError(f"premodel: step must be positive, finite and at most upper - lower = "
                               f"{upper - lower}, got {steps}.")
    if kind == "fourier" and not is_count(order, 1):
        raise LoopClosureError(f"premodel: order (the Fourier series' harmonics) must be an integer >= 1, "
                               f"got {order!r}.")
    if omega is not None and kind != "fourier":
        raise LoopClosureError(f"premodel: omega is the Fourier series' fundamental; kind={kind!r} has none.")
    periodic = flag(periodic, "premodel: periodic")
    if periodic and kind != "quintic":
        raise LoopClosureError(f"premodel: periodic=True applies to kind='quintic' (a Fourier fit is periodic "
                               f"by construction, a natural spline cannot be), got kind={kind!r}.")
    axes = [np.linspace(lo, hi, int(round((hi - lo) / s)) + 1) for lo, hi, s in zip(lower, upper, steps)]

    def sweep(points):
        values, codes = _sweep(closure, jnp.asarray(points))
        bad = np.flatnonzero(np.asarray(codes) != SUCCESS)
        if bad.size:
            raise LoopClosureError(
                f"premodel: loop {closure.name!r} does not close at q = {np.asarray(points)[bad[0]].tolist()} "
                f"({RESULT_MESSAGES[int(np.asarray(codes)[bad[0]])]}), inside the sweep's bounds lower="
                f"{lower.tolist()}, upper={upper.tolist()}; narrow them to the range the mechanism reaches.")
        return values

    if nq == 1:
        x = axes[0]
        values = sweep(x[:, None])
        if kind == "spline":
            # jit the fits (the dense spline system is assembled element by element).
            batched = eqx.filter_jit(eqx.filter_vmap(natural_spline_fit, in_axes=(None, None, 1)))(
                0, jnp.asarray(x), values)
            fns = tuple(jax.tree.map(lambda leaf, k=k: leaf[k], batched) for k in range(closure.m))
        elif kind == "fourier":
            w = 2 * np.pi / (upper[0] - lower[0]) if omega is None else omega
            slopes = _secular_slopes(x, values) if omega is None else np.zeros(closure.m)
            fns = tuple(FourierSeries.fit(0, x, values[:, k], order, w, slopes[k]) for k in range(closure.m))
        else:  # "quintic"
            slopes = _secular_slopes(x, values) if periodic else np.zeros(closure.m)
            _, d1, d2 = _derivatives_along(closure, jnp.asarray(x)[:, None], values)
            fns = tuple(QuinticSpline.fit(0, x, values[:, k], d1[:, k, 0], d2[:, k, 0, 0], periodic=periodic,
                                          slope=slopes[k])
                        for k in range(closure.m))
        # The midpoints, and the quarter points: a Hermite fit's slope error vanishes at
        # the midpoints by symmetry, so they alone would understate it.
        # In increasing order, so that the warm-started sweep stays on the branch.
        mid = (x[:-1, None] + np.asarray([0.25, 0.5, 0.75]) * (x[1:] - x[:-1])[:, None]).ravel()
        f_mid = sweep(mid[:, None])
        fit = _fit_rates_along(fns, jnp.asarray(mid)[:, None])  # (points, m, 3): f, df/dq, d²f/dq²
        loop = _derivatives_along(closure, jnp.asarray(mid)[:, None], f_mid)
        err = jnp.max(jnp.abs(fit[:, :, 0] - f_mid), axis=0)
        derivative_error = jnp.stack([jnp.max(jnp.abs(fit[:, :, 1] - loop[1][:, :, 0]), axis=0),
                                      jnp.max(jnp.abs(fit[:, :, 2] - loop[2][:, :, 0, 0]), axis=0)], axis=1)
        return PremodelResult(functions=fns, grid=x, values=values, fit_error=err,
                              derivative_error=derivative_error)
    if nq == 2:
        if kind != "spline":
            raise LoopClosureError("premodel: two coordinates support kind='spline' only.")
        x0, x1 = axes
        # Boustrophedon sweep keeps consecutive points adjacent (one branch).
        pts = []
        for b, v in enumerate(x1):
            row = x0 if b % 2 == 0 else x0[::-1]
            pts.extend((u, v) for u in row)
        vals = np.asarray(sweep(np.asarray(pts)))
        values = np.empty((len(x0), len(x1), closure.m))
        n = 0
        for b in range(len(x1)):
            idx = range(len(x0)) if b % 2 == 0 else range(len(x0) - 1, -1, -1)
            for a in idx:
                values[a, b] = vals[n]
                n += 1
        fns = tuple(TensorSpline((0, 1), x0, x1, values[:, :, k]) for k in range(closure.m))
        m0, m1 = 0.5 * (x0[1:] + x0[:-1]), 0.5 * (x1[1:] + x1[:-1])
        mid = np.stack(np.meshgrid(m0, m1, indexing="ij"), -1).reshape(-1, 2)
        # Midpoints of the cells, solved warm-started from the nearest grid node.
        near = jnp.asarray(values[:-1, :-1].reshape(-1, closure.m))
        f_mid = jax.jit(jax.vmap(lambda qq, f0: closure.solve(qq, f0).f))(jnp.asarray(mid), near)
        fit = eqx.filter_jit(lambda fs, pts: jnp.stack([jax.vmap(fn)(pts) for fn in fs], axis=1))(
            fns, jnp.asarray(mid))
        err = jnp.max(jnp.abs(fit - f_mid), axis=0)
        return PremodelResult(functions=fns, grid=(x0, x1), values=jnp.asarray(values), fit_error=err)
    raise LoopClosureError(f"premodel supports one or two coordinates, the loop has {nq}.")


def premodeled(model: Model, lower: RealLike, upper: RealLike, step: float | Sequence[float],
               kind: str = "spline", order: int = 8, omega: float | None = None,
               periodic: bool = False) -> tuple[Model, Array]:
    """`model` with the implicit joint functions of every loop replaced by pre-modeled
    fits (`premodel` over ``[lower, upper]``), and the fit errors (n_joints,)
    (0 for joints that were not implicit).

    The pre-modeled model is an ordinary tree with explicit joint functions: no
    loop is solved during simulation (whether that is faster depends on the fit:
    a Fourier series costs 2K sines and cosines per function and state, a quintic
    spline a gather and three short polynomials).
    For a crank that turns fully (Andrews' squeezer) ``kind="fourier"`` over one
    revolution is exact to round-off at a modest order, and ``kind="quintic",
    periodic=True`` close to it (see the how-to on closed chains).

    **Arguments:**

    - `model`: a `Model` with loop closures.
    - `lower`, `upper`, `step`, `kind`, `order`, `omega`, `periodic`: as in
      `premodel`, applied to every loop of the model.

    **Returns:**

    `(model, fit_error)`: the pre-modeled `Model` and the fit errors (n_joints,),
    0 for joints that were not implicit, in the joints' units.
    """
    fit_error = np.zeros(len(model.joints))
    joints = list(model.joints)
    for closure, idx in _closures(model):
        res = premodel(closure, lower, upper, step, kind=kind, order=order, omega=omega, periodic=periodic)
        for k, i in enumerate(idx):
            joints[i] = eqx.tree_at(lambda j: j.function, joints[i], res.functions[k])
            fit_error[i] = float(res.fit_error[k])
    out = eqx.tree_at(lambda m: m.joints, model, tuple(joints))
    return out, jnp.asarray(fit_error)
