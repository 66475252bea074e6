"""Fitting muscle paths of points and wraps by functions of the coordinates: each muscle's
length and moment arms at sample states fitted by one polynomial of the coordinates it
depends on, of the lowest order that meets the tolerances (the fit OpenSim's
``PolynomialPathFitter`` makes, for Moco's fast paths)."""

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._functions import Coordinate
from .._model import Model
from ._function_path import FunctionBasedPath, MultivariatePolynomial, monomial_tables, monomials
from ._moment_arms import muscle_lengths_and_moment_arms, spans_coordinate
from ._muscle import Muscle
from ._paths import path_status


class FunctionPathFit(NamedTuple):
    """What [`jaxmb.fit_function_paths`][jaxmb.fit_function_paths] returns.

    - `model`: the model with each fitted muscle's path replaced by its
      [`jaxmb.FunctionBasedPath`][jaxmb.FunctionBasedPath].
    - `orders`: per muscle, the polynomial's order (0 for a muscle left as it was).
    - `length_rms`, `length_max`: per muscle, the RMS and largest error of the fitted
      length at the samples (m).
    - `moment_arm_rms`, `moment_arm_max`: the same for its moment arms (m or
      dimensionless), over the coordinates it depends on.
    - `samples`: per muscle, the number of sample states fitted (those where its path
      resolved).
    """

    model: Model
    orders: tuple[int, ...]
    length_rms: np.ndarray
    length_max: np.ndarray
    moment_arm_rms: np.ndarray
    moment_arm_max: np.ndarray
    samples: np.ndarray


def _design(x: np.ndarray, order: int):
    """Monomials (S, N) of the samples `x` (S, d) in OpenSim's order, and their derivatives
    (S, d, N): ``∂(x^e)/∂x_j = e_j x^(e - 1_j)``, gathered from the monomials themselves."""
    e, lower = monomial_tables(x.shape[1], order)
    values = np.asarray(monomials(jnp.asarray(x), x.shape[1], order))
    return values, e.T[None] * values[:, lower.T]


@eqx.filter_jit
def _samples(model: Model, q):
    """Lengths, moment arms and `path_status(...).ok` at the sample states."""
    def one(x):
        lengths, R = muscle_lengths_and_moment_arms(model, x)
        return lengths, R, path_status(model, x).ok

    return jax.vmap(one)(q)


def fit_function_paths(model: Model, q: Float[Array | np.ndarray, "S nq"], *, max_order: int = 6,
                       length_tolerance: float = 1e-3, moment_arm_tolerance: float = 1e-4) -> FunctionPathFit:
    """Fit every muscle's path of points of `model` by a polynomial of the coordinates it can
    depend on (a [`jaxmb.FunctionBasedPath`][jaxmb.FunctionBasedPath]); the paths of other
    forces (`model.forces`: ligaments) stay as they are.

    At the sample states `q`, each muscle's length ``L`` and moment arms ``R = -dL/dq``
    (from [`jaxmb.muscle_lengths_and_moment_arms`][jaxmb.muscle_lengths_and_moment_arms])
    are fitted together by least squares, ``min_a Σ_s (P_a(q_s) - L_s)² + |∇P_a(q_s) +
    R_s|²``, over the coordinates its length can depend on (from the model's structure,
    as `jaxmb.moment_arm_sweep` finds them), with the lowest order from 1 to `max_order`
    whose RMS errors meet both tolerances (else `max_order`). The moment arms of the fitted
    path are then ``-∇P`` exactly, so the fitted model stays conservative. A muscle's
    samples where its path failed ([`jaxmb.path_status`][jaxmb.path_status]: a wrap
    iteration gone astray, as OpenSim's can) are left out of its fit. Muscles already
    given as functions are kept as they are.

    A fitted path is smooth where the geometric one is not (a wrap engaging, a
    conditional point switching): check the errors returned, and sample the states
    your motions visit.

    **Arguments:**

    - `model`: a model with muscles.
    - `q`: `(S, nq)` sample states (rad or m), S at least a few times the number of
      monomials of the largest order used (``C(d + n, n)`` for d coordinates and order n).
    - `max_order`: the largest order tried.
    - `length_tolerance`, `moment_arm_tolerance`: the RMS errors an order must meet (m;
      OpenSim's PolynomialPathFitter's defaults).

    **Returns:** a [`jaxmb.FunctionPathFit`][jaxmb.FunctionPathFit].
    """
    q = np.asarray(q, dtype=float)
    if q.ndim != 2 or q.shape[1] != model.nq or not np.all(np.isfinite(q)):
        raise ValueError(f"fit_function_paths: q must be finite samples of shape (S, {model.nq}), got {q.shape}.")
    if max_order < 1:
        raise ValueError(f"fit_function_paths: max_order must be at least 1, got {max_order}.")
    lengths, R, ok = (np.asarray(x) for x in _samples(model, jnp.asarray(q)))
    muscles, orders = list(model.muscles), []
    n = len(muscles)
    errors = np.zeros((4, n))
    for k, muscle in enumerate(model.muscles):
        if muscle.path is not None:
            orders.append(0)
            continue
        J = [j for j in range(model.nq) if spans_coordinate(model, muscle, j)]
        if not J:
            raise ValueError(f"fit_function_paths: muscle {muscle.name!r} spans no coordinate; its length is constant.")
        keep = ok[:, k]  # the states where the path resolved (`path_status`)
        x, target = q[keep][:, J], np.concatenate([lengths[keep, k, None], -R[keep][:, J, k]], axis=1)  # (S, 1 + d)
        for order in range(1, max_order + 1):
            values, partial = _design(x, order)
            if values.shape[1] > target.size:
                raise ValueError(f"fit_function_paths: {x.shape[0]} sample states cannot fit muscle {muscle.name!r}'s "
                                 f"{values.shape[1]} coefficients of order {order}; give more samples or a lower "
                                 "max_order.")
            A = np.concatenate([values[:, None, :], partial], axis=1).reshape(-1, values.shape[1])
            a = np.linalg.lstsq(A, target.reshape(-1), rcond=None)[0]
            residual = (A @ a - target.reshape(-1)).reshape(target.shape)
            errors[:, k] = (np.sqrt(np.mean(residual[:, 0] ** 2)), np.abs(residual[:, 0]).max(),
                            np.sqrt(np.mean(residual[:, 1:] ** 2)), np.abs(residual[:, 1:]).max())
            if errors[0, k] <= length_tolerance and errors[2, k] <= moment_arm_tolerance:
                break
        orders.append(order)
        path = FunctionBasedPath([Coordinate(j) for j in J], MultivariatePolynomial(a, len(J), order))
        muscles[k] = Muscle(muscle.name, (), (), muscle.parameters, kind=muscle.kind, force_model=muscle.force_model,
                            activation_dynamics=muscle.activation_dynamics, min_control=muscle.min_control,
                            max_control=muscle.max_control, path=path)
    fitted = eqx.tree_at(lambda m: m.muscles, model, tuple(muscles))
    return FunctionPathFit(fitted, tuple(orders), *errors, ok.sum(axis=0))
