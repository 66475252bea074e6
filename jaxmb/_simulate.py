"""Forward simulation of ``M(q) q'' + bias(q, q') = tau + Q_ext`` with diffrax.

The state is a pytree, a ``SimulationState`` ``(q, q', z, w)`` (``Solution.state``):
``z`` an optional controller's state, ``w`` the loops' warm-start variables, and room
for muscle states, so that they integrate together with the mechanics.
"""


from collections.abc import Callable

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int, PyTree

from ._checks import is_concrete, coordinate_vector, finite_tolerance, flag, positive_count
from ._kinematics import _closure_joints, compiled_on_model
from ._loop_closure import RESULT_MESSAGES, SUCCESS, LoopClosureError
from ._control import AbstractController
from ._dynamics import Method
from ._model import Model
from ._model_checks import require_mass
from ._results import RESULTS
from ._solvers import _solver_by_name, _TracedOnce
from ._simulate_state import (
    SimulationState,
    _diagnose,
    _guarded_controller,
    _initial_loops,
    _Layout,
    _start_code,
    _VectorField,
    _warm_loops,
    _warm_started,
)
from ._typing import RealLike


class Solution(eqx.Module):
    """Result of `simulate`.

    - `ts`: (T,) save times, s.
    - `state`: the ``SimulationState`` at the save times (each leaf with a leading
      axis T); `q`, `qd`: (T, nq), its coordinates and their rates; `z`: its controller
      state ((T, 0) without a controller).
    - `success`: scalar bool, ``result == RESULTS.successful``; False only with
      ``throw=False`` (otherwise a failure raises).
    - `result`: a `RESULTS` item: ``successful``, ``max_steps_reached``,
      ``nonfinite_state`` (the state or the forces became NaN or inf),
      ``singular_mass_matrix``, ``loop_*`` (a loop closure built with ``throw=False``
      failed to solve at the end of a step) or ``solver_failed``.
    - `stats`: solver statistics (``num_steps``, ``num_accepted_steps``,
      ``num_rejected_steps``).
    - `t_end`, `state_end`: where the integration stopped: ``t1`` and the final state,
      or the last accepted step before it failed; `q_end`, `qd_end` (nq,) its
      coordinates and rates. Save times after ``t_end`` hold ``inf``.
    - `loop_results`: ``{loop name: code}`` for every `LoopClosure`
      built with ``throw=False`` (which check nothing inside the right-hand side):
      its `result` at ``(t_end, q_end)``, 0 when it solved
      at the end of every step.
    """

    ts: Float[Array, " T"]
    state: SimulationState
    success: Bool[Array, ""]
    result: RESULTS
    stats: dict
    t_end: Float[Array, ""]
    state_end: SimulationState
    loop_results: dict[str, Int[Array, ""]]

    @property
    def q(self) -> Float[Array, "*batch T nq"]:
        return self.state.q

    @property
    def qd(self) -> Float[Array, "*batch T nq"]:
        return self.state.qd

    @property
    def z(self) -> PyTree[Array]:
        if self.state.controller is None:
            return jnp.zeros(self.ts.shape + (0,), self.state.q.dtype)
        return self.state.controller

    @property
    def q_end(self) -> Float[Array, "*batch nq"]:
        return self.state_end.q

    @property
    def qd_end(self) -> Float[Array, "*batch nq"]:
        return self.state_end.qd


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


class _UserTorque(eqx.Module):
    """A user's ``tau(t, q, q')``, checked where it is traced: `forward_dynamics` takes a
    None torque as no torque, so a callable that forgot its ``return`` ran unforced."""

    fn: Callable

    def __call__(self, t, q, qd):
        tau = self.fn(t, q, qd)
        if tau is None:
            raise ValueError("simulate: tau(t, q, qd) returned None; it must return the generalized forces, "
                             f"shape ({q.shape[0]},) (a missing return?).")
        return tau


# Jitted (and so cached) because simulate calls it outside its solve: run eagerly, its
# Newton loops would compile anew on every call.
@eqx.filter_jit
def _loop_codes_at(check: "_LoopCheck", y) -> dict:
    return check.codes(y)


