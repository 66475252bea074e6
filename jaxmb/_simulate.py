"""Forward simulation of ``M(q) q'' + bias(q, q') = tau + Q_ext`` with diffrax.

The state is ``y = (q, q', z)`` where ``z`` is an optional controller state, so
muscle or controller states integrate together with the mechanics.
"""


import re
import warnings
from collections.abc import Callable
from typing import Any

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
from jaxtyping import Array, Bool, Float, Int

from ._typing import RealLike

from ._kinematics import _closure_joints
from ._loop_closure import RESULT_MESSAGES, SUCCESS, LoopClosureError, _is_concrete
from ._control import AbstractController
from ._dynamics import Method, forward_dynamics
from ._model import Model


class Solution(eqx.Module):
    """Result of :func:`simulate`.

    - `ts`: (T,) save times; `q`, `qd`: (T, nq); `z`: (T, nz) controller state.
    - `success`: scalar bool, False when the solver failed or a loop closure failed
      to solve (both only with ``throw=False``).
    - `result`: the diffrax result code (``diffrax.RESULTS.event_occurred`` when a
      loop failed); `stats`: solver statistics (``num_steps``,
      ``num_accepted_steps``, ``num_rejected_steps``).
    - `t_end`, `q_end`, `qd_end`: where the integration stopped: ``t1`` and the
      final state, or the end of the step at which it failed. Save times after
      ``t_end`` hold ``inf``.
    - `loop_results`: ``{loop name: code}`` for every :class:`~jaxmb.LoopClosure`
      built with ``throw=False`` (which check nothing inside the right-hand side):
      its :attr:`~jaxmb.LoopSolution.result` at ``(t_end, q_end)``, 0 when it solved
      at the end of every step.
    """

    ts: Float[Array, " T"]
    q: Float[Array, "T nq"]
    qd: Float[Array, "T nq"]
    z: Array
    success: Bool[Array, ""]
    result: Any
    stats: dict
    t_end: Float[Array, ""]
    q_end: Float[Array, " nq"]
    qd_end: Float[Array, " nq"]
    loop_results: dict[str, Int[Array, ""]]


class _TimeSeriesTorque(eqx.Module):
    interpolation: diffrax.LinearInterpolation

    def __call__(self, t, q, qd):
        return self.interpolation.evaluate(t)


class _Constant(eqx.Module):
    value: Array

    def __call__(self, t, q, qd):
        return self.value


class _Zero(eqx.Module):
    def __call__(self, t, q, qd):
        return jnp.zeros_like(q)


class _Vector(eqx.Module):
    """``y' = (q', q'', z', w')`` on the flat state ``y = (q, q', z, w)``: one array
    rather than a tuple, so that each Runge-Kutta stage's combinations are one
    kernel, not four.

    ``w`` holds the dependent variables of the loops in `warm` (joint indices per
    loop), integrated as ``w' = J q'``. They only start each loop's Newton solve
    (:meth:`~jaxmb.LoopClosure.warm_started`): the dynamics use the solved ``f(q)``,
    so ``w`` adds no unknowns to the ODE in q, and the step-size control leaves it
    out."""

    model: Model
    torque: Any
    controller: AbstractController | None
    method: str = eqx.field(static=True)
    warm: tuple = eqx.field(static=True, default=())
    nz: int = eqx.field(static=True, default=0)

    def __call__(self, t, y, args):
        nq = self.model.nq
        nqz = 2 * nq + self.nz
        q, qd, z, w = y[:nq], y[nq:2 * nq], y[2 * nq:nqz], y[nqz:]
        model, closures = _warm_started(self.model, self.warm, w)
        tau = self.torque(t, q, qd)
        dz = jnp.zeros_like(z)
        if self.controller is not None:
            tau = tau + self.controller.torque(t, q, qd, z)
            dz = self.controller.state_derivative(t, q, qd, z)
        qdd = forward_dynamics(model, q, qd, tau, method=self.method)
        # The loops' rates: shared with forward_dynamics's solve of the same (q, q').
        dw = [jax.lax.stop_gradient(c.rates(q, qd)[2]) for c in closures]
        return jnp.concatenate([qd, qdd, dz, *dw])


