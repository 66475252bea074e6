"""Closed kinematic chains at the joint-function level: joint variables defined implicitly.

Ehsani (2016), section 3-3: when joint variables are tied by algebraic constraints
``g(f_dep, q) = 0`` (m equations in the m dependent joint variables ``f_dep``, given
the nq independent coordinates ``q``), each dependent variable is still a smooth
function ``f_k(q)`` away from singular configurations, and the embedded equations of
motion in ``q`` are an ODE without constraint drift. This module provides

* `LoopClosure`: the constraint function, its parameters (array leaves) and
  a reference assembly (the branch); `LoopClosure.solve` solves ``g = 0`` by
  Newton's method (optimistix) and reports convergence, conditioning and branch as
  a `RESULTS` code; calling the closure gives ``f_dep(q)``, exactly
  differentiable to any order by the implicit function theorem;
* closed forms of the first and second derivatives by implicit differentiation
  (Ehsani 2016, Eq. 101; `LoopClosure.derivatives`, `LoopClosure.rates`);
* `ImplicitJointFunction`: the k-th dependent variable as a joint function.

A model records which of its joints share a loop (``Model.loops``), and kinematics
solves each loop once per state and hands every joint its share
(`LoopClosure.joint_outputs`, `ImplicitJointFunction.share`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
from jaxtyping import Array, Float, Int

from . import _loop_solve as _ls
from ._checks import flag, float_array, is_concrete, is_count
from ._functions import AbstractJointFunction
from ._results import RESULTS
from ._typing import RealLike

# Integer views of the loop codes of RESULTS (a member's index), for jaxmb._simulate,
# which checks LoopClosure._status codes as integers.
SUCCESS = int(RESULTS.successful._value)
RESULT_MESSAGES = {int(r._value): RESULTS[r] for r in (RESULTS.successful, RESULTS.loop_not_converged,
                                                        RESULTS.loop_singular, RESULTS.loop_wrong_branch)}


# What to change on the LoopClosure, by result code.
_HINTS = {int(RESULTS.loop_wrong_branch._value): " (LoopClosure arguments: guess, continuation_step, n_continuation, "
          "q_ref, branch_fn)",
          int(RESULTS.loop_singular._value): " (reciprocal condition number of dg/df below rcond_min)"}


class LoopClosureError(ValueError):
    """A loop closure could not be built or solved at the requested ``q`` (see the message)."""


class LoopSolution(eqx.Module):
    """What `LoopClosure.solve` returns.

    - `f`: (m,) dependent joint variables (rad or m).
    - `result`: a `RESULTS` member: ``successful``,
      ``loop_not_converged``, ``loop_singular`` or ``loop_wrong_branch``
      (``RESULTS[sol.result]`` is the message).
    - `residual`: ``max |g(f, q)|``, in the units of ``g`` (m for a position closure).
    - `rcond`: reciprocal condition number ``σ_min/σ_max`` of ``∂g/∂f``; for one
      dependent variable (m = 1), ``|∂g/∂f| / ‖∂g/∂(f, q)‖``.
    - `num_steps`: Newton iterations.
    """

    f: Float[Array, " m"]
    result: RESULTS
    residual: Float[Array, ""]
    rcond: Float[Array, ""]
    num_steps: Int[Array, ""]

    @property
    def ok(self):
        return self.result == RESULTS.successful


class LoopClosure(eqx.Module):
    """Loop-closure equations ``g(f_dep, q, params) = 0`` defining m dependent joint variables.

    **Arguments:**

    - `fn`: JAX callable ``fn(f_dep, q, params) -> (m,)`` (static; twice differentiable).
    - `q_ref`, `f_ref`: (nq,) and (m,), rad or m: a reference assembly,
      ``fn(f_ref, q_ref, params) ≈ 0``; it
      selects the assembly branch (used as the start of the continuation when no
      `guess` is given; polished by Newton at construction when concrete). A
      reference that Newton moves by more than `ref_tol`, or a `guess` whose solve
      at `q_ref` lands elsewhere than the reference, is an error: the loop would
      otherwise follow another assembly than the one meant.
    - `params`: pytree of array leaves (lengths, ...), differentiable.
    - `guess`: optional static ``guess(q, params) -> (m,)``: the initial Newton
      iterate at ``q`` (e.g. a closed-form approximation on the chosen branch or a
      pre-modeled fit). Without it, Newton starts from a continuation along the
      straight path from `q_ref` to ``q`` (the path must stay inside the range of
      motion): at least `n_continuation` steps, and steps of at most
      `continuation_step` in every coordinate of ``q`` (its units; None: exactly
      `n_continuation` steps), so that a ``q`` several turns of a crank away stays
      on the branch.
    - `branch_fn`: optional static ``branch_fn(f_dep, q, params) -> scalar`` whose
      sign identifies the branch; a solution whose sign differs from that at the
      reference is flagged ``RESULTS.loop_wrong_branch``. Without it, the sign of
      ``det ∂g/∂f`` serves: it cannot change along a branch without passing a
      singular configuration, so a solution where it differs from the reference's
      lies on another assembly (the mirror image of a four-bar or slider-crank, say).
      The converse does not hold: assemblies with the same sign are not told apart,
      and a `branch_fn` or a `guess` on the branch is then the way to keep it.
    - `name`: the mechanism's name (appears in error messages).
    - `rtol`, `atol`, `max_steps`: Newton's tolerances (optimistix) and step limit.
    - `rcond_min`: below this reciprocal condition number of ``∂g/∂f`` the
      configuration counts as singular.
    - `throw`: raise (`LoopClosureError` eagerly, ``eqx.error_if`` under
      jit) when a solve fails; with ``throw=False`` check ``solve(q).result``
      (`simulate` then checks the solve at the end of every step rather
      than in every right-hand side: ``Solution.loop_results``).
    - `variable_names`: names of the m dependent variables (documentation).
    - `ref_tol`: how far (in the units of ``f``, every component) Newton may move
      `f_ref` at `q_ref` before the reference counts as far from any assembly.

    A copy made by `warm_started` holds a `start`, Newton's first iterate at
    every ``q`` in place of the guess or the continuation: [`jaxmb.simulate`][jaxmb.simulate]
    carries the dependent variables along the motion and starts each solve from
    them.
    """

    fn: Callable = eqx.field(static=True)
    params: Any
    q_ref: Float[Array, " nq"]
    f_ref: Float[Array, " m"]
    guess: Callable | None = eqx.field(static=True)
    branch_fn: Callable | None = eqx.field(static=True)
    branch: int = eqx.field(static=True)
    name: str = eqx.field(static=True)
    rtol: float = eqx.field(static=True)
    atol: float = eqx.field(static=True)
    max_steps: int = eqx.field(static=True)
    n_continuation: int = eqx.field(static=True)
    continuation_step: float | None = eqx.field(static=True)
    rcond_min: float = eqx.field(static=True)
    throw: bool = eqx.field(static=True)
    variable_names: tuple[str, ...] = eqx.field(static=True)
    start: Float[Array, " m"] | None

    def __init__(self, fn: Callable, q_ref: RealLike, f_ref: RealLike, params: Any = None, *,
                 guess: Callable | None = None, branch_fn: Callable | None = None,
                 name: str = "loop", rtol: float = 1e-12, atol: float = 1e-12, max_steps: int = 50,
                 n_continuation: int = 8, continuation_step: float | None = 0.25,
                 rcond_min: float = 1e-9, throw: bool = True,
                 variable_names: Sequence[str] | None = None, ref_tol: float = 1e-2):
        self.fn = fn
        self.params = params
        self.q_ref = jnp.atleast_1d(float_array(q_ref))
        self.f_ref = jnp.atleast_1d(float_array(f_ref))
        self.guess = guess
        self.start = None
        self.branch_fn = branch_fn
        self.name = str(name)
        self.rtol, self.atol = float(rtol), float(atol)
        if not (0.0 < self.rtol < np.inf and 0.0 < self.atol < np.inf and is_count(max_steps, 1)):
            # Newton would stop at once (or never): "no assembly near f_ref" at a solved reference.
            raise LoopClosureError(f"LoopClosure {name!r}: rtol and atol must be positive finite numbers and "
                                   f"max_steps an integer >= 1, got rtol={rtol!r}, atol={atol!r}, "
                                   f"max_steps={max_steps!r}.")
        self.max_steps = int(max_steps)
        self.n_continuation = max(int(n_continuation), 1)
        if continuation_step is not None and not float(continuation_step) > 0.0:
            raise LoopClosureError(f"LoopClosure {name!r}: continuation_step must be positive (or None for "
                                   f"exactly n_continuation steps), got {continuation_step!r}.")
        self.continuation_step = None if continuation_step is None else float(continuation_step)
        self.rcond_min = float(rcond_min)
        self.throw = flag(throw, f"LoopClosure {name!r}: throw")
        m = self.f_ref.shape[0]
        self.variable_names = tuple(variable_names) if variable_names is not None else tuple(
            f"f{k}" for k in range(m))
        out = jax.eval_shape(lambda f, q: fn(f, q, params), self.f_ref, self.q_ref)
        if out.shape != (m,):
            raise LoopClosureError(
                f"LoopClosure {name!r}: fn must return m = {m} residuals (one per dependent "
                f"variable, the length of f_ref), got shape {out.shape}.")
        self.branch = 0
        if is_concrete((self.f_ref, self.q_ref, params)):
            self._check_reference(float(ref_tol))

    def _check_reference(self, ref_tol: float):
        """Polish the reference assembly by Newton, check that it is near the given one
        (and that `guess` at `q_ref` leads to it), and record its branch sign."""
        name = self.name
        at = f"at q_ref = {np.asarray(self.q_ref).tolist()}"
        given = np.asarray(self.f_ref)
        residual = float(np.max(np.abs(np.asarray(self.residual(self.f_ref, self.q_ref)))))
        sol = _ls.newton(self, self.q_ref, self.f_ref)
        if not bool(sol.result == optx.RESULTS.successful):
            raise LoopClosureError(
                f"LoopClosure {name!r}: no assembly near f_ref = {given.tolist()} {at} (max |g(f_ref, q_ref)| = "
                f"{residual:.3g}); give f_ref on the intended assembly, nearer a solution.")
        moved = float(np.max(np.abs(np.asarray(sol.value) - given)))
        if not moved <= ref_tol:
            raise LoopClosureError(
                f"LoopClosure {name!r}: the reference assembly f_ref = {given.tolist()} {at} is far from a "
                f"solution (max |g(f_ref, q_ref)| = {residual:.3g}); Newton moved it by {moved:.3g} > ref_tol = "
                f"{ref_tol:g}, to {np.asarray(sol.value).tolist()}, which may be another assembly. Give f_ref "
                "on the intended assembly to within ref_tol (a closed form or a solve at q_ref), or raise ref_tol "
                "if that solution is the one meant.")
        self.f_ref = sol.value
        if self.guess is not None:
            from_guess = _ls.newton(self, self.q_ref, jnp.asarray(self.guess(self.q_ref, self.params),
                                                                  dtype=self.f_ref.dtype))
            off = float(np.max(np.abs(np.asarray(from_guess.value) - np.asarray(self.f_ref))))
            if not (bool(from_guess.result == optx.RESULTS.successful) and off <= ref_tol):
                raise LoopClosureError(
                    f"LoopClosure {name!r}: the solve from guess(q_ref) {at} does not reach the reference "
                    f"assembly f_ref = {np.asarray(self.f_ref).tolist()} (it ends {off:.3g} away, at "
                    f"{np.asarray(from_guess.value).tolist()}): guess and f_ref name different assemblies. "
                    "Make guess return the reference's assembly, or give f_ref on the guess's.")
        _, _, rcond = self._result(self.f_ref, self.q_ref, True)
        if not float(rcond) >= self.rcond_min:
            raise LoopClosureError(
                f"LoopClosure {name!r}: the reference assembly {at} is singular (reciprocal condition "
                f"number of dg/df {float(rcond):.2e} < rcond_min = {self.rcond_min:g}), so it names no "
                "branch; choose a q_ref inside the range of motion.")
        s = float(self._branch_sign(self.f_ref, self.q_ref))
        if s == 0.0:
            raise LoopClosureError(
                f"LoopClosure {name!r}: the reference lies on a branch boundary ("
                + ("branch_fn" if self.branch_fn is not None else "det dg/df, a singular configuration")
                + " is 0 there); choose another q_ref/f_ref.")
        self.branch = 1 if s > 0 else -1

    # -- sizes -------------------------------------------------------------
    @property
    def m(self) -> int:
        return self.f_ref.shape[0]

    @property
    def nq(self) -> int:
        return self.q_ref.shape[0]

    # -- residual and its derivatives -------------------------------------
    def residual(self, f, q):
        """``g(f, q)`` (m,) for ``f`` (m,) and ``q`` (nq,) (rad or m), in ``g``'s units."""
        return self.fn(f, q, self.params)

    def jacobians(self, f, q):
        """``(∂g/∂f (m, m), ∂g/∂q (m, nq))`` at ``f`` (m,) and ``q`` (nq,), by forward-mode autodiff."""
        gf, gq = jax.jacfwd(self.residual, argnums=(0, 1))(f, q)
        return gf, gq

    # -- solving -------------------------------------------------------------
    def warm_started(self, start: RealLike) -> "LoopClosure":
        """This loop with Newton started from `start` (m,) at every ``q``: a solution
        at a nearby ``q`` (the previous state of a simulation), so that a solve takes
        one or two iterations and stays on its branch however far ``q`` is from
        `q_ref`. The branch is still checked against the reference."""
        return eqx.tree_at(lambda c: c.start, self, jnp.asarray(start), is_leaf=lambda x: x is None)

    def initial_guess(self, q):
        """The first Newton iterate at ``q`` (no gradient flows through it): the
        `start` of a `warm_started` copy, else `guess`, else the continuation."""
        q = jax.lax.stop_gradient(q)
        if self.start is not None:
            return jax.lax.stop_gradient(self.start.astype(q.dtype))
        if self.guess is not None:
            return jax.lax.stop_gradient(jnp.asarray(self.guess(q, self.params), dtype=q.dtype))
        return _ls.continuation(self, q)

    def _as_q(self, q):
        q = jnp.atleast_1d(float_array(q))
        if q.shape != (self.nq,):
            raise LoopClosureError(f"LoopClosure {self.name!r}: q must have shape ({self.nq},), got {q.shape}.")
        return q

    def solve(self, q: RealLike, f0: RealLike | None = None, *, throw: bool | None = None) -> LoopSolution:
        """Solve ``g(f, q) = 0`` for ``f`` by Newton's method, warm-started at `f0`
        (default: `initial_guess`). Works under ``jit``, ``vmap`` and autodiff
        (the derivative of ``.f`` comes from the implicit function theorem).

        **Arguments:**

        - `q`: (nq,) coordinates, rad or m.
        - `f0`: (m,) first Newton iterate (the dependent variables' units), or None.
        - `throw`: raise on failure (`LoopClosureError` eagerly, through
          ``eqx.error_if`` with the `RESULTS` message under jit);
          default: the closure's. With ``throw=False`` inspect ``.result``.

        **Returns:** a `LoopSolution`.
        """
        throw = self.throw if throw is None else throw
        q = self._as_q(q)
        if is_concrete((self, q, f0)):
            sol = _ls.solve_compiled(self, q, f0)
            return eqx.tree_at(lambda s: s.f, sol, self._check(sol.f, sol.result, q)) if throw else sol
        y0 = self.initial_guess(q) if f0 is None else jax.lax.stop_gradient(jnp.asarray(f0, dtype=q.dtype))
        sol = _ls.newton(self, q, y0)
        f = sol.value
        code, residual, rcond = self._result(f, q, sol.result == optx.RESULTS.successful)
        if throw:
            f = self._check(f, code, q)
        return LoopSolution(f=f, result=code, residual=residual, rcond=rcond, num_steps=sol.stats["num_steps"])

    def _branch_sign(self, f, q, gf=None):
        """The scalar whose sign names the assembly branch: `branch_fn`, else ``det ∂g/∂f``
        (`gf`, when the caller has it)."""
        if self.branch_fn is not None:
            return self.branch_fn(f, q, self.params)
        return jnp.linalg.det(jax.jacfwd(self.residual)(f, q) if gf is None else gf)

    def _result(self, f, q, converged):
        """``(code, max |g|, rcond)`` of a solution `f` at `q` (values only)."""
        fs, qs = jax.lax.stop_gradient(f), jax.lax.stop_gradient(q)
        g = self.residual(fs, qs)
        gf = jax.jacfwd(self.residual)(fs, qs)
        sv = jnp.linalg.svd(gf, compute_uv=False)
        rcond = self._scalar_rcond(fs, qs, gf) if gf.shape == (1, 1) else sv[-1] / jnp.maximum(
            sv[0], jnp.finfo(sv.dtype).tiny)
        residual = jnp.max(jnp.abs(g))
        converged = converged & jnp.isfinite(residual)
        return self._code(fs, qs, converged, rcond, gf), residual, rcond

    def _scalar_rcond(self, f, q, gf):
        """The conditioning of a loop of one dependent variable: ``|∂g/∂f| / ‖∂g/∂(f, q)‖``.
        The ratio of singular values of a 1 x 1 ``∂g/∂f`` is 1 wherever it is not zero, so
        it would never flag the configurations where ``f(q)`` turns (``∂g/∂f → 0``, ``df/dq``
        unbounded); measured against the constraint's whole gradient it tends to 0 there."""
        gq = jax.jacfwd(self.residual, argnums=1)(f, q)
        whole = jnp.sqrt(gf[0, 0] ** 2 + jnp.sum(gq**2))
        return jnp.abs(gf[0, 0]) / jnp.maximum(whole, jnp.finfo(whole.dtype).tiny)

    def _code(self, f, q, converged, rcond, gf) -> RESULTS:
        """The result of a solution `f` at `q`: ``loop_not_converged`` unless
        `converged` and finite, ``loop_singular`` where `rcond` is below ``rcond_min``
        (or NaN), ``loop_wrong_branch`` where the branch sign (from ``∂g/∂f`` = `gf`
        without a `branch_fn`) is not the reference's."""
        converged = converged & jnp.all(jnp.isfinite(f))
        singular = ~(rcond >= self.rcond_min)  # NaN counts as singular
        wrong = jnp.asarray(False)
        if self.branch != 0:
            wrong = jnp.sign(self._branch_sign(f, q, gf)) != self.branch
        code = RESULTS.where(wrong, RESULTS.loop_wrong_branch, RESULTS.successful)
        code = RESULTS.where(singular, RESULTS.loop_singular, code)
        return RESULTS.where(converged, code, RESULTS.loop_not_converged)

    def _factored_newton(self, q):
        """`factored_newton` from `initial_guess`:
        stop-gradient ``(f, ∂g/∂f, (∂g/∂f)⁻¹, converged)``."""
        q = jax.lax.stop_gradient(q)
        return _ls.factored_newton(self, q, self.initial_guess(q))

    def _factored_solve(self, q):
        """`_factored_newton` and the result of its solution, as `_result` gives it but without an SVD (which
        on CPU costs more than the whole solve): the reciprocal condition number is
        estimated from Newton's last ``∂g/∂f`` and its inverse,
        ``1 / (‖∂g/∂f‖_F ‖(∂g/∂f)⁻¹‖_F)``, between ``rcond / m`` and ``rcond``; the
        branch sign is taken from the same ``∂g/∂f``. Values only: ``(f, inverse, code)``."""
        q = jax.lax.stop_gradient(q)
        f, jacobian, inverse, converged = self._factored_newton(q)
        rcond = (self._scalar_rcond(f, q, jacobian) if jacobian.shape == (1, 1)
                 else 1.0 / (jnp.linalg.norm(jacobian) * jnp.linalg.norm(inverse)))
        return f, inverse, self._code(f, q, converged, rcond, jacobian)

    def _status(self, q) -> Int[Array, ""]:
        """The result (as the integer index of its `RESULTS` member) of
        the solve that `rates` makes at ``q``, which is what it checks with
        ``throw=True``. Values only."""
        return self._factored_solve(q)[2]._value

    def _message(self, code: RESULTS | int, q=None) -> str:
        where = "" if q is None else f" at q = {np.array2string(np.asarray(q), precision=17)}"
        code = int(code._value) if isinstance(code, RESULTS) else int(code)
        hint = _HINTS.get(code, "")
        return (f"LoopClosure {self.name!r}{where}: {RESULT_MESSAGES[code]}{hint}. Pass throw=False to the "
                "LoopClosure to get a result instead (LoopClosure.solve(q).result, a jaxmb.RESULTS member).")

    def _check(self, f, code: RESULTS, q):
        """`f`, raising when `code` is not ``RESULTS.successful``: eagerly a
        `LoopClosureError` naming the loop and ``q``; under jit through
        ``eqx.branched_error_if`` with the message (``q`` printed on failure)."""
        c = code._value
        if is_concrete(c) and is_concrete(q):
            c = np.asarray(c)
            if np.any(c != SUCCESS):
                raise LoopClosureError(self._message(int(c.ravel()[np.argmax(c.ravel() != SUCCESS)]), q))
            return f

        def _report(c, qq):
            c = np.asarray(c)
            if np.any(c != SUCCESS):
                bad = np.asarray(qq)[c != SUCCESS] if c.ndim else qq
                print(f"jaxmb: LoopClosure {self.name!r} failed (code {c.ravel().tolist()}) at q = {bad}")

        # Print q only on failure (a host callback on every solve would cost more than
        # the solve). Under vmap a cond on a batched predicate would run the callback
        # once per batch element, unrolled into the program (compile time growing with
        # the batch size); the batching rule instead checks the whole batch at once.
        @jax.custom_batching.custom_vmap
        def report_on_failure(c, qq):
            jax.lax.cond(jnp.any(c != SUCCESS), lambda: jax.debug.callback(_report, c, qq), lambda: None)
            return c

        @report_on_failure.def_vmap
        def _report_batch(axis_size, in_batched, c, qq):
            c, qq = (x if batched else jnp.broadcast_to(x, (axis_size, *jnp.shape(x)))
                     for x, batched in zip((c, qq), in_batched))
            return report_on_failure(c, qq), True

        c = report_on_failure(c, jax.lax.stop_gradient(q))
        msgs = [self._message(k) + " (q printed above)" for k in sorted(RESULT_MESSAGES)]
        return eqx.branched_error_if(f, c != SUCCESS, c, msgs)

    def __call__(self, q: RealLike) -> Float[Array, " m"]:
        """``f_dep(q)`` through optimistix's root finder; ``jax.jacfwd``/``jax.hessian``
        of it are exact, by the implicit function theorem (``optx.ImplicitAdjoint``)."""
        return self.solve(q).f

    def value(self, q: RealLike) -> Float[Array, " m"]:
        """``f_dep(q)`` (m,) with a hand-written implicit-function JVP rule (first order
        ``df = -(∂g/∂f)⁻¹ (∂g/∂q dq + ∂g/∂p dp)``, Ehsani 2016, Eq. 101, nested for
        higher orders): the same derivatives as `__call__`, lighter to trace."""
        return _ls.implicit_value(self, self._as_q(q))

    # -- closed-form implicit derivatives ----------------------------------
    def gradient(self, q: RealLike, f: RealLike | None = None) -> Float[Array, "m nq"]:
        """``∂f/∂q = -(∂g/∂f)⁻¹ ∂g/∂q`` (m, nq) (Ehsani 2016, Eq. 101), at the solution
        `f` (m,) (solved here when None) of ``q`` (nq,)."""
        q = self._as_q(q)
        f = self.value(q) if f is None else f
        gf, gq = self.jacobians(f, q)
        return -jnp.linalg.solve(gf, gq)

    def derivatives(self, q: RealLike, f: RealLike | None = None):
        """``(f, ∂f/∂q, ∂²f/∂q²)`` from one solve, in closed form.

        With ``z = (f, q)`` and ``P = ∂z/∂q = [∂f/∂q; I]`` (m + nq, nq), twice
        differentiating ``g(f(q), q) = 0`` gives
        ``(∂g/∂f) H_k = -Pᵀ (∂²g/∂z²) P`` for every equation, i.e.
        ``H = -(∂g/∂f)⁻¹ [Pᵀ ∇²_z g_i P]_i`` (m, nq, nq).

        **Arguments:** `q` (nq,), rad or m; `f` (m,), the solution at `q` (solved here
        when None).

        **Returns:** `(f, grad, hess)`: (m,), (m, nq), (m, nq, nq).
        """
        q = self._as_q(q)
        f = self.value(q) if f is None else f
        m, nq = self.m, self.nq
        gf, gq = self.jacobians(f, q)
        jac = -jnp.linalg.solve(gf, gq)
        p = jnp.concatenate([jac, jnp.eye(nq, dtype=q.dtype)], axis=0)
        hz = jax.hessian(lambda z: self.residual(z[:m], z[m:]))(jnp.concatenate([f, q]))  # (m, m+nq, m+nq)
        t = jnp.einsum("za,izy,yb->iab", p, hz, p)
        hess = -jnp.linalg.solve(gf, t.reshape(m, nq * nq)).reshape(m, nq, nq)
        return f, jac, hess

    def hessian(self, q: RealLike, f: RealLike | None = None) -> Float[Array, "m nq nq"]:
        """``∂²f/∂q²`` (m, nq, nq) in closed form; see `derivatives`."""
        return self.derivatives(q, f)[2]

    def rates(self, q: RealLike, qd: RealLike):
        """``(f, ∂f/∂q, f', q'ᵀ H q')`` from one solve and one factorisation of ``∂g/∂f``.

        Differentiating ``g(f(q(t)), q(t)) = 0`` twice along the motion with
        ``z' = (f', q')``: ``g_f f' = -g_q q'`` and
        ``g_f (q'ᵀ H q') = -∂²g[z', z']`` (the second directional derivative of g,
        by nested forward mode; no Hessian of g is formed).

        **Arguments:** `q`, `qd` (nq,): coordinates (rad or m) and rates (rad/s or m/s).

        **Returns:** `(f, grad, fd, qHq)`: (m,), (m, nq), (m,), (m,); ``f'' = grad q'' + qHq``.
        """
        q = self._as_q(q)
        qd = jnp.asarray(qd, dtype=q.dtype)
        f, inverse, code = self._factored_solve(q)
        if self.throw:
            f = self._check(f, code, q)
        # Differentiable in q and the parameters by the implicit function theorem (the
        # same custom JVP as value()); the solves below reuse Newton's inverse for their
        # values and differentiate as solves with ∂g/∂f.
        f = _ls.implicit_at(self, q, f)
        m = self.m
        along_f = lambda x: jax.jvp(lambda ff: self.residual(ff, q), (f,), (x,))[1]  # noqa: E731
        gq = jax.jacfwd(self.residual, argnums=1)(f, q)
        jac = -_ls.solve_factored(along_f, inverse, gq)
        fd = jac @ qd
        g = lambda z: self.residual(z[:m], z[m:])  # noqa: E731
        z, zd = jnp.concatenate([f, q]), jnp.concatenate([fd, qd])
        d2g = jax.jvp(lambda x: jax.jvp(g, (x,), (zd,))[1], (z,), (zd,))[1]
        return f, jac, fd, -_ls.solve_factored(along_f, inverse, d2g)

    def _velocity_at(self, f, q, qd):
        """``f' = -(∂g/∂f)⁻¹ ∂g/∂q q'`` (m,) at a given `f`, near the solution at ``q``
        (no solve): the rate of a warm start carried along a motion, for which the
        solution's own rate (`rates`, a solve) is not needed."""
        gf, gq = self.jacobians(f, q)
        return -jnp.linalg.solve(gf, gq @ qd)

    def joint_outputs(self, method: str, *args):
        """What one solve of the loop gives every joint for the joint-function `method`
        (``"__call__"``, ``"gradient"``, ``"hessian"``, ``"rates"`` or
        ``"rates_and_gradient"`` of `ImplicitJointFunction`), for all m
        dependent variables at once; `ImplicitJointFunction.share` takes one's part."""
        if method == "__call__":
            return self.value(*args)
        if method == "gradient":
            return self.gradient(*args)
        if method == "hessian":
            return self.hessian(*args)
        if method in ("rates", "rates_and_gradient"):
            return self.rates(*args)
        raise ValueError(f"LoopClosure {self.name!r}: no joint output {method!r}.")


