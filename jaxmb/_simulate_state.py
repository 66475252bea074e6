"""The state that :func:`jaxmb.simulate` integrates, its vector field, its error norm,
and the guards that end a run whose state or dynamics stop making sense.

The state is a pytree (:class:`SimulationState`) handed to diffrax as it is: diffrax
combines the Runge-Kutta stages leaf by leaf, so new kinds of state (muscle
activations, fibre lengths) are new fields, integrated with the mechanics.
"""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import optimistix as optx
from jaxtyping import Array, Bool, Float, PyTree

from ._constraints import _closure_joints
from ._control import AbstractController
from ._dynamics import forward_dynamics, mass_matrix
from ._model import Model
from ._results import RESULTS


class SimulationState(eqx.Module):
    """What :func:`jaxmb.simulate` integrates: a pytree, so that controller and (later)
    muscle states ride along with the mechanics.

    - `q`, `qd`: (nq,) generalized coordinates and their rates.
    - `controller`: the controller's state ``z`` (any pytree of arrays,
      :meth:`~jaxmb.control.AbstractController.init`), or None without a controller.
    - `loops`: a tuple of one (m,) array per loop closure without a `guess` (None if
      there is none): its dependent variables carried along the motion (``w' = J q'``),
      where its Newton solve at the next right-hand side starts. They add no unknowns
      to the ODE in ``q`` (the dynamics use the solved ``f(q)``) and the step-size
      control leaves them out.

    Absent parts are None, not empty containers (diffrax's stage buffers take arrays
    only).

    In a :class:`~jaxmb.Solution` every leaf has a leading axis of save times.
    """

    q: Float[Array, "*T nq"]
    qd: Float[Array, "*T nq"]
    controller: PyTree[Array] | None = None
    loops: tuple[Array, ...] | None = None


class _StateRMSNorm(eqx.Module):
    """The step-size control's norm: the RMS over every component of ``q``, ``q'`` and
    the controller state, as over one flat vector of them; the loops' warm-start
    variables are left out (they only start Newton solves). A Module rather than a
    function defined in :func:`~jaxmb.simulate`, so that calls with equal arguments hit
    diffrax's compilation cache."""

    def __call__(self, e: SimulationState):
        return optx.rms_norm((e.q, e.qd, e.controller))


def _warm_loops(model: Model) -> tuple:
    """For each loop without a `guess` (whose solves would otherwise start from a
    continuation from ``q_ref``, which fails far from it), the indices of the joints
    that are its variables."""
    return tuple(tuple(idx.values()) for closure, idx in _closure_joints(model) if closure.guess is None)


def _warm_started(model: Model, warm: tuple, loops: tuple):
    """`model` with the loops in `warm` started from `loops` (one array each), and those loops."""
    if not warm:
        return model, []
    joints, closures = list(model.joints), []
    for idx, w in zip(warm, loops):
        closure = joints[idx[0]].function.closure.warm_started(w)
        for i in idx:
            joints[i] = eqx.tree_at(lambda j: j.function.closure, joints[i], closure)
        closures.append(closure)
    return eqx.tree_at(lambda m: m.joints, model, tuple(joints)), closures


def _initial_loops(model: Model, warm: tuple, q0) -> tuple:
    """The loops' variables at ``q0``: their solves from ``q_ref`` (None without loops)."""
    if not warm:
        return None
    return tuple(model.joints[idx[0]].function.closure.solve(q0).f.astype(q0.dtype) for idx in warm)


class _VectorField(eqx.Module):
    """``y' = (q', q'', z', w')`` on ``y = (q, q', z, w)`` (a :class:`SimulationState`):
    the equations of motion ``M(q) q'' = tau + Q_ext - bias(q, q')`` (Ehsani 2016,
    Eq. 198) with ``tau`` the applied torque plus the controller's, the controller's
    ``z'``, and the loops' rates ``w' = J q'``."""

    model: Model
    torque: eqx.Module
    controller: AbstractController | None
    method: str = eqx.field(static=True)
    warm: tuple = eqx.field(static=True, default=())

    def __call__(self, t, y: SimulationState, args) -> SimulationState:
        model, closures = _warm_started(self.model, self.warm, y.loops)
        tau = self.torque(t, y.q, y.qd)
        dz = None
        if self.controller is not None:
            tau = tau + self.controller.torque(t, y.q, y.qd, y.controller)
            dz = self.controller.state_derivative(t, y.q, y.qd, y.controller)
        qdd = forward_dynamics(model, y.q, y.qd, tau, method=self.method)
        # The loops' rates: shared with forward_dynamics's solve of the same (q, q').
        dw = tuple(jax.lax.stop_gradient(c.rates(y.q, y.qd)[2]) for c in closures)
        return SimulationState(q=y.qd, qd=qdd, controller=dz, loops=dw if dw else None)


def _all_finite(tree) -> Bool[Array, ""]:
    leaves = [jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves(tree)]
    return jnp.all(jnp.stack(leaves)) if leaves else jnp.asarray(True)