class _TracedOnce(eqx.Module):
    """A vector field that diffrax traces once per solve. diffrax evaluates it at several
    places of its program (initial step size, first stage, the stage loop, the step-end
    event), each a fresh trace of the whole dynamics; through one jit-compiled call the
    first trace is reused by the others (and by later solves of the same structure), and
    XLA inlines the call, so the compiled program is the same (docs/engine.md). Used by
    :func:`simulate` and :func:`~jaxmb.constraints.simulate_dae`."""

    field: Callable

    def __call__(self, t, y, args):
        return _call_field(self.field, t, y, args)


@eqx.filter_jit
def _call_field(field, t, y, args):
    # diffeqsolve's own filter_jit already needs the field's static parts hashable.
    return field(t, y, args)


class _LeadingRMSNorm(eqx.Module):
    """The RMS norm of the first `n` components: the step-size control's norm when the
    state carries loop variables ``w`` after them. A Module rather than a lambda, so
    that calls of :func:`simulate` with equal arguments hit diffrax's compilation cache."""

    n: int = eqx.field(static=True)

    def __call__(self, e):
        return optx.rms_norm(e[:self.n])


def _warm_loops(model: Model) -> tuple:
    """For each loop without a `guess` (whose solves would otherwise start from a
    continuation from ``q_ref``, which fails far from it), the indices of the joints
    that are its variables."""
    return tuple(tuple(idx.values()) for closure, idx in _closure_joints(model) if closure.guess is None)


# Jitted (and so cached) because simulate calls it outside its solve: run eagerly, its
# Newton loops would compile anew on every call.
@eqx.filter_jit
def _loop_codes_at(check: "_LoopCheck", y) -> dict:
    return check.codes(y)


def _warm_started(model: Model, warm: tuple, w):
    """`model` with the loops in `warm` started from their slices of `w`, and those loops."""
    if not warm:
        return model, []
    joints, closures, k = list(model.joints), [], 0
    for idx in warm:
        closure = joints[idx[0]].function.closure
        closure = closure.warm_started(w[k:k + closure.m])
        for i in idx:
            joints[i] = eqx.tree_at(lambda j: j.function.closure, joints[i], closure)
        closures.append(closure)
        k += closure.m
    return eqx.tree_at(lambda m: m.joints, model, tuple(joints)), closures


def _unchecked_loops(model: Model) -> tuple[str, ...]:
    """Names (made unique) of the loops built with ``throw=False``: nothing inside the
    right-hand side checks their solves, so :func:`simulate` checks them at the end of
    every step."""
    names: list[str] = []
    for closure, _ in _closure_joints(model):
        if not closure.throw:
            name, k = closure.name, 1
            while name in names:
                name, k = f"{closure.name}#{k}", k + 1
            names.append(name)
    return tuple(names)


class _LoopCheck(eqx.Module):
    """Whether a loop built with ``throw=False`` fails to solve at a state ``y`` of
    :class:`_Vector`, each solved as the right-hand side solves it (from its slice of
    the carried ``w`` when it has no `guess`): diffrax's event condition, called at
    the end of every step. A Module, not a closure, so that the model's arrays stay
    arguments of the compiled solve."""

    model: Model
    warm: tuple = eqx.field(static=True)
    names: tuple = eqx.field(static=True)
    n_controlled: int = eqx.field(static=True)

    def codes(self, y) -> dict:
        """``{name: LoopSolution.result}`` at ``y``."""
        model, _ = _warm_started(self.model, self.warm, y[self.n_controlled:])
        q = y[:model.nq]
        return dict(zip(self.names, (c._status(q) for c, _ in _closure_joints(model) if not c.throw)))

    def __call__(self, t, y, args, **kwargs):
        return jnp.any(jnp.stack(list(self.codes(y).values())) != SUCCESS)