class ImplicitJointFunction(AbstractJointFunction):
    """The `index`-th dependent variable of a `LoopClosure`, as a joint function of q.

    The value solves the loop (Newton, warm-started by the closure's guess); the
    gradient and Hessian are the closed-form implicit derivatives (Ehsani 2016,
    Eq. 101); ``jax`` autodiff of the value is exact too (implicit function theorem).
    Called on its own, each call solves the loop; in a model, kinematics solves each
    loop once per state for all its joints (``Model.loops``).

    **Arguments:**

    - `closure`: the `LoopClosure`.
    - `index`: which of its m dependent variables (0-based).

    Usually made by `implicit_joint_functions`.
    """

    closure: LoopClosure
    index: int = eqx.field(static=True)

    def __check_init__(self):
        if not 0 <= self.index < self.closure.m:
            raise LoopClosureError(
                f"ImplicitJointFunction: index {self.index} out of range for loop "
                f"{self.closure.name!r} with {self.closure.m} dependent variables.")

    def share(self, method: str, outputs):
        """This variable's part of ``closure.joint_outputs(method, ...)``."""
        k = self.index
        if method in ("__call__", "gradient", "hessian"):
            return outputs[k]
        f, jac, fd, fdd = outputs
        if method == "rates":
            return f[k], fd[k], fdd[k]
        return f[k], fd[k], fdd[k], jac[k]

    def _own(self, method, *args):
        return self.share(method, self.closure.joint_outputs(method, *args))

    def __call__(self, q):
        return self._own("__call__", q)

    def coordinate_indices(self):
        return tuple(range(self.closure.nq))

    def gradient(self, q):
        return self._own("gradient", q)

    def hessian(self, q):
        return self._own("hessian", q)

    def rates(self, q, qd):
        return self._own("rates", q, qd)

    def rates_and_gradient(self, q, qd):
        return self._own("rates_and_gradient", q, qd)


def implicit_joint_functions(closure: LoopClosure) -> tuple[ImplicitJointFunction, ...]:
    """The dependent variables of a loop closure as joint functions of ``q``.

    Each ``f_k(q)`` solves ``g(f, q) = 0`` (Ehsani 2016, section 3-3), with
    derivatives by implicit differentiation (Eq. 101).

    **Arguments:**

    - `closure`: the `LoopClosure` (m dependent variables).

    **Returns:**

    A tuple of m `ImplicitJointFunction`s, the k-th for variable k, all holding this
    very closure (so that a model built from them records one loop, solved once per
    state).
    """
    return tuple(ImplicitJointFunction(closure, k) for k in range(closure.m))
