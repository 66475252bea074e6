"""Fitting paths of points and wraps (muscles' and ligaments') by functions of the
coordinates: each path's length and moment arms at sample states fitted by one polynomial
of the coordinates it depends on, of the lowest order that meets the tolerances (the fit
OpenSim's ``PolynomialPathFitter`` makes, for Moco's fast paths); and the states sampled
around a motion, as that fitter samples them."""

import functools
from collections.abc import Callable
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ._checks import is_count
from ._forces import Ligament
from ._functions import Coordinate
from ._model import Model
from ._muscles import FunctionBasedPath, MultivariatePolynomial, muscle_lengths_and_moment_arms, path_status
from ._muscles._function_path import monomial_tables, monomials
from ._muscles._sweep import spans_coordinate
from ._typing import RealLike


class FunctionPathFit(NamedTuple):
    """What [`jaxmb.fit_function_paths`][jaxmb.fit_function_paths] returns. The per-path
    entries are the model's muscles, then its ligaments (`names`).

    - `model`: the model with each fitted path replaced by its
      [`jaxmb.FunctionBasedPath`][jaxmb.FunctionBasedPath].
    - `orders`: per path, the polynomial's order (0 for a path left as it was).
    - `length_rms`, `length_max`: per path, the RMS and largest error of the fitted
      length at the samples (m).
    - `moment_arm_rms`, `moment_arm_max`: the same for its moment arms (m or
      dimensionless), over the coordinates it depends on.
    - `samples`: per path, the number of sample states fitted (those where it resolved,
      less the outliers).
    - `names`: per path, its muscle's or ligament's name.
    - `outliers`: per path, the number of samples left out as outliers
      (`fit_function_paths`' `reject_outliers`).
    """

    model: Model
    orders: tuple[int, ...]
    length_rms: np.ndarray
    length_max: np.ndarray
    moment_arm_rms: np.ndarray
    moment_arm_max: np.ndarray
    samples: np.ndarray
    names: tuple[str, ...]
    outliers: np.ndarray


def _design(x: np.ndarray, order: int):
    """Monomials (S, N) of the samples `x` (S, d) in OpenSim's order, and their derivatives
    (S, d, N): ``∂(x^e)/∂x_j = e_j x^(e - 1_j)``, gathered from the monomials themselves."""
    e, lower = monomial_tables(x.shape[1], order)
    values = np.asarray(monomials(jnp.asarray(x), x.shape[1], order))
    return values, e.T[None] * values[:, lower.T]


@eqx.filter_jit
@functools.partial(jax.vmap, in_axes=(None, 0))
def _at_samples(model: Model, x):
    return *muscle_lengths_and_moment_arms(model, x), path_status(model, x).ok


def _samples(model: Model, q: np.ndarray, progress, chunk: int = 256):
    """Lengths, moment arms and `path_status(...).ok` at the sample states, `chunk` states
    at a time through one program (the last chunk padded with its last state),
    calling ``progress(done, S)`` after each."""
    out = []
    for start in range(0, q.shape[0], chunk):
        part = q[start:start + chunk]
        padded = jnp.asarray(np.concatenate([part, np.repeat(part[-1:], chunk - part.shape[0], axis=0)]))
        out.append([np.asarray(x)[:part.shape[0]] for x in _at_samples(model, padded)])
        if progress is not None:
            progress(start + part.shape[0], q.shape[0])
    return [np.concatenate(x) for x in zip(*out)]