def _unchecked_loops(model: Model) -> tuple[str, ...]:
    """Names (made unique) of the loops built with ``throw=False``: nothing inside the
    right-hand side checks their solves, so `simulate` checks them at the end of
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
    """Whether a loop built with ``throw=False`` fails to solve at a state ``y``, each
    solved as the right-hand side solves it (from its carried variables when it has no
    `guess`): diffrax's event condition, called at the end of every step. A Module, not
    a closure, so that the model's arrays stay arguments of the compiled solve."""

    model: Model
    layout: _Layout
    warm: tuple = eqx.field(static=True)
    names: tuple = eqx.field(static=True)

    def codes(self, flat) -> dict:
        """``{name: LoopSolution.result}`` at the state laid out in `flat`."""
        y = self.layout.unravel(flat)
        model, _ = _warm_started(self.model, self.warm, y.loops)
        return dict(zip(self.names, (c._status(y.q) for c, _ in _closure_joints(model) if not c.throw)))

    def __call__(self, t, y, args, **kwargs):
        return jnp.any(jnp.stack(list(self.codes(y).values())) != SUCCESS)


_NOT_CONVERGED = int(RESULTS.loop_not_converged._value)
_SINGULAR = int(RESULTS.loop_singular._value)


def _loop_result(codes: dict):
    """The `RESULTS` item of the first loop in `codes` that failed
    (``successful`` if none)."""
    result = RESULTS.successful
    for code in reversed(list(codes.values())):
        if isinstance(code, type(RESULTS.successful)):  # already a RESULTS item
            result = RESULTS.where(code == RESULTS.successful, result, code)
            continue
        item = RESULTS.where(code == _NOT_CONVERGED, RESULTS.loop_not_converged,
                             RESULTS.where(code == _SINGULAR, RESULTS.loop_singular, RESULTS.loop_wrong_branch))
        result = RESULTS.where(code == SUCCESS, result, item)
    return result


def _raise_loop_failures(codes: dict, t_end, q_end, outputs):
    """Raise (eagerly, or through ``eqx.branched_error_if`` under jit, on every array of
    `outputs`, so that whichever the caller uses carries the check) when a loop failed."""
    def message(name, code, where=""):
        return (f"simulate: LoopClosure {name!r}{where}: {RESULT_MESSAGES[code]}. Pass throw=False to "
                "simulate to get the result flags instead (Solution.loop_results, .t_end, .q_end).")

    for name, code in codes.items():
        if is_concrete(code) and is_concrete(q_end):
            if int(code) != SUCCESS:
                where = f" failed at t = {float(t_end)!r}, q = {np.asarray(q_end).tolist()}"
                raise LoopClosureError(message(name, int(code), where))
        else:
            msgs = [message(name, c, " failed at the end of a step") for c in sorted(RESULT_MESSAGES)]
            outputs = eqx.branched_error_if(outputs, code != SUCCESS, code, msgs)
    return outputs


def _finite_argument(x, name: str):
    """Raise a ValueError naming `name` when the concrete array `x` holds NaN or inf."""
    if is_concrete(x) and not bool(np.all(np.isfinite(np.asarray(x)))):
        bad = np.flatnonzero(~np.isfinite(np.asarray(x))).tolist()
        raise ValueError(f"simulate: {name} must be finite, got NaN or inf at flat index {bad[:8]}: "
                         f"{np.asarray(x).tolist() if np.size(x) <= 16 else '...'}.")


def _torque_function(tau, tau_ts, model: Model, t0, t1, dtype):
    if tau is None:
        return _Zero()
    if callable(tau) and not isinstance(tau, jax.Array):
        return _UserTorque(tau)
    tau = jnp.asarray(tau, dtype=dtype)
    if tau.ndim == 1:
        if tau.shape != (model.nq,):
            raise ValueError(f"simulate: tau must have shape ({model.nq},) for model {model.name!r}, "
                             f"got shape {tau.shape}.")
        _finite_argument(tau, "tau")
        return _Constant(tau)
    if tau.ndim == 2:
        if tau_ts is None:
            raise ValueError("simulate: a (T, nq) torque array needs its sample times `tau_ts` (T,).")
        tau_ts = jnp.asarray(tau_ts, dtype=dtype)
        if tau.shape[1] != model.nq or tau_ts.shape != tau.shape[:1]:
            raise ValueError(f"simulate: tau (T, nq) and tau_ts (T,) must match for model {model.name!r} "
                             f"(nq = {model.nq}), got shapes {tau.shape} and {tau_ts.shape}.")
        _finite_argument(tau, "tau")
        _finite_argument(tau_ts, "tau_ts")
        return _TimeSeriesTorque(diffrax.LinearInterpolation(ts=_torque_times(tau_ts, t0, t1), ys=tau))
    raise ValueError(f"simulate: tau must be None, (nq,), (T, nq) or a callable, got shape {tau.shape}.")