def _raise_loop_failures(codes: dict, t_end, q_end, outputs):
    """Raise (eagerly, or through ``eqx.branched_error_if`` under jit, on every array of
    `outputs`, so that whichever the caller uses carries the check) when a loop failed."""
    def message(name, code, where=""):
        return (f"simulate: LoopClosure {name!r}{where}: {RESULT_MESSAGES[code]}. Pass throw=False to "
                "simulate to get the result flags instead (Solution.loop_results, .t_end, .q_end).")

    for name, code in codes.items():
        if _is_concrete(code) and _is_concrete(q_end):
            if int(code) != SUCCESS:
                where = f" failed at t = {float(t_end)!r}, q = {np.asarray(q_end).tolist()}"
                raise LoopClosureError(message(name, int(code), where))
        else:
            msgs = [message(name, c, " failed at the end of a step") for c in sorted(RESULT_MESSAGES)]
            outputs = eqx.branched_error_if(outputs, code != SUCCESS, code, msgs)
    return outputs


def _torque_function(tau, tau_ts, dtype):
    if tau is None:
        return _Zero()
    if callable(tau) and not isinstance(tau, jax.Array):
        return tau
    tau = jnp.asarray(tau, dtype=dtype)
    if tau.ndim == 1:
        return _Constant(tau)
    if tau.ndim == 2:
        if tau_ts is None:
            raise ValueError("simulate: a (T, nq) torque array needs its sample times `tau_ts` (T,).")
        return _TimeSeriesTorque(diffrax.LinearInterpolation(ts=jnp.asarray(tau_ts, dtype=dtype), ys=tau))
    raise ValueError(f"simulate: tau must be None, (nq,), (T, nq) or a callable, got shape {tau.shape}.")


class _VeryChord(diffrax.VeryChord):
    """diffrax's per-step chord iteration for implicit Runge-Kutta stages, stopped as
    Hairer & Wanner (*Solving ODEs II*, IV.8, Eq. 8.10-8.11) stop it: with the rate
    ``θ_k = ‖Δ_k‖ / ‖Δ_{k-1}‖`` (scaled by the step's tolerances), converged once
    ``θ_k / (1 - θ_k) ‖Δ_k‖ < κ``, failed only if ``θ_k > 2`` (or not finite).

    Why not diffrax's own: in diffrax 0.7.2 ``VeryChord.terminate`` reports every
    iteration that has not converged yet as diverged, and optimistix 0.1.0 ends a
    root find at the first unsuccessful result. So each stage got at most two
    iterations, and a stage that needed a third failed and rejected the step:
    Kvaerno5 took 550 steps instead of 59 on Andrews' squeezer (rtol 1e-5; Tsit5 57),
    and 1925 instead of 164 on seed 000's double pendulum (2 s at 1e-6; Tsit5 163;
    ``tests/test_simulate.py``). diffrax PR #754 fixes it upstream, after 0.7.2. The
    iteration itself (one Jacobian per step) is diffrax's."""

    def terminate(self, fn, y, args, options, state, tags):
        del fn, y, args, options, tags
        rate = state.diffsize / state.diffsize_prev
        at_least_two = state.step >= 2
        # A correction at the rounding level of the tolerance-scaled state: nothing
        # left to gain, and its rate is noise.
        small = state.diffsize < 10.0 ** (2 - jnp.finfo(state.diffsize.dtype).precision)
        diverged = ~jnp.isfinite(rate) | (rate > 2)
        remaining = state.diffsize * rate / (1 - rate)
        converged = (remaining > 0) & (remaining < self.kappa)
        stop = at_least_two & (small | diverged | converged)
        result = optx.RESULTS.where(at_least_two & ~small & diverged, optx.RESULTS.nonlinear_divergence,
                                    optx.RESULTS.successful)
        linear_failed = state.result != optx.RESULTS.successful
        return stop | linear_failed, optx.RESULTS.where(linear_failed, state.result, result)


# diffrax releases up to 0.7.2 stop VeryChord's iteration early (see _VeryChord). The
# release's leading numbers only, so that "0.7.3rc1" or "0.8.0.dev0" parse too.
_STOCK_VERYCHORD_STOPS_EARLY = tuple(int(n) for n in re.findall(r"\d+", diffrax.__version__)[:3]) <= (0, 7, 2)


def stage_root_finder() -> diffrax.VeryChord:
    """The root finder for the stages of diffrax's implicit solvers that ``solver="kvaerno5"``
    uses: diffrax's chord iteration (one Jacobian per step), with the step's tolerances,
    stopped by its contraction rate (Hairer & Wanner II, IV.8, Eq. 8.10-8.11) instead of
    after at most two iterations as diffrax 0.7.2's own does. For another implicit solver::

        mb.simulate(model, q0, qd0, t1, solver=diffrax.Kvaerno3(root_finder=mb.stage_root_finder()))
    """
    return diffrax.with_stepsize_controller_tols(_VeryChord)()