def sample_around_motion(model: Model, q: RealLike, *, samples_per_frame: int = 25,
                         bounds: RealLike = (-np.pi / 18, np.pi / 18), seed: int = 0) -> Float[np.ndarray, "S nq"]:
    """Sample states around the frames `q` of a motion, for
    [`jaxmb.fit_function_paths`][jaxmb.fit_function_paths], as OpenSim's
    ``PolynomialPathFitter`` samples around its reference coordinate values.

    Per frame ``q_f``: the frame itself, then `samples_per_frame` states ``q_f + δ``, the
    offsets ``δ`` a Latin hypercube design over the `bounds` (McKay, Beckman and Conover
    1979: each coordinate's interval cut into `samples_per_frame` equal strata, one
    uniform sample in each, the strata paired between coordinates at random), then
    clipped to the model's ranges ``[q_lower, q_upper]`` (OpenSim clips its clamped
    coordinates).

    **Arguments:**

    - `model`: the model (its `nq`, `q_lower` and `q_upper`).
    - `q`: `(F, nq)` frames of the motion (rad or m).
    - `samples_per_frame`: the number of states sampled around each frame.
    - `bounds`: the offsets' interval ``(lo, hi)`` for every coordinate, or one row per
      coordinate `(nq, 2)`, in the coordinates' units. Default ±10° (OpenSim's default
      global bounds, which OpenSim applies to translations too, as 0.1745 m: give
      per-coordinate bounds for a model with translational coordinates).
    - `seed`: the random generator's seed (NumPy's ``default_rng``).

    **Returns:** `(F (1 + samples_per_frame), nq)` states, each frame followed by its
    samples.

    **Raises:** `ValueError` for frames of the wrong shape or not finite, fewer than one
    sample per frame, or bounds with ``lo >= hi``.
    """
    q = np.asarray(q, dtype=float)
    if q.ndim != 2 or q.shape[1] != model.nq or not q.shape[0] or not np.all(np.isfinite(q)):
        raise ValueError(f"sample_around_motion: q must be finite frames of shape (F, {model.nq}), got {q.shape}.")
    if int(samples_per_frame) < 1:
        raise ValueError(f"sample_around_motion: samples_per_frame must be at least 1, got {samples_per_frame}.")
    b = np.broadcast_to(np.asarray(bounds, dtype=float), (model.nq, 2)) if np.ndim(bounds) == 1 else \
        np.asarray(bounds, dtype=float)
    if b.shape != (model.nq, 2) or not np.all(np.isfinite(b)) or np.any(b[:, 0] >= b[:, 1]):
        raise ValueError(f"sample_around_motion: bounds must be finite (lo, hi) with lo < hi, for every coordinate "
                         f"or one row per coordinate (shape ({model.nq}, 2)); got {np.asarray(bounds).tolist()}.")
    n, (frames, nq) = int(samples_per_frame), q.shape
    rng = np.random.default_rng(seed)
    strata = rng.permuted(np.broadcast_to(np.arange(n)[None, :, None], (frames, n, nq)), axis=1)
    u = (strata + rng.random((frames, n, nq))) / n  # one sample in each stratum of [0, 1)
    samples = q[:, None, :] + b[:, 0] + (b[:, 1] - b[:, 0]) * u
    samples = np.clip(samples, np.asarray(model.q_lower), np.asarray(model.q_upper))
    return np.concatenate([q[:, None, :], samples], axis=1).reshape(-1, nq)