def _check_steps(dt0, max_steps):
    """`dt0` None or a positive finite number (0 ran to max_steps, a negative one failed
    in diffrax), `max_steps` an integer >= 1."""
    positive_count(max_steps, "simulate", "max_steps")
    if dt0 is not None and is_concrete(dt0) and not 0.0 < float(dt0) < np.inf:
        raise ValueError(f"simulate: dt0 must be None (chosen by the solver) or a positive finite step, s; "
                         f"got {dt0!r}.")


def _torque_times(tau_ts, t0, t1):
    """`tau_ts`, checked: at least two times, increasing, covering ``[t0, t1]`` (the
    interpolation would otherwise extrapolate, or read samples out of order, silently);
    eagerly a ValueError naming the first bad time, under jit an ``eqx.error_if``."""
    if tau_ts.shape[0] < 2:
        raise ValueError(f"simulate: a torque series needs at least two sample times tau_ts, got {tau_ts.shape[0]}.")
    rising = jnp.all(jnp.diff(tau_ts) > 0.0)
    covers = (tau_ts[0] <= t0) & (tau_ts[-1] >= t1)
    if is_concrete((tau_ts, t0, t1)):
        times = np.asarray(tau_ts)
        if not bool(rising):
            i = int(np.flatnonzero(np.diff(times) <= 0.0)[0]) + 1
            raise ValueError(f"simulate: tau_ts must increase; tau_ts[{i}] = {float(times[i])!r} follows "
                             f"{float(times[i - 1])!r}.")
        if not bool(covers):
            raise ValueError(f"simulate: tau_ts must cover [t0, t1] = [{float(t0)!r}, {float(t1)!r}] (the torque is "
                             f"not extrapolated); it spans [{float(times[0])!r}, {float(times[-1])!r}].")
        return tau_ts
    tau_ts = eqx.error_if(tau_ts, ~rising, "simulate: tau_ts must increase.")
    return eqx.error_if(tau_ts, ~covers, "simulate: tau_ts must cover [t0, t1] (the torque is not extrapolated).")


def _time_span(t0, t1, ts, dtype):
    """`t0`, `t1` and the save times `ts` (default ``[t1]``) as arrays of `dtype`,
    checked: finite, ``t0 <= t1`` and `ts` non-decreasing within ``[t0, t1]`` (a
    ValueError naming the argument when concrete, an ``eqx.error_if`` under jit, where
    diffrax checks `ts` itself)."""
    t0, t1 = jnp.asarray(t0, dtype), jnp.asarray(t1, dtype)
    for name, t in (("t0", t0), ("t1", t1)):
        if t.shape != ():
            raise ValueError(f"simulate: {name} must be a scalar, got shape {t.shape}.")
        _finite_argument(t, name)
    ts = jnp.reshape(t1, (1,)) if ts is None else jnp.asarray(ts, dtype)
    _finite_argument(ts, "ts")
    if ts.ndim != 1:
        raise ValueError(f"simulate: ts must be a 1-D array of save times, got shape {ts.shape}.")
    if is_concrete((t0, t1)):
        if float(t1) < float(t0):
            raise ValueError(f"simulate: t1 = {float(t1)!r} is before t0 = {float(t0)!r}; simulate integrates "
                             "forwards in time only.")
        if is_concrete(ts):
            times = np.asarray(ts)
            outside = np.flatnonzero((times < float(t0)) | (times > float(t1)))
            if outside.size:
                raise ValueError(f"simulate: the save times ts must lie within [t0, t1] = [{float(t0)!r}, "
                                 f"{float(t1)!r}]; ts[{int(outside[0])}] = {float(times[outside[0]])!r}.")
            backwards = np.flatnonzero(np.diff(times) < 0.0)
            if backwards.size:
                k = int(backwards[0])
                raise ValueError(f"simulate: the save times ts must be non-decreasing; ts[{k + 1}] = "
                                 f"{float(times[k + 1])!r} comes after ts[{k}] = {float(times[k])!r}.")
    else:
        bad = ~jnp.isfinite(t0) | ~jnp.isfinite(t1)
        t1 = eqx.error_if(t1, bad, "simulate: t0 and t1 must be finite.")
        t1 = eqx.error_if(t1, t1 < t0, "simulate: t1 is before t0; simulate integrates forwards in time only.")
    return t0, t1, ts