def _kvaerno5() -> diffrax.Kvaerno5:
    return diffrax.Kvaerno5(root_finder=stage_root_finder())


_SOLVERS = {
    "tsit5": diffrax.Tsit5,
    "dopri5": diffrax.Dopri5,
    "dopri8": diffrax.Dopri8,
    "kvaerno5": _kvaerno5,
}


def _solver_by_name(solver: "str | diffrax.AbstractSolver", caller: str = "simulate") -> diffrax.AbstractSolver:
    """`solver` itself, or the diffrax solver that its name (``"tsit5"``, ``"dopri5"``,
    ``"dopri8"``, ``"kvaerno5"``) stands for. ``"kvaerno5"`` stops its stage
    iterations by the contraction rate (see ``_VeryChord``), where ``diffrax.Kvaerno5()``
    with its default root finder rejects most steps (diffrax 0.7.2). A solver object with
    that root finder is returned as given, with a warning."""
    if not isinstance(solver, str):
        root_finder = getattr(solver, "root_finder", None)
        if (_STOCK_VERYCHORD_STOPS_EARLY and isinstance(root_finder, diffrax.VeryChord)
                and not isinstance(root_finder, _VeryChord)):
            warnings.warn(
                f"{caller}: {type(solver).__name__} with diffrax's VeryChord root finder gives each "
                f"implicit stage at most two iterations (diffrax {diffrax.__version__}), and a stage that needs a "
                "third rejects the step (several times the steps; docs/engine.md, \"Simulation\"). Pass "
                "solver=\"kvaerno5\", or build the solver with root_finder=jaxmb.stage_root_finder().",
                UserWarning, stacklevel=3)
        return solver
    try:
        return _SOLVERS[solver.lower()]()
    except KeyError:
        raise ValueError(f"{caller}: unknown solver {solver!r}; choose from {sorted(_SOLVERS)}.") from None