class _GuardedController(diffrax.AbstractAdaptiveStepSizeController):
    """diffrax's PID step-size control (`pid`), which also ends the run when it cannot go
    on: when the accepted state is not finite, or when a step fails with a non-finite
    error although it has shrunk to the rounding level of the time (then the vector field
    is not finite at the accepted state itself: NaN or inf in the applied forces, a
    singular mass matrix). diffrax alone would keep rejecting steps until `max_steps`.
    It reports ``diffrax.RESULTS.dt_min_reached``; :func:`_diagnose` names the cause."""

    pid: diffrax.PIDController
    tiny: Float[Array, ""]
    halt: Bool[Array, ""]

    @property
    def rtol(self):
        return self.pid.rtol

    @property
    def atol(self):
        return self.pid.atol

    @property
    def norm(self):
        return self.pid.norm

    def wrap(self, direction):
        return _GuardedController(self.pid.wrap(direction), self.tiny, self.halt)

    def init(self, terms, t0, t1, y0, dt0, args, func, error_order):
        return self.pid.init(terms, t0, t1, y0, dt0, args, func, error_order)

    def adapt_step_size(self, t0, t1, y0, y1_candidate, args, y_error, error_order, controller_state):
        keep, tprev, tnext, made_jump, state, result = self.pid.adapt_step_size(
            t0, t1, y0, y1_candidate, args, y_error, error_order, controller_state)
        collapsed = ~_all_finite(y_error) & ~(jnp.abs(t1 - t0) > self.tiny)
        stuck = self.halt | ~_all_finite(y0) | (~keep & collapsed)
        result = diffrax.RESULTS.where(stuck, diffrax.RESULTS.dt_min_reached, result)
        return keep & ~stuck, tprev, tnext, made_jump, state, result


def _guarded_controller(rtol, atol, t0, t1, dtype, halt) -> _GuardedController:
    """The step-size control of :func:`~jaxmb.simulate`: PID at `rtol`, `atol`, with the
    norm of :class:`_StateRMSNorm`, that gives up once a non-finite step has shrunk below
    10 ulp of the larger of ``|t0|``, ``|t1|``, or at the first step where `halt`."""
    span = jnp.maximum(jnp.abs(jnp.asarray(t0, dtype)), jnp.abs(jnp.asarray(t1, dtype)))
    tiny = 10.0 * jnp.finfo(dtype).eps * jnp.maximum(span, 1.0)
    return _GuardedController(diffrax.PIDController(rtol=rtol, atol=atol, norm=_StateRMSNorm()), tiny,
                              jnp.asarray(halt))


def _singular(m: Float[Array, "nq nq"]) -> Bool[Array, ""]:
    """Whether the symmetric `m` is not positive definite to within rounding: its
    smallest eigenvalue below ``10 nq eps`` times its largest (or not finite)."""
    ev = jnp.linalg.eigvalsh(m)
    return ~(ev[0] > 10.0 * m.shape[0] * jnp.finfo(m.dtype).eps * ev[-1])


# Jitted so that its trace (a mass matrix, which for a large model is most of the
# compile time) is made once and shared by the two checks below and by later solves.
@eqx.filter_jit
def _singular_at(model: Model, warm: tuple, y: SimulationState, check) -> Bool[Array, ""]:
    """Whether ``M(q)`` is singular at `y` (checked only where `check`; q replaced by
    zeros where not finite, so that a loop's solve does not see NaN)."""

    def singular():
        q = jnp.where(jnp.all(jnp.isfinite(y.q)), y.q, jnp.zeros_like(y.q))
        m = mass_matrix(_warm_started(model, warm, y.loops)[0], q)
        return _singular(m) & _all_finite(m)

    return jax.lax.cond(jnp.any(check), singular, lambda: jnp.asarray(False))


def _start_code(model: Model, warm: tuple, y0: SimulationState):
    """What is wrong with the initial state before any step: ``nonfinite_state`` if a
    component is not finite, ``singular_mass_matrix`` if ``M(q0)`` is singular, else
    ``successful``."""
    finite = _all_finite((y0.q, y0.qd, y0.controller))
    singular = _singular_at(model, warm, y0, finite)
    return RESULTS.where(~finite, RESULTS.nonfinite_state,
                         RESULTS.where(singular, RESULTS.singular_mass_matrix, RESULTS.successful))


def _diagnose(model: Model, warm: tuple, result, loop_result, y_end: SimulationState):
    """The :class:`~jaxmb.RESULTS` item of a run that diffrax ended with `result` at
    `y_end`: a loop's code (`loop_result`) for the step-end event, for a run that gave up
    (``dt_min_reached`` from :class:`_GuardedController`) or ran out of steps the cause
    seen at the end state (a non-finite state, a singular mass matrix), else
    ``max_steps_reached`` or ``solver_failed``."""
    finite = _all_finite((y_end.q, y_end.qd, y_end.controller))
    failed = (result == diffrax.RESULTS.dt_min_reached) | (result == diffrax.RESULTS.max_steps_reached)
    singular = _singular_at(model, warm, y_end, failed & finite) & finite
    gave_up = result == diffrax.RESULTS.dt_min_reached
    stopped = RESULTS.where(gave_up, RESULTS.nonfinite_state,
                            RESULTS.where(result == diffrax.RESULTS.max_steps_reached, RESULTS.max_steps_reached,
                                          RESULTS.solver_failed))
    stopped = RESULTS.where(failed & ~finite, RESULTS.nonfinite_state, stopped)
    stopped = RESULTS.where(singular, RESULTS.singular_mass_matrix, stopped)
    stopped = RESULTS.where(result == diffrax.RESULTS.event_occurred, loop_result, stopped)
    return RESULTS.where(result == diffrax.RESULTS.successful, RESULTS.successful, stopped)