def fit_function_paths(model: Model, q: Float[Array | np.ndarray, "S nq"], *, max_order: int = 6,
                       length_tolerance: float = 1e-3, moment_arm_tolerance: float = 1e-4,
                       reject_outliers: bool = True,
                       progress: Callable[[int, int], None] | None = None) -> FunctionPathFit:
    """Fit every path of points of `model`, its muscles' and its ligaments' (as OpenSim's
    ``PolynomialPathFitter`` fits every path of a model), by a polynomial of the coordinates
    it can depend on (a [`jaxmb.FunctionBasedPath`][jaxmb.FunctionBasedPath]).

    At the sample states `q`, each path's length ``L`` and moment arms ``R = -dL/dq``
    (from [`jaxmb.muscle_lengths_and_moment_arms`][jaxmb.muscle_lengths_and_moment_arms])
    are fitted together by least squares, ``min_a Σ_s (P_a(q_s) - L_s)² + |∇P_a(q_s) +
    R_s|²``, over the coordinates its length can depend on (from the model's structure,
    as `jaxmb.moment_arm_sweep` finds them), with the lowest order from 1 to `max_order`
    whose RMS errors meet both tolerances (else `max_order`). The moment arms of the fitted
    path are then ``-∇P`` exactly, so the fitted model stays conservative. A path's
    samples where it failed ([`jaxmb.path_status`][jaxmb.path_status]: a wrap iteration
    gone astray, as OpenSim's can) are left out of its fit, and with `reject_outliers`
    so are the samples whose length the fit misses by more than ten robust standard
    deviations of its residuals (1.4826 times their median) and ten times
    `length_tolerance`, refitting up to three times: geometry that fails where
    `path_status` cannot tell (an ellipsoid wrap's construction going the long way
    round, adding tens of centimetres, as OpenSim's does at the same states) would
    otherwise bend the polynomial everywhere. Paths already given as functions are kept
    as they are.

    A fitted path is smooth where the geometric one is not (a wrap engaging, a
    conditional point switching): check the errors returned, and sample the states
    your motions visit ([`jaxmb.sample_around_motion`][jaxmb.sample_around_motion]).

    **Arguments:**

    - `model`: a model with muscles or ligaments.
    - `q`: `(S, nq)` sample states (rad or m), S at least a few times the number of
      monomials of the largest order used (``C(d + n, n)`` for d coordinates and order n).
    - `max_order`: the largest order tried.
    - `length_tolerance`, `moment_arm_tolerance`: the RMS errors an order must meet (m,
      positive; OpenSim's PolynomialPathFitter's defaults).
    - `reject_outliers`: leave out the samples the fit misses by far (above); False fits
      every sample `path_status` passes, as OpenSim's fitter fits every sample.
    - `progress`: called as ``progress(done, S)`` as the geometry is evaluated at the
      samples (256 states at a time), or None.

    **Returns:** a [`jaxmb.FunctionPathFit`][jaxmb.FunctionPathFit].

    **Raises:** `ValueError` for a model without paths, samples of the wrong shape or not
    finite, a `max_order` below 1, tolerances that are not positive, a path that spans no coordinate, or
    samples too few or too alike to over-determine an order's coefficients.
    """
    q = np.asarray(q, dtype=float)
    if q.ndim != 2 or q.shape[1] != model.nq or not np.all(np.isfinite(q)):
        raise ValueError(f"fit_function_paths: q must be finite samples of shape (S, {model.nq}), got {q.shape}.")
    if not is_count(max_order, 1):
        raise ValueError(f"fit_function_paths: max_order must be an integer of at least 1, got {max_order!r}.")
    for name, tol in (("length_tolerance", length_tolerance), ("moment_arm_tolerance", moment_arm_tolerance)):
        if not (isinstance(tol, (int, float, np.integer, np.floating)) and np.isfinite(tol) and tol > 0):
            raise ValueError(f"fit_function_paths: {name} must be a positive number of metres, got {tol!r}.")
    ligaments = [i for i, f in enumerate(model.forces) if isinstance(f, Ligament)]
    paths = list(model.muscles) + [model.forces[i].path for i in ligaments]
    if not paths:  # a ZeroDivisionError further on
        raise ValueError(f"fit_function_paths: model {model.name!r} has no muscles or ligaments, so no paths to fit.")
    every = eqx.tree_at(lambda m: m.muscles, model, tuple(paths))  # every path, evaluated together
    lengths, R, ok = _samples(every, q, progress)
    orders = []
    errors = np.zeros((4, len(paths)))
    used = ok.sum(axis=0)
    for k, muscle in enumerate(every.muscles):
        if muscle.path is not None:
            orders.append(0)
            continue
        J = [j for j in range(model.nq) if spans_coordinate(every, muscle, j)]
        if not J:
            raise ValueError(f"fit_function_paths: path {muscle.name!r} spans no coordinate; its length is constant.")
        keep = ok[:, k].copy()  # the states where the path resolved (`path_status`)
        if not keep.any():
            raise ValueError(f"fit_function_paths: path {muscle.name!r} failed at every sample state "
                             "(jaxmb.path_status: its wraps gone astray or its length implausible); sample "
                             "states where its geometry resolves, or check its wrap objects.")
        fit = _fit_one(muscle.name, q[:, J], lengths[:, k], -R[:, J, k], keep, max_order, length_tolerance,
                       moment_arm_tolerance)
        for _ in range(_OUTLIER_ROUNDS if reject_outliers else 0):
            residual = np.abs(fit[3])
            bound = max(_OUTLIER_SIGMAS * 1.4826 * np.median(residual), _OUTLIER_FLOOR * length_tolerance)
            outliers = residual > bound
            if not outliers.any():
                break
            keep[np.flatnonzero(keep)[outliers]] = False
            fit = _fit_one(muscle.name, q[:, J], lengths[:, k], -R[:, J, k], keep, max_order, length_tolerance,
                           moment_arm_tolerance)
        order, a, errors[:, k], _ = fit
        used[k] = keep.sum()
        orders.append(order)
        path = FunctionBasedPath([Coordinate(j) for j in J], MultivariatePolynomial(a, len(J), order))
        paths[k] = muscle.with_path(path)
    n = len(model.muscles)
    forces = list(model.forces)
    for j, i in enumerate(ligaments):
        forces[i] = forces[i].with_path(paths[n + j].path)
    fitted = eqx.tree_at(lambda m: (m.muscles, m.forces), model, (tuple(paths[:n]), tuple(forces)))
    return FunctionPathFit(fitted, tuple(orders), *errors, used, tuple(m.name for m in paths), ok.sum(axis=0) - used)


