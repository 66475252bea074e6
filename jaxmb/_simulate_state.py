"""The state that [`jaxmb.simulate`][jaxmb.simulate] integrates, its vector field, its error norm,
and the guards that end a run whose state or dynamics stop making sense.

The state is a pytree (`SimulationState`): new kinds of state (muscle
activations, fibre lengths) are new fields, integrated with the mechanics. diffrax
integrates it laid out as one flat array (`_Layout`): diffrax combines the
Runge-Kutta stages, the error estimate and the step's accept/reject leaf by leaf, and
on a CPU each leaf's operations are small kernels of their own, which a cheap right-hand
side (a double pendulum, a PID controller) pays for at every step. One array keeps the
compiled solver loop the one it was before the state became a pytree; the vector field
reads its pytree view (slices) and writes its derivative as one array (a concatenation).
"""

from collections.abc import Callable
from typing import Any

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
from jaxtyping import Array, Bool, Float, PyTree

from ._kinematics import _closure_joints
from ._control import AbstractController
from ._dynamics import forward_dynamics, mass_matrix
from ._model import Model
from ._results import RESULTS


class SimulationState(eqx.Module):
    """What [`jaxmb.simulate`][jaxmb.simulate] integrates: a pytree, so that controller and (later)
    muscle states ride along with the mechanics.

    - `q`, `qd`: (nq,) generalized coordinates and their rates.
    - `controller`: the controller's state ``z`` (any pytree of arrays,
      `init`), or None without a controller.
    - `loops`: a tuple of one (m,) array per loop closure without a `guess` (None if
      there is none): its dependent variables carried along the motion (``w' = J q'``),
      where its Newton solve at the next right-hand side starts. They add no unknowns
      to the ODE in ``q`` (the dynamics use the solved ``f(q)``) and the step-size
      control leaves them out.

    Absent parts are None, not empty containers (diffrax's stage buffers take arrays
    only).

    In a `Solution` every leaf has a leading axis of save times.
    """

    q: Float[Array, "*T nq"]
    qd: Float[Array, "*T nq"]
    controller: PyTree[Array] | None = None
    loops: tuple[Array, ...] | None = None


class _Layout(eqx.Module):
    """Where each leaf of a `SimulationState` lies in the flat array that diffrax
    integrates: the leaves in pytree order (``q``, ``q'``, the controller's, the loops'),
    each flattened. The loops come last, so that the step-size control's norm can weigh
    the first `n_controlled` components only."""

    treedef: Any = eqx.field(static=True)
    shapes: tuple = eqx.field(static=True)
    n_controlled: int = eqx.field(static=True)

    @classmethod
    def of(cls, state: SimulationState) -> "_Layout":
        leaves, treedef = jax.tree.flatten(state)
        n_loops = sum(x.size for x in jax.tree.leaves(state.loops))
        return cls(treedef, tuple(x.shape for x in leaves), sum(x.size for x in leaves) - n_loops)

    def ravel(self, state: SimulationState) -> Float[Array, " n"]:
        return jnp.concatenate([jnp.reshape(x, (-1,)) for x in jax.tree.leaves(state)])

    def unravel(self, y: Float[Array, "*T n"]) -> SimulationState:
        """The state in `y` (n,), or the states in `y` (T, n), each leaf with the leading axes of `y`."""
        leaves, k = [], 0
        for shape in self.shapes:
            size = int(np.prod(shape, dtype=int))
            leaves.append(jnp.reshape(y[..., k:k + size], y.shape[:-1] + shape))
            k += size
        return jax.tree.unflatten(self.treedef, leaves)

    def norm(self):
        """The step-size control's norm: the RMS over every component of ``q``, ``q'`` and
        the controller state; the loops' warm-start variables are left out (they only
        start Newton solves)."""
        if self.n_controlled == sum(int(np.prod(shape, dtype=int)) for shape in self.shapes):
            return optx.rms_norm
        return _LeadingRMSNorm(self.n_controlled)


class _LeadingRMSNorm(eqx.Module):
    """The RMS norm of the first `n` components. A Module rather than a lambda, so that
    calls of `simulate` with equal arguments hit diffrax's compilation cache."""

    n: int = eqx.field(static=True)

    def __call__(self, e):
        return optx.rms_norm(e[:self.n])


def _warm_loops(model: Model) -> tuple:
    """For each loop without a `guess` (whose solves would otherwise start from a
    continuation from ``q_ref``, which fails far from it), the indices of the joints
    that are its variables."""
    return tuple(tuple(idx.values()) for closure, idx in _closure_joints(model) if closure.guess is None)


def _warm_started(model: Model, warm: tuple, loops: tuple | None):
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