def simulate(model: Model, q0: RealLike, qd0: RealLike, t1: RealLike, *, t0: RealLike = 0.0,
             ts: RealLike | None = None, tau: RealLike | Callable | None = None,
             tau_ts: RealLike | None = None, controller: AbstractController | None = None,
             rtol: float = 1e-8, atol: float = 1e-8, solver: str | diffrax.AbstractSolver = "tsit5",
             dt0: float | None = None, max_steps: int = 1_000_000, progress: bool = False,
             throw: bool = True, adjoint: diffrax.AbstractAdjoint | None = None,
             method: Method = "recursive") -> Solution:
    """Integrate the equations of motion from ``(q0, q0')`` over ``[t0, t1]``.

    **Arguments:**

    - `ts`: save times (default: ``t1`` only).
    - `tau`: generalized forces: ``None`` (zero), a constant (nq,), a (T, nq) array
      sampled at `tau_ts` (linearly interpolated), or a callable ``tau(t, q, q')``.
    - `controller`: an :class:`~jaxmb.control.AbstractController` (e.g. PID), whose
      torque adds to `tau` and whose state integrates with the mechanics.
    - `solver`: ``"tsit5"`` (default), ``"dopri5"``, ``"dopri8"``, ``"kvaerno5"``
      (implicit, for stiff problems) or any diffrax solver; adaptive steps with a
      PID step-size controller at `rtol`/`atol`. Prefer ``"kvaerno5"`` to
      ``diffrax.Kvaerno5()``: the name comes with a stage iteration that stops by its
      contraction rate, where diffrax 0.7.2's default root finder gives up after two
      iterations and rejects the step (9-12x the steps on Andrews' squeezer). Another
      implicit diffrax solver is used as given; build it with
      ``root_finder=mb.stage_root_finder()`` (without, it gets a warning).
    - `progress`: show a tqdm progress bar.
    - `throw`: raise on solver failure; with ``throw=False`` check ``.success``
      (useful under ``vmap``).
    - `adjoint`: diffrax adjoint for ``jax.grad`` (default: recursive checkpointing).

    Works under ``jax.jit`` and ``jax.vmap`` (over initial conditions or over model
    parameters) and is differentiable.

    Loops without a `guess` (:class:`~jaxmb.LoopClosure`) are solved at every
    right-hand side by Newton's method started from their variables carried along
    the motion (``w' = J q'``, appended to the state and left out of the step-size
    control), not from a continuation from ``q_ref``: a solve takes one or two
    iterations and stays on its branch through full turns of a crank.

    Loops built with ``throw=False`` check nothing inside the right-hand side; their
    solves are checked at the end of every step instead (a diffrax event), and a
    failure there (not converged, singular, another branch) stops the integration:
    with `throw` it raises :class:`~jaxmb.LoopClosureError` naming the loop, otherwise
    ``.success`` is False and ``.loop_results``, ``.t_end``, ``.q_end`` say which loop
    and where.
    """
    q0 = jnp.asarray(q0)
    if not jnp.issubdtype(q0.dtype, jnp.floating):
        q0 = q0.astype(float)
    qd0 = jnp.asarray(qd0, dtype=q0.dtype)
    if q0.shape != (model.nq,) or qd0.shape != (model.nq,):
        raise ValueError(
            f"simulate: q0 and qd0 must have shape ({model.nq},) for model {model.name!r} "
            f"(coordinates {model.coordinate_names}); got {q0.shape} and {qd0.shape}."
        )
    solver = _solver_by_name(solver)
    z0 = jnp.zeros((0,), q0.dtype) if controller is None else jnp.asarray(controller.init(q0, qd0), q0.dtype)
    warm = _warm_loops(model)
    w0 = [model.joints[idx[0]].function.closure.solve(q0).f.astype(q0.dtype) for idx in warm]
    vector = _Vector(model, _torque_function(tau, tau_ts, q0.dtype), controller, method, warm, z0.shape[0])
    # A second output holds the state where the integration stopped (t_end, q_end): a
    # t1 save in the same output would land in the first unused slot of `ts` instead.
    saveat = diffrax.SaveAt(subs=(diffrax.SubSaveAt(ts=jnp.asarray([t1] if ts is None else ts, dtype=q0.dtype)),
                                  diffrax.SubSaveAt(t1=True)))
    nq, n_controlled = model.nq, 2 * model.nq + z0.shape[0]
    check = _LoopCheck(model, warm, _unchecked_loops(model), n_controlled)
    # A loop built with throw=False raises nothing inside the right-hand side (no host
    # check per solve), so a solve that fails there (a singular configuration, q past
    # the end of its range) would go unseen and the carried w could jump to another
    # assembly. Checking its solve at the end of every step stops the run there instead,
    # as a result flag (diffrax's event_occurred).
    event = diffrax.Event(check) if check.names else None
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(_TracedOnce(vector)),
        solver,
        t0=t0,
        t1=t1,
        dt0=dt0,
        y0=jnp.concatenate([q0, qd0, z0, *w0]),
        saveat=saveat,
        stepsize_controller=diffrax.PIDController(
            rtol=rtol, atol=atol, norm=optx.rms_norm if not warm else _LeadingRMSNorm(n_controlled)),
        max_steps=max_steps,
        adjoint=diffrax.RecursiveCheckpointAdjoint() if adjoint is None else adjoint,
        progress_meter=diffrax.TqdmProgressMeter() if progress else diffrax.NoProgressMeter(),
        throw=throw,
        event=event,
    )
    (ts, t_end), (ys, end) = sol.ts, sol.ys
    t_end, end = t_end[0], end[0]
    q, qd, z = ys[:, :nq], ys[:, nq:2 * nq], ys[:, 2 * nq:n_controlled]
    q_end, qd_end = end[:nq], end[nq:2 * nq]
    codes = _loop_codes_at(check, end) if check.names else {}
    if throw:
        ts, q, qd, z, t_end, q_end, qd_end = _raise_loop_failures(codes, t_end, q_end,
                                                                   (ts, q, qd, z, t_end, q_end, qd_end))
    return Solution(ts=ts, q=q, qd=qd, z=z, success=sol.result == diffrax.RESULTS.successful,
                    result=sol.result, stats=sol.stats, t_end=t_end, q_end=q_end, qd_end=qd_end,
                    loop_results=codes)
