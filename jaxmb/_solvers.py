"""The integrators jaxmb hands to diffrax: solvers by name, the stage root finder of
its implicit solvers, and the wrapper that makes diffrax trace a vector field once."""

import re
from collections.abc import Callable

import diffrax
import equinox as eqx
import jax.numpy as jnp
import optimistix as optx

from ._errors import warn


class _TracedOnce(eqx.Module):
    """A vector field that diffrax traces once per solve. diffrax evaluates it at several
    places of its program (initial step size, first stage, the stage loop, the step-end
    event), each a fresh trace of the whole dynamics; through one jit-compiled call the
    first trace is reused by the others (and by later solves of the same structure), and
    XLA inlines the call, so the compiled program is the same . Used by
    `simulate` and `simulate_dae`."""

    field: Callable

    def __call__(self, t, y, args):
        return _call_field(self.field, t, y, args)


@eqx.filter_jit
def _call_field(field, t, y, args):
    # diffeqsolve's own filter_jit already needs the field's static parts hashable.
    return field(t, y, args)


class _VeryChord(diffrax.VeryChord):
    """diffrax's per-step chord iteration for implicit Runge-Kutta stages, stopped as
    Hairer & Wanner (*Solving ODEs II*, IV.8, Eq. 8.10-8.11) stop it: with the rate
    ``θ_k = ‖Δ_k‖ / ‖Δ_{k-1}‖`` (scaled by the step's tolerances), converged once
    ``θ_k / (1 - θ_k) ‖Δ_k‖ < κ``, failed only if ``θ_k > 2`` (or not finite).

    Why not diffrax's own: in diffrax 0.7.2 ``VeryChord.terminate`` reports every
    iteration that has not converged yet as diverged, and optimistix 0.1.0 ends a
    root find at the first unsuccessful result. So each stage got at most two
    iterations, and a stage that needed a third failed and rejected the step:
    Kvaerno5 took several times the steps of Tsit5 on Andrews' squeezer and on Watanabe
    and Duarte's double pendulum, most of them rejected (``tests/test_simulate.py``).
    diffrax PR #754 fixes it upstream, after 0.7.2. The
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
    after at most two iterations as diffrax 0.7.2's own does. For another implicit solver:

    ```python
    mb.simulate(model, q0, qd0, t1, solver=diffrax.Kvaerno3(root_finder=mb.stage_root_finder()))
    ```

    **Returns:**

    A `diffrax.VeryChord` root finder that takes its tolerances from the step-size
    controller's `rtol` and `atol`.
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
    if not isinstance(solver, (str, diffrax.AbstractSolver)):
        raise TypeError(f"{caller}: solver must be a name ({', '.join(sorted(_SOLVERS))}) or a diffrax solver, "
                        f"got {type(solver).__name__}.")
    if not isinstance(solver, str):
        root_finder = getattr(solver, "root_finder", None)
        if (_STOCK_VERYCHORD_STOPS_EARLY and isinstance(root_finder, diffrax.VeryChord)
                and not isinstance(root_finder, _VeryChord)):
            warn(
                f"{caller}: {type(solver).__name__} with diffrax's VeryChord root finder gives each "
                f"implicit stage at most two iterations (diffrax {diffrax.__version__}), and a stage that needs a "
                "third rejects the step (several times the steps; see the docs, Concepts: dynamics routes, \"Simulation\"). Pass "
                "solver=\"kvaerno5\", or build the solver with root_finder=jaxmb.stage_root_finder().",
                UserWarning)
        return solver
    try:
        return _SOLVERS[solver.lower()]()
    except KeyError:
        raise ValueError(f"{caller}: unknown solver {solver!r}; choose from {sorted(_SOLVERS)}.") from None
