"""Parameter identification: the model parameters whose simulated motion, or any other
output of the model, best matches measurements in the least-squares sense,

    θ* = argmin_θ ½ ‖r(model(θ))‖²,

with θ array leaves of the model chosen by a `where` function (as ``eqx.tree_at``'s) and
``r`` the residuals a function of the model returns; `trajectory_residuals` builds the
usual one, the simulated coordinates at the samples' times minus the measured ones.

Two solvers:

- Levenberg-Marquardt (Moré 1978; ``optimistix.LevenbergMarquardt``): the residuals'
  Jacobian in θ by forward mode through the simulation (``diffrax.ForwardMode``, one
  tangent per parameter), a few dozen iterations to the tolerance. The choice for a
  handful of parameters and a sum of squares.
- any optax gradient transformation on ``½‖r‖²`` (Adam by default), the gradient by
  reverse mode through the simulation (diffrax's checkpointed adjoint), a fixed number of
  steps: for many parameters.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import optimistix as optx
from jaxtyping import Array, Float, Int

from ._checks import is_concrete, finite_tolerance, flag, nonfinite_rows, positive_count
from ._results import RESULTS
from ._simulate import simulate

__all__ = ["Identification", "identify", "trajectory_residuals"]

_LEVENBERG_MARQUARDT = "levenberg_marquardt"


class Identification(eqx.Module):
    """What [`jaxmb.identify`][jaxmb.identify] returns.

    - `model`: the model with the fitted parameters.
    - `parameters`: the fitted parameters, as `where(model)` selects them.
    - `loss`: ``½ ‖r‖²`` at the fitted parameters.
    - `history`: ``½ ‖r‖²`` before each optax step (``(steps,)``); empty for
      Levenberg-Marquardt.
    - `steps`: the iterations made.
    - `result`: [`jaxmb.RESULTS`][jaxmb.RESULTS]: ``successful``, or
      ``identification_failed`` (Levenberg-Marquardt did not reach its tolerance within
      `max_steps`, an optax fit ended above its initial loss, or the loss is not finite).
    """

    model: Any
    parameters: Any
    loss: Float[Array, ""]
    history: Float[Array, " steps"]
    steps: Int[Array, ""]
    result: RESULTS


def trajectory_residuals(ts: Float[Array | np.ndarray, " T"], q_measured: Float[Array | np.ndarray, "n nq"],
                         q0, qd0, *, weights=None, **simulate_kwargs) -> Callable[[Any], Float[Array, " m"]]:
    """The residuals of a measured motion: ``model -> w ⊙ (q_sim(t_k) - q_k)``, flattened,
    with ``q_sim`` from [`jaxmb.simulate`][jaxmb.simulate] over ``[ts[0], ts[-1]]`` from
    ``(q0, q0')``.

    **Arguments:**

    - `ts`: (T,) sample times, s, increasing; the simulation starts at ``ts[0]``.
    - `q_measured`: (T, nq) measured coordinates at `ts` (rad or m).
    - `q0`, `qd0`: the initial state (nq,) (its own parameters to fit, or fixed).
    - `weights`: (nq,) or (T, nq) weights ``w`` (default 1), e.g. 1/σ per coordinate.
    - `simulate_kwargs`: passed to `simulate` (``tau``, ``controller``, ``rtol``,
      ``atol``, ``solver``...). ``adjoint`` defaults to ``diffrax.ForwardMode()``, which
      Levenberg-Marquardt's forward-mode Jacobian needs; with an optax solver pass
      ``adjoint=diffrax.RecursiveCheckpointAdjoint()`` for reverse mode. ``controller``
      may also be a function ``model -> controller``, called with the model being fitted:
      a controller that holds the model (`jaxmb.control.MuscleExcitations`) then acts
      with the fitted parameters too.

    **Returns:** a function of the model, for [`jaxmb.identify`][jaxmb.identify].

    **Raises:** ``ValueError`` for `ts` not finite and strictly increasing, non-finite
    `q_measured` (named by sample), `weights` of another shape, negative or non-finite,
    and, when the residuals are first evaluated, `q_measured` with a column count other
    than the model's coordinates.
    """
    ts = jnp.asarray(ts)
    q_measured = jnp.asarray(q_measured)
    if ts.ndim != 1 or q_measured.ndim != 2 or q_measured.shape[0] != ts.shape[0]:
        raise ValueError(f"trajectory_residuals: q_measured must have shape (T, nq) with T = len(ts) = "
                         f"{ts.shape[0] if ts.ndim == 1 else ts.shape}, got {q_measured.shape}.")
    t = np.asarray(ts) if is_concrete(ts) else None
    if t is not None and not (t.size >= 2 and np.all(np.isfinite(t)) and np.all(np.diff(t) > 0)):
        raise ValueError("trajectory_residuals: ts must hold at least two finite sample times, strictly increasing "
                         f"(the simulation runs from ts[0] to ts[-1]); got {t}.")
    rows = nonfinite_rows(q_measured)
    if rows.size:
        raise ValueError(f"trajectory_residuals: q_measured is not finite at samples {rows.tolist()[:10]}: drop "
                         "those samples (from ts too) or fill the gaps; a weight of 0 does not cancel a NaN.")
    w = _weights(weights, q_measured)
    simulate_kwargs.setdefault("adjoint", diffrax.ForwardMode())

    controller = simulate_kwargs.pop("controller", None)

    def residuals(model):
        ctrl = controller(model) if callable(controller) and not isinstance(controller, eqx.Module) else controller
        sol = simulate(model, q0, qd0, ts[-1], t0=ts[0], ts=ts, controller=ctrl, **simulate_kwargs)
        if sol.q.shape != q_measured.shape:  # (T, nq) against (T, k): would broadcast silently
            raise ValueError(f"trajectory_residuals: q_measured has shape {q_measured.shape}, but the model "
                             f"simulates {sol.q.shape[1]} coordinates at {sol.q.shape[0]} times: give one column "
                             "per coordinate, in the model's coordinate order.")
        return jnp.ravel(w * (sol.q - q_measured))

    return residuals


def _weights(weights, q_measured):
    """The residuals' weights as an array of `q_measured`'s shape (T, nq) (1 by default), checked."""
    shape = q_measured.shape
    if weights is None:
        return jnp.ones_like(q_measured)
    w = jnp.asarray(weights)
    try:
        w = jnp.broadcast_to(w, shape)
    except ValueError:
        raise ValueError(f"trajectory_residuals: weights must have shape (nq,) or (T, nq) = {shape[1:]} or {shape}, "
                         f"got {w.shape}.") from None
    if is_concrete(w) and not np.all(np.isfinite(np.asarray(w)) & (np.asarray(w) >= 0)):
        raise ValueError("trajectory_residuals: weights must be finite and non-negative (0 leaves a sample out), "
                         f"got {np.asarray(weights)}.")
    return w


def identify(model, where: Callable[[Any], Any], residuals: Callable[[Any], Array], *,
             solver: str | optax.GradientTransformation = _LEVENBERG_MARQUARDT, max_steps: int | None = None,
             rtol: float = 1e-10, atol: float = 1e-10, positive: bool = False, throw: bool = True) -> Identification:
    """Fit parameters of `model` to measurements: minimise ``½ ‖r(model(θ))‖²`` over the
    arrays ``θ = where(model)`` (module docstring of `jaxmb._identify`).

    ```python
    residuals = mb.trajectory_residuals(ts, q_measured, q0, qd0, rtol=1e-10, atol=1e-10)
    fit = mb.identify(model, lambda m: (m.bodies[0].mass, m.bodies[1].mass), residuals, positive=True)
    fit.parameters, fit.loss, fit.result == mb.RESULTS.successful
    ```

    **Arguments:**

    - `model`: the model at the initial guess (any equinox module works).
    - `where`: ``model -> pytree of arrays``, the parameters to fit (as ``eqx.tree_at``'s
      `where`); every other leaf stays as it is.
    - `residuals`: ``model -> array``, the residuals ``r`` (any shape; weight them
      yourself, or use `trajectory_residuals`).
    - `solver`: ``"levenberg_marquardt"`` (default; needs forward mode through
      `residuals`: `trajectory_residuals` sets it) or an ``optax.GradientTransformation``
      (e.g. ``optax.adam(1e-2)``), which takes exactly `max_steps` steps.
    - `max_steps`: at most this many iterations (default 100 for Levenberg-Marquardt,
      1000 for optax).
    - `rtol`, `atol`: Levenberg-Marquardt's tolerances on the step and the loss
      (optimistix's Cauchy termination); the defaults are for float64, loosen them
      (e.g. 1e-5) for a float32 fit.
    - `positive`: fit ``log θ`` instead of ``θ``, so that masses, lengths or stiffnesses
      stay positive; the initial parameters must then be positive.
    - `throw`: raise (``eqx.EquinoxRuntimeError`` with the `RESULTS` message) when the fit
      fails; with False, check `Identification.result`. It concerns the fit: a simulation
      inside `residuals` that fails (parameters gone astray) raises with its own cause
      unless the residuals were built with ``trajectory_residuals(..., throw=False)``,
      whose failed runs make the loss non-finite (``identification_failed``).

    **Returns:** an [`jaxmb.Identification`][jaxmb.Identification].

    **Raises:** ``ValueError`` for parameters that are not floating-point arrays, a
    non-positive initial parameter with ``positive=True``, an unknown solver, a
    `max_steps` below 1, or a tolerance that is not a positive finite number the
    parameters' dtype resolves (float32: loosen them, or switch on float64).
    """
    positive = flag(positive, "identify: positive")
    theta0 = where(model)
    leaves = jax.tree.leaves(theta0)
    if not leaves or not all(isinstance(x, float) or jnp.issubdtype(getattr(x, "dtype", np.dtype(object)), jnp.floating)
                             for x in leaves):
        raise ValueError("identify: where(model) must select floating-point arrays of the model (the parameters "
                         f"to fit), got {jax.tree.map(lambda x: getattr(x, 'dtype', type(x)), theta0)}.")
    if positive and any(not np.all(np.asarray(x) > 0) for x in leaves if is_concrete(x)):
        raise ValueError("identify: positive=True fits log(theta): every initial parameter must be > 0.")
    if not (solver == _LEVENBERG_MARQUARDT or isinstance(solver, optax.GradientTransformation)):
        raise ValueError(f"identify: solver must be 'levenberg_marquardt' or an optax.GradientTransformation, "
                         f"got {solver!r}.")
    if max_steps is None:
        max_steps = 100 if solver == _LEVENBERG_MARQUARDT else 1000
    max_steps = positive_count(max_steps, "identify", "max_steps")
    dtype = jnp.result_type(*leaves)
    rtol, atol = (finite_tolerance(tol, "identify", label, dtype) for label, tol in (("rtol", rtol), ("atol", atol)))
    fit = _fit(model, where, residuals, solver, int(max_steps), float(rtol), float(atol), positive)
    if flag(throw, "identify: throw"):
        fit = eqx.tree_at(lambda f: f.loss, fit, fit.result.error_if(fit.loss, fit.result != RESULTS.successful))
    return fit


@eqx.filter_jit
def _fit(model, where, residuals, solver, max_steps, rtol, atol, positive):
    """`identify` after its checks, as one compiled program."""
    theta0 = jax.tree.map(jnp.asarray, where(model))
    y0 = jax.tree.map(jnp.log, theta0) if positive else theta0

    def model_at(y):
        return eqx.tree_at(where, model, jax.tree.map(jnp.exp, y) if positive else y)

    def loss(y):
        r = residuals(model_at(y))
        return 0.5 * jnp.sum(r * r)

    if solver == _LEVENBERG_MARQUARDT:
        sol = optx.least_squares(lambda y, _: residuals(model_at(y)), optx.LevenbergMarquardt(rtol=rtol, atol=atol),
                                 y0, max_steps=max_steps, throw=False, options=dict(jac="fwd"))
        y, steps, ok = sol.value, sol.stats["num_steps"], sol.result == optx.RESULTS.successful
        history = jnp.zeros((0,), jax.tree.leaves(y)[0].dtype)
    else:
        def step(carry, _):
            y, state = carry
            value, g = jax.value_and_grad(loss)(y)
            # optax's own arithmetic mixes Python floats and int32 step counts (Adam's bias
            # correction), which a user's strict dtype promotion would refuse.
            with jax.numpy_dtype_promotion("standard"):
                updates, state = solver.update(g, state, y)
            return (optax.apply_updates(y, updates), state), value

        (y, _), history = jax.lax.scan(step, (y0, solver.init(y0)), None, length=max_steps)
        steps, ok = jnp.asarray(max_steps), jnp.asarray(True)
    fitted = model_at(y)
    value = loss(y)
    ok = ok & jnp.isfinite(value)
    if history.shape[0]:  # optax: a fit that ends above its start diverged (a step size too large)
        ok = ok & (value <= history[0])
    return Identification(model=fitted, parameters=where(fitted), loss=value, history=history, steps=steps,
                          result=RESULTS.where(ok, RESULTS.successful, RESULTS.identification_failed))