def simulate(model: Model, q0: RealLike, qd0: RealLike, t1: RealLike, *, t0: RealLike = 0.0,
             ts: RealLike | None = None, tau: RealLike | Callable | None = None,
             tau_ts: RealLike | None = None, controller: AbstractController | None = None,
             rtol: float = 1e-8, atol: float = 1e-8, solver: str | diffrax.AbstractSolver = "tsit5",
             dt0: float | None = None, max_steps: int = 1_000_000, progress: bool = False,
             throw: bool = True, adjoint: diffrax.AbstractAdjoint | None = None,
             method: Method = "recursive") -> Solution:
    """Integrate the equations of motion ``M(q) q'' + bias(q, q') = tau + Q_ext``
    (Ehsani 2016, Eq. 198, in the independent coordinates q) from ``(q0, q0')`` over
    ``[t0, t1]``.

    **Arguments:**

    - `model`: the model to simulate.
    - `q0`, `qd0`: (nq,) initial coordinates and rates (rad or m, rad/s or m/s), finite.
    - `t1`, `t0`: end and start time, s, finite, ``t0 <= t1`` (integration runs
      forwards only).
    - `ts`: save times (default: ``t1`` only), non-decreasing, within ``[t0, t1]``.
    - `tau`: generalized forces: ``None`` (zero), a constant (nq,), a (T, nq) array
      sampled at `tau_ts` (T,) s, increasing and covering ``[t0, t1]`` (linearly
      interpolated, not extrapolated), or a callable
      ``tau(t, q, q')``; N m or N per coordinate.
    - `controller`: an `AbstractController` (e.g. PID), whose
      torque adds to `tau` and whose state integrates with the mechanics.
    - `solver`: ``"tsit5"`` (default), ``"dopri5"``, ``"dopri8"``, ``"kvaerno5"``
      (implicit, for stiff problems) or any diffrax solver; adaptive steps with a
      PID step-size controller at `rtol`/`atol`. Prefer ``"kvaerno5"`` to
      ``diffrax.Kvaerno5()``: the name comes with a stage iteration that stops by its
      contraction rate, where diffrax 0.7.2's default root finder gives up after two
      iterations and rejects the step (several times the steps). Another
      implicit diffrax solver is used as given; build it with
      ``root_finder=mb.stage_root_finder()`` (without, it gets a warning).
    - `rtol`, `atol`: relative and absolute tolerances of the step-size control
      (positive, finite, at least 10 machine epsilons of the dtype of `q0`: with
      float32, switch on ``jax_enable_x64`` for tighter ones). Its error norm is the
      RMS over ``q``, ``q'`` and the controller state.
    - `dt0`: the first step, s (default: chosen by diffrax); `max_steps`: at most
      this many steps.
    - `progress`: show a tqdm progress bar.
    - `throw`: raise when the run fails, with its cause (``eqx.EquinoxRuntimeError``);
      with ``throw=False`` check ``.result`` or ``.success`` (useful under ``vmap``,
      one per batch member).
    - `adjoint`: diffrax adjoint for ``jax.grad`` (default: recursive checkpointing).
    - `method`: the dynamics route of `forward_dynamics`.

    **Returns:**

    A `Solution`: ``.ts``, ``.q``, ``.qd`` (T, nq), ``.result``, ``.state``.

    Works under ``jax.jit`` and ``jax.vmap`` (over initial conditions or over model
    parameters) and is differentiable.

    Arguments that cannot be integrated raise a ``ValueError`` naming them at the call:
    `q0`, `qd0` of the wrong shape (a `ModelError`), NaN or inf in `q0`,
    `qd0`, a constant `tau`, `t0` or `t1` (when concrete), ``t1 < t0``, tolerances that
    are not positive or below the dtype's resolution; under ``jit``, non-finite or
    reversed `t0`, `t1` raise at run time (``eqx.error_if``, whatever `throw`). A run
    that cannot go on ends
    early with a result naming the cause instead of running to `max_steps`:
    ``RESULTS.nonfinite_state`` when the state or the forces (a callable `tau`, the
    controller) become NaN or inf, ``RESULTS.singular_mass_matrix`` when ``M(q)`` is
    singular (a coordinate that moves no mass).

    Loops without a `guess` (`LoopClosure`) are solved at every
    right-hand side by Newton's method started from their variables carried along
    the motion (``w' = J q'``, appended to the state and left out of the step-size
    control), not from a continuation from ``q_ref``: a solve takes one or two
    iterations and stays on its branch through full turns of a crank.

    Loops built with ``throw=False`` check nothing inside the right-hand side; their
    solves are checked at the end of every step instead (a diffrax event), and a
    failure there (not converged, singular, another branch) stops the integration:
    with `throw` it raises `LoopClosureError` naming the loop, otherwise
    ``.success`` is False and ``.loop_results``, ``.t_end``, ``.q_end`` say which loop
    and where.

    A model in which no body has mass (a kinematic model, built for muscle geometry)
    has no accelerations: it is refused with a `ModelError` at the call.
    """
    require_mass(model, "simulate")
    q0 = coordinate_vector(model, q0, "simulate", "q0")
    qd0 = coordinate_vector(model, qd0, "simulate", "qd0", dtype=q0.dtype)
    _finite_argument(q0, "q0")
    _finite_argument(qd0, "qd0")
    rtol = finite_tolerance(rtol, "simulate", "rtol", q0.dtype)
    atol = finite_tolerance(atol, "simulate", "atol", q0.dtype)
    t0, t1, save_ts = _time_span(t0, t1, ts, q0.dtype)
    solver = _solver_by_name(solver)
    throw, progress = flag(throw, "simulate: throw"), flag(progress, "simulate: progress")
    _check_steps(dt0, max_steps)
    torque = _torque_function(tau, tau_ts, model, t0, t1, q0.dtype)
    z0 = None
    if controller is not None:
        if not isinstance(controller, AbstractController):
            raise TypeError(f"simulate: controller must be a jaxmb.control.AbstractController (PID, ComputedTorque, "
                            f"MuscleExcitations or a subclass), got {type(controller).__name__}; a plain function "
                            "of (t, q, qd) goes in tau.")
        z0 = jax.tree.map(lambda x: jnp.asarray(x, q0.dtype), controller.init(q0, qd0))
        for leaf in jax.tree.leaves(z0):
            _finite_argument(leaf, "the controller's initial state (controller.init)")
    save_ts, states, t_end, end, result, codes, stats = _integrate(
        model, q0, qd0, z0, t0, t1, save_ts, torque, controller, solver, rtol, atol, dt0, max_steps, progress,
        adjoint, method)
    outputs = (save_ts, states, t_end, end)
    if throw:
        outputs = _raise_loop_failures(codes, t_end, end.q, outputs)
        outputs = _raise_failure(result, outputs)
    save_ts, states, t_end, end = outputs
    return Solution(ts=save_ts, state=states, success=result == RESULTS.successful, result=result,
                    stats=stats, t_end=t_end, state_end=end, loop_results=codes)


