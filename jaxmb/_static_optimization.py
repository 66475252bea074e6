"""Static optimization over a whole motion, as OpenSim 4.6's StaticOptimization analysis.

At every frame the muscles' activations ``a`` and the actuators' controls ``u`` minimise
``Σ w_i |a_i|^p + Σ w_j |u_j|^p`` subject to the equations of motion at the motion's
``q, q', q''`` (Anderson and Pandy 2001; Crowninshield and Brand 1981):

    R(q) (a ⊙ F_A(q, q') + F_P(q, q')) + Q_act(q) u = τ_ID(q, q', q''),   lo ≤ (a, u) ≤ hi,

with ``R = -dL/dq`` the moment arms (or the frozen path's, `moment_arms`), ``F_A`` the active fibre force along the tendon at
full activation with a rigid tendon (force-length at the fibre length, force-velocity at
the fibre velocity the path's lengthening speed gives: OpenSim's
``calcInextensibleTendonActiveFiberForce`` for Thelen's muscle; OpenSim's for every model
with `active_force`), ``F_P`` the passive fibre force along the tendon (0 unless
asked: OpenSim 4.6 overrides the whole muscle force by ``a F_A``), ``Q_act`` the
generalized force of each actuator per unit control and ``τ_ID`` the inverse dynamics of
the motion with its external loads ([`jaxmb.inverse_dynamics_motion`][jaxmb.inverse_dynamics_motion]).

The constraint is affine in ``x = (a, u)``: ``B x = b``. The problem is solved through its
dual: for multipliers ``λ`` the box-constrained minimiser of the Lagrangian is separable and
explicit, ``x_i(λ) = clip(sign(s_i) (|s_i| / (p w_i))^(1/(p-1)), lo_i, hi_i)`` with
``s = Bᵀ λ``, and the multipliers solve ``B x(λ) = b``, a semismooth system of ``nq``
equations solved by Newton's method with a line search on the (concave) dual function. For
``p = 2`` the dual is piecewise quadratic and Newton ends on the exact active set: the
torque balance holds to round-off; for ``p ≠ 2`` the Newton matrix is regularised with each
variable's own curvature and the line search takes the best of its steps (`_newton_factor`,
`_solve_frame`). Frames are batched with `vmap`; derivatives come from
the implicit-function theorem (one differentiable Newton step at the solution).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from ._checks import is_concrete, finite_tolerance, flag, positive_count
from ._errors import ModelError
from ._model_checks import require_mass
from ._forces._base import AbstractActuator, actuators, force_set_forces, unit_actuation_matrix
from ._motion import _external_generalized_force, _spec, check_load_times, ExternalForce, motion_coordinates
from ._dynamics import inverse_dynamics
from ._muscles import ACTIVE_FORCES, check_path_force_route, muscle_lengths_and_moment_arms, rigid_tendon_forces
from ._results import RESULTS
from ._signal import opensim_states_operators
from ._static_optimization_matching import MATCHING, matching_problem
from ._static_optimization_optax import solve_frames_optax
from ._static_optimization_compliant import compliant_frames

__all__ = ["StaticOptimization", "static_optimization"]

_LINE_SEARCH = 2.0 ** -np.arange(31)  # step lengths tried at once (vectorised backtracking)


class StaticOptimization(eqx.Module):
    """Static optimization of a motion: what [`jaxmb.static_optimization`][jaxmb.static_optimization] returns.

    - `time`: the solved frames (k,), s.
    - `activations`: (k, n_muscles), in `muscle_names` order.
    - `muscle_forces`: (k, n_muscles) tendon forces, N (``a F_A + F_P``; with
      ``tendon="compliant"`` the equilibrium tendon force ``F_T(a)``).
    - `controls`: (k, n_actuators) actuator controls, in `actuator_names` order.
    - `actuator_forces`: (k, n_actuators) ``optimal_force · u`` (N or N m).
    - `q`, `qd`, `qdd`: the smoothed kinematics (k, nq).
    - `generalized_forces`: (k, nq) ``τ_ID``: the inverse dynamics with the external loads and
      the model's passive forces (``model.forces``) applied, what the muscles and actuators balance.
    - `constraint_matrix`: (k, nq, n_muscles + n_actuators) ``B``: the generalized force of
      each muscle at full activation (``R F_A``) and of each actuator per unit control.
    - `constraint_target`: (k, nq) ``τ_ID - R F_P``, what ``B (a, u)`` balances.
    - `torque_residual`: (k,) ``max |B x - τ_ID|`` (N m or N): the torque balance (what is
      left of it where `residual_weight` penalises it).
    - `kkt_residual`: (k,) the natural residual of the other optimality conditions,
      ``max_i |x_i - clip(x_i - ∂L/∂x_i, lo_i, hi_i)|`` with ``L`` the Lagrangian (stationarity,
      bounds and complementarity; 0 at a KKT point), of the penalised problem with `residual_weight`.
    - `iterations`: (k,) Newton steps taken (optax steps with ``solver="optax"``, linearisations with
      ``tendon="compliant"``).
    - `result`: (k,) a [`jaxmb.RESULTS`][jaxmb.RESULTS] code per frame.
    - `muscle_names`, `actuator_names`: the columns' names.
    """

    time: Float[Array, " k"]
    activations: Float[Array, "k n_muscles"]
    muscle_forces: Float[Array, "k n_muscles"]
    controls: Float[Array, "k n_actuators"]
    actuator_forces: Float[Array, "k n_actuators"]
    q: Float[Array, "k nq"]
    qd: Float[Array, "k nq"]
    qdd: Float[Array, "k nq"]
    generalized_forces: Float[Array, "k nq"]
    constraint_matrix: Float[Array, "k nq n"]
    constraint_target: Float[Array, "k nq"]
    torque_residual: Float[Array, " k"]
    kkt_residual: Float[Array, " k"]
    iterations: Int[Array, " k"]
    result: RESULTS
    muscle_names: tuple[str, ...] = eqx.field(static=True)
    actuator_names: tuple[str, ...] = eqx.field(static=True)


# ---- the per-frame problem ----------------------------------------------------------------


def _primal(s, w, lo, hi, p):
    """The box-constrained minimiser of ``w |x|^p - s x`` and, where it is free, its derivative."""
    if p == 2.0:
        x_free = s / (2.0 * w)
        dx = 1.0 / (2.0 * w)
    else:
        mag = jnp.abs(s) / (p * w)
        tiny = jnp.finfo(s.dtype).tiny ** 0.25
        safe = jnp.maximum(mag, tiny)
        x_free = jnp.sign(s) * jnp.where(mag > tiny, safe ** (1.0 / (p - 1.0)), 0.0)
        dx = safe ** (1.0 / (p - 1.0) - 1.0) / ((p - 1.0) * p * w)
    x = jnp.clip(x_free, lo, hi)
    free = (x_free > lo) & (x_free < hi)
    return x, jnp.where(free, dx, 0.0)


def _cost(x, w, p):
    """``Σ w |x|^p`` (a product, not a power, for ``p = 2``)."""
    return jnp.sum(w * (x * x if p == 2.0 else jnp.abs(x) ** p), axis=-1)


def _newton_factor(B, d, w, x, p):
    """Lower Cholesky factor of ``B diag(d) Bᵀ`` (the dual's negated Hessian) plus ``1e-9`` of the
    value it would have with every variable free at its current ``x``, formed as one product
    ``B diag(d + 1e-9 c) Bᵀ``: positive definite while a variable sits at a bound on every row,
    at the price of Newton steps shorter by a part in 10⁹.

    ``c_i = ∂x_i/∂s_i`` of the free minimiser at ``x_i``, ``|x_i|^(2-p) / (p (p-1) w_i)``, no less
    than ``1/(2 w_i)`` (its value for ``p = 2``, and ``|x_i|`` floored at ``√eps`` where it
    diverges, ``p > 2`` at ``x_i = 0``). Measured against the curvature the dual takes once the
    bound is left, the term makes a Newton step along a row whose variables all sit at bounds
    about 10⁹ times too long, which the line search's shortest step (``2⁻³⁰``) undoes; a fixed
    ``1/(2 w_i)`` would fall short of that curvature for ``p > 2`` (``1/(6 w_i lo_i)`` at
    ``lo_i = 0.01`` for ``p = 3``, 33 times more), leaving the line search without an ascent step
    and the frame stalled."""
    if p == 2.0:
        c = 0.5 / w
    else:
        ax = jnp.maximum(jnp.abs(x), jnp.sqrt(jnp.finfo(x.dtype).eps))
        c = jnp.maximum(0.5 / w, ax ** (2.0 - p) / (p * (p - 1.0) * w))
    return jnp.linalg.cholesky((B * (d + 1e-9 * c)[None, :]) @ B.T)


def _solve_frame(B, b, w, lo, hi, p, tol, max_steps):
    """Multipliers of one frame's problem: ``(λ, steps, converged, factor)`` (no derivatives),
    with ``factor`` the Cholesky factor of the Newton matrix at ``λ``.

    The loop carries ``s = Bᵀλ``, ``x(λ)`` and the residual ``r = B x - b``; the line search
    needs no product with ``B``: along ``λ + tΔ`` the dual is
    ``g = Σ w |x|^p - sᵀx + λᵀb`` (as ``λᵀB x = sᵀx``), elementwise in ``s + t BᵀΔ``."""
    # Start from the multipliers of the problem without bounds (all variables free, p = 2).
    lam0 = jnp.linalg.solve((B * (0.5 / w)[None, :]) @ B.T, b)
    b_scale = jnp.maximum(1.0, jnp.max(jnp.abs(b)))
    lengths = jnp.asarray(_LINE_SEARCH, B.dtype)

    def at(lam):
        s = B.T @ lam
        x, d = _primal(s, w, lo, hi, p)
        return s, x, B @ x - b, _newton_factor(B, d, w, x, p)

    def cond(carry):
        _, _, _, r, _, k = carry
        return (k < max_steps) & (jnp.max(jnp.abs(r)) > tol * b_scale)

    def body(carry):
        lam, s, x, r, factor, k = carry
        step = jax.scipy.linalg.cho_solve((factor, True), -r)
        ds = B.T @ step
        trial = s[None, :] + lengths[:, None] * ds[None, :]
        xt, _ = _primal(trial, w[None, :], lo[None, :], hi[None, :], p)
        # The dual along the line, less the common λᵀb.
        values = _cost(xt, w[None, :], p) - jnp.sum(trial * xt, axis=1) + lengths * (step @ b)
        values = jnp.where(jnp.isfinite(values), values, -jnp.inf)
        g0 = _cost(x, w, p) - s @ x
        slack = 1e-13 * (1.0 + jnp.abs(g0 + lam @ b))
        if p == 2.0:
            # The longest step that does not lower the dual (to round-off), else the best one.
            ascent = values >= g0 - slack
            t = lengths[jnp.where(jnp.any(ascent), jnp.argmax(ascent), jnp.argmax(values))]
        else:
            # The longest of the best steps (to round-off). For p ≠ 2 a variable free on both
            # sides of 0 (a reserve) has x ∝ sign(s)|s|^(1/(p-1)), whose slope is unbounded
            # (p > 2) or zero (p < 2) at s = 0: a full Newton step across it can still raise the
            # dual yet land as far on the other side (Newton's 2-cycle on sign(s)√|s|), the
            # residual then shrinking by a few percent a step.
            t = lengths[jnp.argmax(values >= jnp.max(values) - slack)]
        lam = lam + t * step
        return (lam, *at(lam), k + 1)

    lam, _, _, r, factor, steps = jax.lax.while_loop(cond, body, (lam0, *at(lam0), jnp.asarray(0)))
    return lam, steps, jnp.max(jnp.abs(r)) <= tol * b_scale, factor


def _frame(B, b, w, lo, hi, p, tol, max_steps):
    """One frame: ``(x, torque residual, kkt residual, steps, converged)``, differentiable in
    ``(B, b, w, lo, hi)`` by the implicit-function theorem."""
    lam, steps, ok, factor = _solve_frame(*jax.lax.stop_gradient((B, b, w, lo, hi)), p, tol, max_steps)
    # One Newton step at the solution: its value is λ (to round-off) and its derivative
    # -J⁻¹ ∂r/∂θ is the implicit-function theorem's for r(λ, θ) = B x(λ) - b = 0 (J, the
    # Newton matrix at λ, is the loop's last factor: a constant).
    x_at, _ = _primal(B.T @ lam, w, lo, hi, p)
    lam = lam - jax.scipy.linalg.cho_solve((factor, True), B @ x_at - b)
    s = B.T @ lam
    x, _ = _primal(s, w, lo, hi, p)
    balance = jnp.max(jnp.abs(B @ x - b))
    # The natural residual of stationarity and the bounds, |x - clip(x - ∇_x L, lo, hi)|, with
    # ∇_x L = p w |x|^(p-1) sign(x) - Bᵀλ: zero exactly at a KKT point.
    xs, ss, ws, los, his = jax.lax.stop_gradient((x, s, w, lo, hi))  # a diagnostic, not differentiated
    grad = p * ws * jnp.sign(xs) * jnp.abs(xs) ** (p - 1.0) - ss
    natural = jnp.max(jnp.abs(xs - jnp.clip(xs - grad, los, his)))
    return x, balance, natural, steps, ok


# ---- the motion ---------------------------------------------------------------------------


def _bounds(model, extra, dtype):
    """Lower and upper bounds of ``(a, u)``: muscles and actuators their
    ``[min_control, max_control]``, as OpenSim's StaticOptimization
    ([`jaxmb.Muscle`][jaxmb.Muscle] gives a muscle's defaults)."""
    lo, hi = [], []
    for m in model.muscles:
        lo.append(jnp.asarray(m.min_control, dtype))
        hi.append(jnp.asarray(m.max_control, dtype))
    for a in extra:
        lo.append(jnp.asarray(a.min_control, dtype))
        hi.append(jnp.asarray(a.max_control, dtype))
    return jnp.stack(lo), jnp.stack(hi)


def _frame_torque(model, specs, qi, qdi, qddi, si):
    """One frame's ``τ_ID``: inverse dynamics less the external loads and the ForceSet's
    passive elements (its actuators at zero control)."""
    tau = inverse_dynamics(model, qi, qdi, qddi)
    if specs:
        tau = tau - _external_generalized_force(model, specs, qi, si)
    if model.forces:
        tau = tau - force_set_forces(model, qi, qdi)
    return tau


@eqx.filter_jit
def _problems(model, extra, specs, q, qd, qdd, samples, passive, method, active_force):
    """Per frame: ``τ_ID``, the constraint matrix ``B`` (nq, n), its right side
    ``τ_ID - R F_P`` and the muscles' ``F_A``, ``F_P`` (vmapped over the frames)."""
    n_muscles = len(model.muscles)

    def one(qi, qdi, qddi, si):
        tau = _frame_torque(model, specs, qi, qdi, qddi, si)
        columns = []
        f_active = f_passive = jnp.zeros((0,), qi.dtype)
        target = tau
        if n_muscles:
            lengths, R = muscle_lengths_and_moment_arms(model, qi, method=method)
            speeds = -R.T @ qdi
            f_active, f_passive = rigid_tendon_forces(model, lengths, speeds, active_force)
            f_passive = f_passive if passive else jnp.zeros_like(f_active)
            columns.append(R * f_active[None, :])
            target = tau - R @ f_passive
        if extra:
            columns.append(unit_actuation_matrix(model, extra, qi, qdi))
        return tau, jnp.concatenate(columns, axis=1), target, f_active, f_passive

    return jax.vmap(one)(q, qd, qdd, samples)


@eqx.filter_jit
def _solve_frames(B, target, weights, lo, hi, p, tol, max_steps):
    """`_frame` over the frames (vmapped)."""
    return jax.vmap(lambda Bi, bi: _frame(Bi, bi, weights, lo, hi, p, tol, max_steps))(B, target)


def static_optimization(model, time: Float[np.ndarray, " n"], q: Float[Array | np.ndarray, "n nq"], *,
                        lowpass_hz: float | None = None, time_range: tuple[float, float] | None = None,
                        external_loads=(), actuators_extra=(), exponent: float = 2.0, weights=None,
                        passive_forces: bool = False, use_model_actuators: bool = True,
                        tolerance: float | None = None, max_steps: int | None = None, solver: str = "newton",
                        matching: str = "moments", residual_weight: float | None = None,
                        tendon: str = "rigid", moment_arms: str = "closed_form",
                        active_force: str = "along_tendon") -> StaticOptimization:
    """Muscle activations and actuator controls over a whole motion, as OpenSim 4.6's Static
    Optimization (Anderson and Pandy 2001; Crowninshield and Brand 1981).

    At every frame, minimise ``Σ w_i |a_i|^p + Σ w_j |u_j|^p`` over activations ``a`` and
    actuator controls ``u`` within their bounds subject to
    ``R (a ⊙ F_A + F_P) + Q_act u = τ_ID`` (the module docstring of
    `jaxmb._static_optimization` gives each term). OpenSim matches accelerations,
    ``M⁻¹(R F + Q_act u - τ_ID) = 0``; with ``M`` invertible that is the same constraint, so
    a frame where it can be met has the same solution. The kinematics come from the samples
    as in OpenSim 4.6's AnalyzeTool: optional low-pass filter with padding, interpolating
    quintic GCV splines for ``q, q'``, and ``q''`` the derivative of the quintic spline
    through the speeds' samples (OpenSim's state derivatives).

    **Arguments:**

    - `model`: the [`jaxmb.Model`][jaxmb.Model]; every muscle needs a force model (its
      rigid-tendon active force is used, whatever its tendon).
    - `time`: sample times (n,), s, strictly increasing; concrete (NumPy).
    - `q`: coordinates (n, nq), model order, rad and m.
    - `lowpass_hz`, `time_range`, `external_loads`: as
      [`jaxmb.inverse_dynamics_motion`][jaxmb.inverse_dynamics_motion].
    - `actuators_extra`: further [`jaxmb.AbstractActuator`][jaxmb.AbstractActuator]
      (reserves and residuals; [`jaxmb.io.read_actuators`][jaxmb.io.read_actuators] reads
      OpenSim's file), after the model's own.
    - `exponent`: ``p > 1`` (OpenSim's ``activation_exponent``, 2 by default).
    - `weights`: ``(n_muscles + n_actuators,)`` positive weights ``w`` (default 1, as OpenSim).
    - `passive_forces`: True to add the muscles' passive fibre forces (OpenSim 4.6 does not).
    - `use_model_actuators`: include the model's own actuators (``model.forces``) as unknowns
      (default True, as OpenSim's ``use_model_force_set`` true). OpenSim's
      ``use_model_force_set`` false replaces the muscles and actuators by one unbounded
      CoordinateActuator per coordinate, whose solution is the inverse dynamics itself
      ([`jaxmb.inverse_dynamics_motion`][jaxmb.inverse_dynamics_motion]).
    - `tolerance`: the torque balance to reach, relative to ``max(1, max |τ|)`` (default
      1e-11 in float64, 1e-4 in float32).
    - `max_steps`: Newton steps per frame at most (default 100), or optax steps with
      ``solver="optax"`` (default 20000).
    - `solver`: ``"newton"`` (default) solves each frame's dual by a semismooth Newton
      method, the frames batched with `vmap`; ``"optax"`` by an augmented Lagrangian
      around `optax.sgd` (Nesterov momentum) projected on the bounds (Nocedal and Wright 2006, Section 17.4,
      the bound-constrained formulation), the frames in order, each started from the
      previous one's solution (`jaxmb._static_optimization_optax`); it needs
      ``exponent >= 2`` and takes many more (cheaper) steps. Both end on the same KKT
      check and result code.
    - `matching`: ``"moments"`` (default) writes the constraint as the torque balance
      ``B x = b``; ``"accelerations"`` as OpenSim does, ``M⁻¹(B x - b) = 0``. Imposed,
      the two have the same solution; they differ with `residual_weight`.
    - `residual_weight`: None (default) imposes the constraint; a positive ``c`` penalises
      it instead, adding ``c Σ_k |e_k|^p`` to the cost with ``e = B x - b`` (moments, N m
      or N) or ``e = M⁻¹(B x - b)`` (accelerations, rad/s² or m/s²): frames the muscles
      cannot balance then get the activations that come closest, rather than a failure
      (`jaxmb._static_optimization_matching`).
    - `tendon`: ``"rigid"`` (default, OpenSim's formulation above) or ``"compliant"``: the
      force sharing of Ehsani (2016), section 4-4 C (Fig. 21), whose constraints are the torque
      balance ``R F_T(a) + Q_act u = τ_ID`` (Eq. 195) and the musculotendon equations: ``F_T`` is
      each muscle's tendon force with its fibre in equilibrium with its tendon (each force
      model's own tendon, `compliant_tendon`; the fibre velocity its equilibrium uses: zero for
      Millard et al. (2013) as OpenSim 4.6, ``v_MT cos(phi)`` for De Groote et al. (2016)),
      passive force included (`passive_forces` is ignored). Solved by sequential
      linearisation of ``F_T`` about the current activations, each step the rigid route's
      exact affine solve (`jaxmb._static_optimization_compliant`; with the Newton solver and the
      torque balance imposed); `iterations` counts the
      linearisations, `muscle_forces` are the tendon forces and `constraint_matrix`,
      `constraint_target` the last linearisation's.
    - `active_force`: ``"along_tendon"`` (default): ``F_A`` is the active fibre force along
      the tendon, ``F_max f_L f_V cos(phi)``, for every force model (the force the muscle
      applies in `forward_dynamics`). ``"opensim"``: ``F_A`` as OpenSim 4.6's static
      optimization takes it (``calcInextensibleTendonActiveFiberForce``), which is that for
      Thelen2003Muscle, but ``F_max f_L f_V`` (no ``cos(phi)``) for DeGrooteFregly2016Muscle, and
      for Millard2012EquilibriumMuscle ``F_max f_L f_V cos(phi*)`` with
      ``sin(phi*) = h / (l / l_o)``, the normalised fibre length read as metres: pennated
      muscles are stronger there by up to ``1 / cos(phi)`` (the OpenSim parity page). Only with
      ``tendon="rigid"``.

    **Returns:**

    A [`jaxmb.StaticOptimization`][jaxmb.StaticOptimization]; frames that did not converge
    (no activations within bounds balance the forces: add reserves) have a `result` other
    than ``RESULTS.successful``.
    """
    passive_forces = flag(passive_forces, "static_optimization: passive_forces")
    use_model_actuators = flag(use_model_actuators, "static_optimization: use_model_actuators")
    time, q = motion_coordinates("static_optimization", model, time, q)
    if tendon not in ("rigid", "compliant"):
        raise ValueError(f"static_optimization: tendon must be 'rigid' or 'compliant', got {tendon!r}.")
    if not model.muscles:
        tendon = "rigid"  # actuators alone: the problem is affine either way
    if not 1.0 < exponent < np.inf:
        raise ValueError(f"static_optimization: exponent must be a finite number > 1 (OpenSim's "
                         f"activation_exponent), got {exponent}.")
    _check_options(solver, matching, residual_weight, exponent, tendon)
    if active_force not in ACTIVE_FORCES:
        raise ValueError(f"static_optimization: active_force must be one of {ACTIVE_FORCES}, got {active_force!r}.")
    if active_force != "along_tendon" and tendon == "compliant":
        raise ValueError("static_optimization: active_force='opensim' is OpenSim's rigid-tendon F_A; with "
                         "tendon='compliant' the tendon force is each model's own equilibrium.")
    check_path_force_route("static_optimization", "moment_arms", moment_arms)
    if matching == "accelerations":
        require_mass(model, "static_optimization(matching='accelerations')")
    extra = tuple(actuators(model) if use_model_actuators else ()) + tuple(actuators_extra)
    for a in extra:
        if not isinstance(a, AbstractActuator):
            raise TypeError(f"actuators_extra must hold jaxmb actuators (e.g. jaxmb.CoordinateActuator), "
                            f"got {type(a).__name__}.")
        a.check_model(model)
    names = tuple(model.muscle_names) + tuple(a.name for a in extra)
    repeated = sorted({x for x in names if names.count(x) > 1})
    if repeated:  # the solution's columns are found by name (a .sto had two 'time' columns)
        raise ValueError(f"static_optimization: the muscles and actuators must have distinct names; {repeated} "
                         "appear more than once (rename the actuators, or drop a duplicate).")
    if "time" in names:
        raise ValueError("static_optimization: an actuator named 'time' would clash with the time column of the "
                         "files written; rename it.")
    if len(names) < 1:
        raise ModelError(f"static_optimization: model {model.name!r} has no muscles and no actuators.")
    externals = tuple(external_loads)
    for ext in externals:
        if not isinstance(ext, ExternalForce):
            raise TypeError(f"external_loads must hold jaxmb.ExternalForce, got {type(ext).__name__}.")
        ext.check(model)
    dtype = q.dtype
    n = len(names)
    w = jnp.ones(n, dtype) if weights is None else jnp.asarray(weights, dtype)
    if w.shape != (n,):
        raise ValueError(f"static_optimization: weights must have shape ({n},), one per muscle and actuator "
                         f"({names}), got {w.shape}.")
    if is_concrete(w) and not np.all((np.asarray(w) > 0) & np.isfinite(np.asarray(w))):
        bad = [f"{nm} ({float(x)})" for nm, x in zip(names, np.asarray(w)) if not 0 < x < np.inf]
        raise ValueError(f"static_optimization: weights must be positive and finite; {', '.join(bad)} are not.")
    frames, w0, w1, w2 = opensim_states_operators(time, lowpass_hz=lowpass_hz, time_range=time_range)
    check_load_times(externals, time, frames, "static_optimization")
    samples = tuple(ext.sample(frames) for ext in externals)
    if tolerance is None:
        tolerance = 1e-11 if jnp.finfo(dtype).eps < 1e-10 else 1e-4
    if max_steps is None:
        max_steps = 20000 if solver == "optax" else 100
    tolerance = finite_tolerance(tolerance, "static_optimization", "tolerance", dtype)
    max_steps = positive_count(max_steps, "static_optimization", "max_steps")
    options = (solver, matching, None if residual_weight is None else float(residual_weight), moment_arms,
               active_force)
    return _run(model, extra, tuple(_spec(e) for e in externals), frames, (w0, w1, w2), q, samples, w,
                passive_forces, float(exponent), float(tolerance), int(max_steps), options + (tendon,))


def _check_options(solver, matching, residual_weight, exponent, tendon):
    """Refuse an unknown solver or matching, a non-positive residual weight, and the optax
    route with an exponent below 2, and compliant tendons with other than the imposed Newton route."""
    if solver not in ("newton", "optax"):
        raise ValueError(f"static_optimization: solver must be 'newton' or 'optax', got {solver!r}.")
    if matching not in MATCHING:
        raise ValueError(f"static_optimization: matching must be one of {MATCHING}, got {matching!r}.")
    if residual_weight is not None and not (np.isfinite(residual_weight) and residual_weight > 0):
        raise ValueError(f"static_optimization: residual_weight must be None (constraint imposed) or a finite "
                         f"positive weight, got {residual_weight}.")
    if solver == "optax" and exponent < 2.0:
        raise ValueError(f"static_optimization: solver='optax' needs exponent >= 2 (its gradient steps need a "
                         f"Lipschitz gradient), got {exponent}; use solver='newton'.")
    if tendon == "compliant" and (solver != "newton" or residual_weight is not None):
        raise ValueError("static_optimization: tendon='compliant' is solved by the Newton route with the torque "
                         f"balance imposed; got solver={solver!r}, residual_weight={residual_weight}.")


@eqx.filter_jit
def _run(model, extra, specs, frames, operators, q, samples, w, passive, p, tol, max_steps, options):
    """`static_optimization` after its checks, as one compiled program (NumPy operators and
    samples enter as constants of the data's dtype)."""
    dtype = q.dtype
    w0, w1, w2 = (jnp.asarray(m, dtype=dtype) for m in operators)
    qs, qds, qdds = w0 @ q, w1 @ q, w2 @ q
    samples = jax.tree.map(lambda a: jnp.asarray(a, dtype=dtype), samples)
    lo, hi = _bounds(model, extra, dtype)
    solver, matching, residual_weight, method, active_force, tendon = options
    nm = len(model.muscles)
    if tendon == "compliant":
        tau, x, forces, B, target, balance, kkt, steps, ok = compliant_frames(
            model, extra, specs, qs, qds, qdds, samples, w, lo, hi, p, tol, max_steps, frame_torque=_frame_torque,
            actuator_columns=unit_actuation_matrix, affine_frame=_frame, method=method)
    else:
        tau, B, target, f_active, f_passive = _problems(model, extra, specs, qs, qds, qdds, samples, passive, method,
                                                         active_force)
        problem = matching_problem(model, qs, B, target, w, lo, hi, matching, residual_weight)
        solve = solve_frames_optax if solver == "optax" else _solve_frames
        x, _, kkt, steps, ok = solve(*problem, p, tol, max_steps)
        x = x[:, :B.shape[2]]  # without the penalised residuals
        balance = jnp.max(jnp.abs(jnp.einsum("kqn,kn->kq", B, x) - target), axis=1)
        forces = x[:, :nm] * f_active + f_passive
    a, u = x[:, :nm], x[:, nm:]
    opt = jnp.stack([e.optimal_force for e in extra]).astype(dtype) if extra else jnp.zeros((0,), dtype)
    result = jax.vmap(lambda o: RESULTS.where(o, RESULTS.successful, RESULTS.static_optimization_failed))(ok)
    return StaticOptimization(
        time=jnp.asarray(frames, dtype=dtype), activations=a, muscle_forces=forces, controls=u,
        actuator_forces=u * opt[None, :], q=qs, qd=qds, qdd=qdds, generalized_forces=tau, constraint_matrix=B,
        constraint_target=target, torque_residual=balance,
        kkt_residual=kkt, iterations=steps, result=result, muscle_names=tuple(model.muscle_names),
        actuator_names=tuple(e.name for e in extra))