# Outliers: a sample whose length residual exceeds this many robust standard deviations
# (1.4826 times the median absolute residual) and ten times the length tolerance (1 cm by
# default: what a polynomial misses at the edge of a sampled region stays in); at most
# this many rounds of leaving them out and fitting again.
_OUTLIER_SIGMAS, _OUTLIER_FLOOR, _OUTLIER_ROUNDS = 10.0, 10.0, 3


def _fit_one(name, x, length, slope, keep, max_order, length_tolerance, moment_arm_tolerance):
    """``(order, coefficients, (RMS, largest) length and moment-arm errors, length
    residuals at the kept samples)`` of the lowest order from 1 to `max_order` whose fit
    of the kept samples meets both tolerances (else `max_order`): least squares on the
    lengths (S,) and their slopes ``dL/dx`` (S, d) at `x` (S, d) together."""
    target = np.concatenate([length[keep, None], slope[keep]], axis=1)  # (S, 1 + d)
    for order in range(1, max_order + 1):
        # Monomials at every sample, then the kept ones: one compiled monomial table
        # per (dimension, order), whatever each path keeps.
        values, partial = (a[keep] for a in _design(x, order))
        A = np.concatenate([values[:, None, :], partial], axis=1).reshape(-1, values.shape[1])
        # Lengths and slopes must over-determine the coefficients: an exactly determined fit
        # (one state for a line in two coordinates, the same state repeated) has no
        # residual and reported itself perfect, whatever the path does elsewhere.
        # (The rank comes with the least-squares solve: no second factorisation.)
        a, _, rank, _ = np.linalg.lstsq(A, target.reshape(-1), rcond=None)
        distinct = len(np.unique(x[keep], axis=0))
        if distinct * target.shape[1] <= A.shape[1] or rank < A.shape[1]:
            raise ValueError(f"fit_function_paths: {target.shape[0]} sample states ({distinct} distinct) cannot "
                             f"determine muscle {name!r}'s {values.shape[1]} coefficients of order {order} with "
                             "errors to spare; give more samples, spread over the coordinates it spans, or a "
                             "lower max_order.")
        residual = (A @ a - target.reshape(-1)).reshape(target.shape)
        errors = (np.sqrt(np.mean(residual[:, 0] ** 2)), np.abs(residual[:, 0]).max(),
                  np.sqrt(np.mean(residual[:, 1:] ** 2)), np.abs(residual[:, 1:]).max())
        if errors[0] <= length_tolerance and errors[2] <= moment_arm_tolerance:
            break
    return order, a, errors, residual[:, 0]