# One program per model structure and options (`jaxmb._eager`): called eagerly, the
# solve's setup (its modules holding the model, each flattening it) and diffrax's own
# dispatch of the model's arrays cost milliseconds on a full-body model, many times a
# short simulation. The arguments are checked before it, and failures raised after it.
@compiled_on_model
def _integrate(model, q0, qd0, z0, t0, t1, save_ts, torque, controller, solver, rtol, atol, dt0, max_steps,
               progress, adjoint, method):
    """The solve of `simulate` from its checked arguments: ``(save_ts, states, t_end,
    end, result, loop codes, stats)``."""
    warm = _warm_loops(model)
    y0 = SimulationState(q=q0, qd=qd0, controller=z0, loops=_initial_loops(model, warm, q0))
    layout = _Layout.of(y0)
    # Checked once before the solve (a mass matrix): a state that is not finite, or a
    # singular M(q0) (whose Cholesky factor may hold finite garbage rather than NaN),
    # ends the run at its first step.
    start = _start_code(model, warm, y0)
    vector = _VectorField(model, torque, controller, layout, method, warm)
    # A second output holds the state where the integration stopped (t_end, q_end): a
    # t1 save in the same output would land in the first unused slot of `ts` instead.
    saveat = diffrax.SaveAt(subs=(diffrax.SubSaveAt(ts=save_ts), diffrax.SubSaveAt(t1=True)))
    check = _LoopCheck(model, layout, warm, _unchecked_loops(model))
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
        y0=layout.ravel(y0),
        saveat=saveat,
        stepsize_controller=_guarded_controller(rtol, atol, layout.norm(), t0, t1, q0.dtype,
                                                halt=start != RESULTS.successful),
        max_steps=max_steps,
        adjoint=diffrax.RecursiveCheckpointAdjoint() if adjoint is None else adjoint,
        progress_meter=diffrax.TqdmProgressMeter() if progress else diffrax.NoProgressMeter(),
        throw=False,
        event=event,
    )
    (save_ts, t_end), (states, end) = sol.ts, sol.ys
    t_end = t_end[0]
    codes = _loop_codes_at(check, end[0]) if check.names else {}
    if codes:
        # The step-end check stopped the run; solved again at the end state, a loop right
        # at its singular configuration may converge this time (under vmap its Newton
        # iterations run as long as the slowest member's). The run still failed there.
        stopped = (sol.result == diffrax.RESULTS.event_occurred) & jnp.all(
            jnp.stack([c == SUCCESS for c in codes.values()]))
        codes = {k: jnp.where(stopped, _NOT_CONVERGED, c).astype(c.dtype) for k, c in codes.items()}
    states, end = layout.unravel(states), layout.unravel(end[0])
    result = _diagnose(model, warm, sol.result, _loop_result(codes), end)
    result = RESULTS.where(start == RESULTS.successful, result, start)
    return save_ts, states, t_end, end, result, codes, sol.stats