def _initial_loops(model: Model, warm: tuple, q0) -> tuple | None:
    """The loops' variables at ``q0``: their solves from ``q_ref`` (None without loops)."""
    if not warm:
        return None
    return tuple(model.joints[idx[0]].function.closure.solve(q0).f.astype(q0.dtype) for idx in warm)


class _VectorField(eqx.Module):
    """``y' = (q', q'', z', w')`` on ``y = (q, q', z, w)`` (a `SimulationState`):
    the equations of motion ``M(q) q'' = tau + Q_ext - bias(q, q')`` (Ehsani 2016,
    Eq. 198) with ``tau`` the applied torque plus the controller's, the controller's
    ``z'``, and the loops' rates ``w' = J q'``."""

    model: Model
    torque: Callable
    controller: AbstractController | None
    layout: _Layout
    method: str = eqx.field(static=True)
    warm: tuple = eqx.field(static=True, default=())

    def __call__(self, t, flat, args):
        y = self.layout.unravel(flat)
        model, closures = _warm_started(self.model, self.warm, y.loops)
        tau = self.torque(t, y.q, y.qd)
        dz = None
        if self.controller is not None:
            tau = tau + self.controller.torque(t, y.q, y.qd, y.controller)
            dz = self.controller.state_derivative(t, y.q, y.qd, y.controller)
        qdd = forward_dynamics(model, y.q, y.qd, tau, method=self.method)
        # The carried loop variables' rates at the carried values: no second solve of
        # the loop (forward_dynamics has solved it once, from the same start).
        dw = tuple(jax.lax.stop_gradient(c._velocity_at(c.start, y.q, y.qd)) for c in closures)
        return self.layout.ravel(SimulationState(q=y.qd, qd=qdd, controller=dz, loops=dw if dw else None))


def _all_finite(tree) -> Bool[Array, ""]:
    leaves = [jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves(tree)]
    return jnp.all(jnp.stack(leaves)) if leaves else jnp.asarray(True)


class _GuardedController(diffrax.AbstractAdaptiveStepSizeController):
    """diffrax's PID step-size control (`pid`), which also ends the run when it cannot go
    on: when the accepted state is not finite, or when a step fails with a non-finite
    error although it has shrunk to the rounding level of the time (then the vector field
    is not finite at the accepted state itself: NaN or inf in the applied forces, a
    singular mass matrix). diffrax alone would keep rejecting steps until `max_steps`.
    It reports ``diffrax.RESULTS.dt_min_reached``; `_diagnose` names the cause."""

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


def _guarded_controller(rtol, atol, norm, t0, t1, dtype, halt) -> _GuardedController:
    """The step-size control of `simulate`: PID at `rtol`, `atol`, with the
    `norm` of the `_Layout`, that gives up once a non-finite step has shrunk below
    10 ulp of the larger of ``|t0|``, ``|t1|``, or at the first step where `halt`."""
    span = jnp.maximum(jnp.abs(jnp.asarray(t0, dtype)), jnp.abs(jnp.asarray(t1, dtype)))
    tiny = 10.0 * jnp.finfo(dtype).eps * jnp.maximum(span, 1.0)
    return _GuardedController(diffrax.PIDController(rtol=rtol, atol=atol, norm=norm), tiny,
                              jnp.asarray(halt))


def _singular(m: Float[Array, "nq nq"]) -> Bool[Array, ""]:
    """Whether the symmetric `m` is not positive definite to within rounding: a pivot of
    its Cholesky factorisation ``M = L Lᵀ`` below ``10 nq eps`` times its largest
    diagonal element (or not finite, where the factorisation fails)."""
    pivots = jnp.diagonal(jnp.linalg.cholesky(m)) ** 2
    return ~(jnp.min(pivots) > 10.0 * m.shape[0] * jnp.finfo(m.dtype).eps * jnp.max(jnp.diagonal(m)))


# Jitted so that its trace (a mass matrix, which for a large model is most of the
# compile time) is made once and shared by later solves.
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
    component is not finite, else ``successful``. A singular ``M(q0)`` is not checked
    here: its first step is not finite, the guarded controller gives up, and
    `_diagnose` names the cause at the end state (one mass matrix in the compiled
    program instead of two)."""
    finite = _all_finite((y0.q, y0.qd, y0.controller))
    return RESULTS.where(~finite, RESULTS.nonfinite_state, RESULTS.successful)


def _diagnose(model: Model, warm: tuple, result, loop_result, y_end: SimulationState):
    """The `RESULTS` item of a run that diffrax ended with `result` at
    `y_end`: a loop's code (`loop_result`) for the step-end event, for a run that gave up
    (``dt_min_reached`` from `_GuardedController`) or ran out of steps the cause
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