def _raise_failure(result, outputs):
    """Raise, through ``eqx.branched_error_if`` on every array of `outputs`, when
    `result` is not ``successful``, with the message of its cause; under ``jax.vmap``
    also the index of the first failing member (along the innermost vmapped axis)."""
    # RESULTS items carry their index as `_value` (equinox's Enumeration).
    code = result._value
    if is_concrete(code):  # eagerly: equinox's own error, not a JAX runtime error around it
        return eqx.branched_error_if(outputs, code != 0, code, _MESSAGES)
    return _checked(outputs, code)


def _failure_message(message: str, member: int | None = None) -> str:
    where = "" if member is None else f" (batch member {member} along the vmapped axis, the first that failed)"
    return (f"simulate{where}: {message}. Pass throw=False to simulate to get the result instead "
            "(Solution.result, .t_end, .q_end; under jax.vmap, one per batch member).")


_MESSAGES = tuple(_failure_message(m) if m else "" for m in RESULTS._index_to_message)


class _BatchMessages:
    """The messages of a batch of `n` members, indexed by ``cause * n + member``: built
    when one is raised, not ``len(RESULTS) * n`` strings up front. Hashable, as
    ``eqx.branched_error_if`` needs."""

    def __init__(self, n: int):
        self.n = n

    def __len__(self):
        return len(RESULTS._index_to_message) * self.n

    def __getitem__(self, i):
        cause, member = divmod(int(i), self.n)
        return _failure_message(RESULTS._index_to_message[cause], member)

    def __hash__(self):
        return hash((_BatchMessages, self.n))

    def __eq__(self, other):
        return isinstance(other, _BatchMessages) and other.n == self.n


@jax.custom_batching.custom_vmap
def _checked_members(outputs, code):
    return eqx.branched_error_if(outputs, code != 0, code, _MESSAGES)


@_checked_members.def_vmap
def _checked_batch(axis_size, in_batched, outputs, code):
    # Under vmap the whole batch of codes is here: the first failing member can be named.
    outputs_batched, code_batched = in_batched
    if not code_batched:
        return _checked_members(outputs, code), outputs_batched
    bad = code != 0
    first = jnp.argmax(bad).astype(code.dtype)
    index = code[first] * axis_size + first
    return eqx.branched_error_if(outputs, jnp.any(bad), index, _BatchMessages(axis_size)), outputs_batched


@jax.custom_jvp
def _checked(outputs, code):
    return _checked_members(outputs, code)


@_checked.defjvp
def _checked_jvp(primals, tangents):
    # The check passes the tangents through (as eqx.error_if does), scaled by a gate of 1
    # that is itself checked: under `jit(grad(...))` the primal outputs are not needed and
    # their check would be dropped with them, while the gate is (a failed run's gradient
    # came out as zeros or NaN, silently).
    outputs, code = primals
    (gate,) = _checked_members((jnp.ones((), jnp.result_type(float)),), code)

    def gated(t):
        return t if t.dtype == jax.dtypes.float0 else t * gate.astype(t.dtype)

    return _checked(outputs, code), jax.tree.map(gated, tangents[0])
