"""Closed kinematic chains: joint variables defined implicitly by loop-closure equations.

Seed 001, section 3-3: when joint variables are tied by algebraic constraints
``g(f_dep, q) = 0`` (m equations in the m dependent joint variables ``f_dep``,
given the nq independent coordinates ``q``), each dependent variable is still a
smooth function ``f_k(q)`` away from singular configurations, and the embedded
equations of motion in ``q`` are an ODE without constraint drift. This module
provides

* :class:`LoopClosure`: the constraint function, its parameters (array leaves)
  and a reference assembly (the branch); :meth:`LoopClosure.solve` solves
  ``g = 0`` by Newton's method (optimistix) and reports convergence, conditioning
  and branch; calling the closure gives ``f_dep(q)``, exactly differentiable to
  any order by the implicit function theorem (optimistix's ``ImplicitAdjoint``).
* closed forms of the first and second derivatives by implicit differentiation
  (:meth:`LoopClosure.gradient`, :meth:`LoopClosure.hessian`),
* the seed's three alternatives: the analytical projection method (Eq. 100-120,
  :func:`projection_derivatives`), numerical differentiation on a computational
  molecule (Fig. 2, :func:`molecule_derivatives`) and pre-modeling (sweep, solve,
  fit; :func:`premodel`),
* :class:`ImplicitJointFunction`: the k-th dependent variable as a joint function,
* the traditional (constraint-Jacobian) kinematics of a closed model in all its
  joint variables (:func:`constraint_kinematics`, :func:`traditional_point_kinematics`)
  and the open tree of a model (:func:`open_tree`), used by the DAE baseline.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
from jaxtyping import Array, ArrayLike, Float, Int

from ._functions import AbstractJointFunction, Coordinate, CubicSpline, FourierSeries, QuinticSpline, _as_float_array
from ._model import Joint, Model

# Result codes of LoopClosure.solve.
SUCCESS = 0
NOT_CONVERGED = 1
SINGULAR = 2
WRONG_BRANCH = 3
RESULT_MESSAGES = {
    SUCCESS: "solved",
    NOT_CONVERGED: "Newton's method did not converge (no assembly near the initial guess, "
    "or q outside the range of motion)",
    SINGULAR: "singular configuration: dg/df is rank-deficient (reciprocal condition number "
    "below rcond_min); the dependent joint variables are not smooth functions of q here",
    WRONG_BRANCH: "the solve converged to another assembly branch than the chosen one (the sign "
    "of branch_fn, or of det dg/df without one, differs from the reference's); give the "
    "LoopClosure a guess(q, params) on the chosen branch (a closed form or a pre-modeled fit), "
    "shorter continuation steps (continuation_step, n_continuation) or a q_ref nearer the motion",
}


# The most steps a continuation takes, whatever the distance from q_ref.
_MAX_CONTINUATION = 100_000


class LoopClosureError(ValueError):
    """A loop closure could not be solved at the requested ``q`` (see the message)."""


def _is_concrete(tree) -> bool:
    """Whether `tree` holds no tracer (called eagerly, not under jit, vmap or grad)."""
    return not any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves(tree))


class _Residual(eqx.Module):
    """``(f, (q, params)) -> g``; a module (not a lambda) so that optimistix's
    compilation cache recognises the same loop across calls."""

    fn: Callable = eqx.field(static=True)

    def __call__(self, f, args):
        return self.fn(f, args[0], args[1])


class LoopSolution(eqx.Module):
    """What :meth:`LoopClosure.solve` returns.

    - `f`: (m,) dependent joint variables.
    - `result`: int code, 0 solved, 1 not converged, 2 singular, 3 wrong branch
      (see ``jaxmb.constraints.RESULT_MESSAGES``).
    - `residual`: ``max |g(f, q)|``.
    - `rcond`: reciprocal condition number ``σ_min/σ_max`` of ``∂g/∂f``.
    - `num_steps`: Newton iterations.
    """

    f: Float[Array, " m"]
    result: Int[Array, ""]
    residual: Float[Array, ""]
    rcond: Float[Array, ""]
    num_steps: Int[Array, ""]

    @property
    def ok(self):
        return self.result == SUCCESS


class LoopClosure(eqx.Module):
    """Loop-closure equations ``g(f_dep, q, params) = 0`` defining m dependent joint variables.

    **Arguments:**

    - `fn`: JAX callable ``fn(f_dep, q, params) -> (m,)`` (static; twice differentiable).
    - `q_ref`, `f_ref`: a reference assembly, ``fn(f_ref, q_ref, params) ≈ 0``; it
      selects the assembly branch (used as the start of the continuation when no
      `guess` is given; polished by Newton at construction when concrete).
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
      reference is flagged WRONG_BRANCH. Without it, the sign of ``det ∂g/∂f``
      serves: it cannot change along a branch without passing a singular
      configuration, so a solution where it differs from the reference's lies on
      another assembly (the mirror image of a four-bar or slider-crank, say). The
      converse does not hold: assemblies with the same sign are not told apart,
      and a `branch_fn` or a `guess` on the branch is then the way to keep it.
    - `name`: the mechanism's name (appears in error messages).
    - `rtol`, `atol`, `max_steps`: Newton's tolerances (optimistix) and step limit.
    - `rcond_min`: below this reciprocal condition number of ``∂g/∂f`` the
      configuration counts as singular.
    - `throw`: raise (:class:`LoopClosureError` eagerly, ``eqx.error_if`` under
      jit) when a solve fails; with ``throw=False`` check ``solve(q).result``
      (:func:`~jaxmb.simulate` then checks the solve at the end of every step rather
      than in every right-hand side: ``Solution.loop_results``).
    - `variable_names`: names of the m dependent variables (documentation).
    - `share`: share one solve per ``q`` between the joints of this loop within a
      trace (see :meth:`value`).

    A copy made by :meth:`warm_started` holds a `start`, Newton's first iterate at
    every ``q`` in place of the guess or the continuation: :func:`jaxmb.simulate`
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
    share: bool = eqx.field(static=True)
    start: Float[Array, " m"] | None

    def __init__(self, fn: Callable, q_ref: ArrayLike, f_ref: ArrayLike, params: Any = None, *,
                 guess: Callable | None = None, branch_fn: Callable | None = None,
                 name: str = "loop", rtol: float = 1e-12, atol: float = 1e-12, max_steps: int = 50,
                 n_continuation: int = 8, continuation_step: float | None = 0.25,
                 rcond_min: float = 1e-9, throw: bool = True,
                 variable_names: Sequence[str] | None = None, share: bool = True):
        self.fn = fn
        self.share = bool(share)
        self.params = params
        self.q_ref = jnp.atleast_1d(_as_float_array(q_ref))
        self.f_ref = jnp.atleast_1d(_as_float_array(f_ref))
        self.guess = guess
        self.start = None
        self.branch_fn = branch_fn
        self.name = str(name)
        self.rtol, self.atol = float(rtol), float(atol)
        self.max_steps = int(max_steps)
        self.n_continuation = max(int(n_continuation), 1)
        if continuation_step is not None and not float(continuation_step) > 0.0:
            raise LoopClosureError(f"LoopClosure {name!r}: continuation_step must be positive (or None for "
                                   f"exactly n_continuation steps), got {continuation_step!r}.")
        self.continuation_step = None if continuation_step is None else float(continuation_step)
        self.rcond_min = float(rcond_min)
        self.throw = bool(throw)
        m = self.f_ref.shape[0]
        self.variable_names = tuple(variable_names) if variable_names is not None else tuple(
            f"f{k}" for k in range(m))
        out = jax.eval_shape(lambda f, q: fn(f, q, params), self.f_ref, self.q_ref)
        if out.shape != (m,):
            raise LoopClosureError(
                f"LoopClosure {name!r}: fn must return m = {m} residuals (one per dependent "
                f"variable, the length of f_ref), got shape {out.shape}.")
        self.branch = 0
        if _is_concrete(self.f_ref) and _is_concrete(self.q_ref):
            # Polish the reference assembly and record its branch sign.
            sol = self._newton(self.q_ref, self.f_ref)
            if not bool(sol.result == optx.RESULTS.successful):
                raise LoopClosureError(
                    f"LoopClosure {name!r}: no assembly near f_ref = {np.asarray(self.f_ref)} at "
                    f"q_ref = {np.asarray(self.q_ref)}; give a better reference.")
            self.f_ref = sol.value
            _, _, rcond = self._result(self.f_ref, self.q_ref, True)
            if not float(rcond) >= self.rcond_min:
                raise LoopClosureError(
                    f"LoopClosure {name!r}: the reference assembly at q_ref = {np.asarray(self.q_ref)} is "
                    f"singular (reciprocal condition number of dg/df {float(rcond):.2e} < rcond_min = "
                    f"{self.rcond_min:g}), so it names no branch; choose a q_ref inside the range of motion.")
            s = float(self._branch_sign(self.f_ref, self.q_ref))
            if s == 0.0:
                raise LoopClosureError(
                    f"LoopClosure {name!r}: the reference lies on a branch boundary ("
                    + ("branch_fn" if branch_fn is not None else "det dg/df, a singular configuration")
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
        """``g(f, q)`` (m,)."""
        return self.fn(f, q, self.params)

    def jacobians(self, f, q):
        """``(∂g/∂f (m, m), ∂g/∂q (m, nq))``."""
        gf, gq = jax.jacfwd(self.residual, argnums=(0, 1))(f, q)
        return gf, gq

    # -- solving -------------------------------------------------------------
    def _newton(self, q, y0, rtol=None, atol=None, max_steps=None):
        rtol, atol = self._tolerances(y0.dtype, rtol, atol)
        solver = optx.Newton(rtol=rtol, atol=atol)
        return optx.root_find(_Residual(self.fn), solver, y0,
                              args=(q, self.params), max_steps=self.max_steps if max_steps is None else max_steps,
                              adjoint=optx.ImplicitAdjoint(), throw=False)

    def _tolerances(self, dtype, rtol=None, atol=None) -> tuple[float, float]:
        """Newton's ``(rtol, atol)`` (default: the loop's), raised to what `dtype` can
        resolve: in float32 the default 1e-12 is below round-off, and Newton would never
        stop; in float64 the defaults are left as they are."""
        floor = 16 * float(jnp.finfo(dtype).eps)
        return (max(self.rtol if rtol is None else rtol, floor), max(self.atol if atol is None else atol, floor))

    def warm_started(self, start: ArrayLike) -> "LoopClosure":
        """This loop with Newton started from `start` (m,) at every ``q``: a solution
        at a nearby ``q`` (the previous state of a simulation), so that a solve takes
        one or two iterations and stays on its branch however far ``q`` is from
        `q_ref`. The branch is still checked against the reference."""
        return eqx.tree_at(lambda c: c.start, self, jnp.asarray(start), is_leaf=lambda x: x is None)

    def initial_guess(self, q):
        """The first Newton iterate at ``q`` (no gradient flows through it): the
        `start` of a :meth:`warm_started` copy, else `guess`, else the continuation."""
        q = jax.lax.stop_gradient(q)
        if self.start is not None:
            return jax.lax.stop_gradient(self.start.astype(q.dtype))
        if self.guess is not None:
            return jax.lax.stop_gradient(jnp.asarray(self.guess(q, self.params), dtype=q.dtype))
        # No derivative flows through the continuation (that of the solution comes from
        # the implicit function theorem), so the loop sees no tangents, params' included.
        loop = jax.lax.stop_gradient(self)
        f, q_ref = loop.f_ref.astype(q.dtype), loop.q_ref.astype(q.dtype)
        n = self.n_continuation
        if self.continuation_step is not None:
            far = jnp.max(jnp.abs(q - q_ref)) / self.continuation_step
            # A non-finite q fails in Newton below, with its message, not in an endless loop.
            n = jnp.where(jnp.isfinite(far), jnp.clip(jnp.ceil(far), n, _MAX_CONTINUATION), n).astype(int)

        def step(s, f):
            qs = (q_ref + (s / n) * (q - q_ref)).astype(q.dtype)
            return loop._newton(qs, f, rtol=1e-8, atol=1e-8, max_steps=20).value

        return jax.lax.fori_loop(1, n, step, f)

    def solve(self, q: ArrayLike, f0: ArrayLike | None = None, *, throw: bool | None = None) -> LoopSolution:
        """Solve ``g(f, q) = 0`` for ``f`` by Newton's method, warm-started at `f0`
        (default: :meth:`initial_guess`). Works under ``jit``, ``vmap`` and autodiff
        (the derivative of ``.f`` comes from the implicit function theorem).
        With `throw` (default: the closure's), a failure raises; otherwise inspect
        ``.result``."""
        throw = self.throw if throw is None else throw
        q = jnp.atleast_1d(_as_float_array(q))
        if q.shape != (self.nq,):
            raise LoopClosureError(f"LoopClosure {self.name!r}: q must have shape ({self.nq},), got {q.shape}.")
        if _is_concrete((self, q, f0)):
            # Called eagerly: run compiled and cached. Op by op, the continuation's and
            # Newton's loops would compile anew on every call (about 0.4 s each).
            sol = _solve_compiled(self, q, f0)
            return eqx.tree_at(lambda s: s.f, sol, self._check(sol.f, sol.result, q)) if throw else sol
        y0 = self.initial_guess(q) if f0 is None else jax.lax.stop_gradient(jnp.asarray(f0, dtype=q.dtype))
        sol = self._newton(q, y0)
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
        rcond = sv[-1] / jnp.maximum(sv[0], jnp.finfo(sv.dtype).tiny)
        residual = jnp.max(jnp.abs(g))
        converged = converged & jnp.isfinite(residual)
        return self._code(fs, qs, converged, rcond, gf), residual, rcond

    def _code(self, f, q, converged, rcond, gf):
        """The result code of a solution `f` at `q`: NOT_CONVERGED unless `converged`
        and finite, SINGULAR where `rcond` is below ``rcond_min`` (or NaN), WRONG_BRANCH
        where the branch sign (from ``∂g/∂f`` = `gf` without a `branch_fn`) is not the
        reference's."""
        converged = converged & jnp.all(jnp.isfinite(f))
        singular = ~(rcond >= self.rcond_min)  # NaN counts as singular
        wrong = jnp.asarray(False)
        if self.branch != 0:
            wrong = jnp.sign(self._branch_sign(f, q, gf)) != self.branch
        code = jnp.where(~converged, NOT_CONVERGED,
                         jnp.where(singular, SINGULAR, jnp.where(wrong, WRONG_BRANCH, SUCCESS)))
        return code.astype(jnp.int32)

    def _factored_newton(self, q):
        """Newton from :meth:`initial_guess` that keeps its last ``(∂g/∂f)⁻¹``.

        Each iteration inverts the m x m ``∂g/∂f`` once (one LU, its triangular
        solves on the identity); the loop stops, like optimistix's Newton, when the
        step is below ``atol + rtol |f|`` in every component, which from a good
        guess (a closed form, a pre-modeled fit) is after one iteration. The last
        inverse, taken one (converged, so round-off sized) step before the returned
        ``f``, serves every solve of :meth:`rates` as a matrix product: a
        right-hand side of the dynamics costs one LU and two triangular solves
        instead of a root-finder loop, a second factorisation and four more
        triangular solves (LAPACK calls dominate at these sizes on CPU).
        Values only: returns stop-gradient ``(f, inverse, converged)``."""
        q = jax.lax.stop_gradient(q)
        params = jax.lax.stop_gradient(self.params)
        g = lambda f: self.fn(f, q, params)  # noqa: E731
        rtol, atol = self._tolerances(q.dtype)

        def step(f):
            jacobian = jax.jacfwd(g)(f)
            inverse = jnp.linalg.inv(jacobian)
            d = inverse @ g(f)
            return f - d, jacobian, inverse, d

        def small(f, d):
            return jnp.all(jnp.abs(d) <= atol + rtol * jnp.abs(f))

        def cond(c):
            f, _, _, d, k = c
            return ~small(f, d) & (k < self.max_steps) & jnp.all(jnp.isfinite(f))

        def body(c):
            return (*step(c[0]), c[4] + 1)

        f, jacobian, inverse, d, _ = jax.lax.while_loop(cond, body, (*step(self.initial_guess(q)), 1))
        return f, jacobian, inverse, small(f, d)

    def _factored_result(self, f, q, jacobian, inverse, converged):
        """The result code of :meth:`_factored_newton`'s solution, as :meth:`_result`
        gives it but without an SVD, which on CPU costs more than the whole solve: the
        reciprocal condition number is estimated from Newton's last ``∂g/∂f`` and its
        inverse, ``1 / (‖∂g/∂f‖_F ‖(∂g/∂f)⁻¹‖_F)``, which lies between ``rcond / m`` and
        ``rcond``; the branch sign is taken from the same ``∂g/∂f``. Both are taken one
        converged (round-off sized) Newton step before ``f``. Values only."""
        rcond = 1.0 / (jnp.linalg.norm(jacobian) * jnp.linalg.norm(inverse))
        return self._code(f, q, converged, rcond, jacobian)

    def _status(self, q):
        """The result code (:attr:`LoopSolution.result`) of the solve that :meth:`rates`
        makes at ``q``, which is what it checks with ``throw=True`` (see
        :meth:`_factored_result`). Values only."""
        f, jacobian, inverse, converged = self._factored_newton(q)
        return self._factored_result(f, jax.lax.stop_gradient(q), jacobian, inverse, converged)

    def _message(self, code: int, q=None) -> str:
        where = "" if q is None else f" at q = {np.array2string(np.asarray(q), precision=17)}"
        return (f"LoopClosure {self.name!r}{where}: {RESULT_MESSAGES[code]}. Pass throw=False to the "
                "LoopClosure to get a result flag instead (LoopClosure.solve(q).result).")

    def _check(self, f, code, q):
        if _is_concrete(code) and _is_concrete(q):
            c = np.asarray(code)
            if np.any(c != SUCCESS):
                first = int(c.ravel()[np.argmax(c.ravel() != SUCCESS)])
                raise LoopClosureError(self._message(first, q))
            return f

        def _report(c, qq):
            c = np.asarray(c)
            if np.any(c != SUCCESS):
                bad = np.asarray(qq)[c != SUCCESS] if c.ndim else qq
                print(f"jaxmb: LoopClosure {self.name!r} failed (code {c.ravel().tolist()}) at q = {bad}")

        # Print q only on failure (a host callback on every solve would cost ~1 ms).
        # Under vmap a cond on a batched predicate would run the callback once per batch
        # element, unrolled into the program (compile time growing with the batch
        # size); the batching rule instead checks the whole batch with one predicate.
        @jax.custom_batching.custom_vmap
        def report_on_failure(c, qq):
            jax.lax.cond(jnp.any(c != SUCCESS), lambda: jax.debug.callback(_report, c, qq), lambda: None)
            return c

        @report_on_failure.def_vmap
        def _report_batch(axis_size, in_batched, c, qq):
            c, qq = (x if batched else jnp.broadcast_to(x, (axis_size, *jnp.shape(x)))
                     for x, batched in zip((c, qq), in_batched))
            return report_on_failure(c, qq), True

        code = report_on_failure(code, jax.lax.stop_gradient(q))
        msgs = [self._message(k) + " (q printed above)" for k in range(4)]
        return eqx.branched_error_if(f, code != SUCCESS, code, msgs)

    def __call__(self, q: ArrayLike) -> Float[Array, " m"]:
        """``f_dep(q)`` through optimistix's root finder; ``jax.jacfwd``/``jax.hessian``
        of it are exact, by the implicit function theorem (``optx.ImplicitAdjoint``)."""
        return self.solve(q).f

    def value(self, q: ArrayLike) -> Float[Array, " m"]:
        """``f_dep(q)`` with a hand-written implicit-function JVP rule (first order
        ``df = -(∂g/∂f)⁻¹ (∂g/∂q dq + ∂g/∂p dp)``, nested for higher orders): the
        same derivatives as :meth:`__call__`, lighter to trace. Within one trace the
        solve at the same ``q`` object is shared by all joints of the loop (see
        :class:`ImplicitJointFunction`)."""
        return _shared(("value",), self, q, lambda: _implicit_value(self, jnp.atleast_1d(_as_float_array(q))))

    # -- closed-form implicit derivatives ----------------------------------
    def gradient(self, q: ArrayLike, f: ArrayLike | None = None) -> Float[Array, "m nq"]:
        """``∂f/∂q = -(∂g/∂f)⁻¹ ∂g/∂q`` (m, nq) (seed Eq. 101)."""
        q_in = q
        q = jnp.atleast_1d(_as_float_array(q))

        def compute():
            ff = self.value(q_in) if f is None else f
            gf, gq = self.jacobians(ff, q)
            return -jnp.linalg.solve(gf, gq)

        return compute() if f is not None else _shared(("gradient",), self, q_in, compute)

    def derivatives(self, q: ArrayLike, f: ArrayLike | None = None):
        """``(f, ∂f/∂q, ∂²f/∂q²)`` from one solve, in closed form.

        With ``z = (f, q)`` and ``P = ∂z/∂q = [∂f/∂q; I]`` (m + nq, nq), twice
        differentiating ``g(f(q), q) = 0`` gives
        ``(∂g/∂f) H_k = -Pᵀ (∂²g/∂z²) P`` for every equation, i.e.
        ``H = -(∂g/∂f)⁻¹ [Pᵀ ∇²_z g_i P]_i`` (m, nq, nq).
        """
        if f is None:
            return _shared(("derivatives",), self, q, lambda: self.derivatives(q, self.value(q)))
        q = jnp.atleast_1d(_as_float_array(q))
        m, nq = self.m, self.nq
        gf, gq = self.jacobians(f, q)
        jac = -jnp.linalg.solve(gf, gq)
        p = jnp.concatenate([jac, jnp.eye(nq, dtype=q.dtype)], axis=0)
        hz = jax.hessian(lambda z: self.residual(z[:m], z[m:]))(jnp.concatenate([f, q]))  # (m, m+nq, m+nq)
        t = jnp.einsum("za,izy,yb->iab", p, hz, p)
        hess = -jnp.linalg.solve(gf, t.reshape(m, nq * nq)).reshape(m, nq, nq)
        return f, jac, hess

    def hessian(self, q: ArrayLike, f: ArrayLike | None = None) -> Float[Array, "m nq nq"]:
        """``∂²f/∂q²`` (m, nq, nq) in closed form; see :meth:`derivatives`."""
        return self.derivatives(q, f)[2]

    def rates(self, q: ArrayLike, qd: ArrayLike):
        """``(f, ∂f/∂q, f', q'ᵀ H q')`` from one solve and one factorisation of ``∂g/∂f``.

        Differentiating ``g(f(q(t)), q(t)) = 0`` twice along the motion with
        ``z' = (f', q')``: ``g_f f' = -g_q q'`` and
        ``g_f (q'ᵀ H q') = -∂²g[z', z']`` (the second directional derivative of g,
        by nested forward mode; no Hessian of g is formed). Shared per trace
        between the joints of the loop, like :meth:`value`.
        """
        def compute():
            qq = jnp.atleast_1d(_as_float_array(q))
            vv = jnp.asarray(qd, dtype=qq.dtype)
            f, jacobian, inverse, converged = self._factored_newton(qq)
            if self.throw:
                f = self._check(f, self._factored_result(f, qq, jacobian, inverse, converged), qq)
            # Differentiable in q and the parameters by the implicit function theorem
            # (the same custom JVP as value()); the solves below reuse Newton's inverse
            # for their values and differentiate as solves with ∂g/∂f.
            f = _implicit_at(self, qq, f)
            m = self.m
            gq = jax.jacfwd(self.residual, argnums=1)(f, qq)
            jac = -_solve_factored(lambda x: jax.jvp(lambda ff: self.residual(ff, qq), (f,), (x,))[1],
                                   inverse, gq)
            fd = jac @ vv
            g = lambda z: self.residual(z[:m], z[m:])  # noqa: E731
            z, zd = jnp.concatenate([f, qq]), jnp.concatenate([fd, vv])
            d2g = jax.jvp(lambda x: jax.jvp(g, (x,), (zd,))[1], (z,), (zd,))[1]
            return f, jac, fd, -_solve_factored(lambda x: jax.jvp(lambda ff: self.residual(ff, qq), (f,), (x,))[1],
                                                inverse, d2g)

        out = _shared(("rates", id(qd)), self, q, compute, extra=qd)
        # The same q's solution and Jacobian are then free for joint_values/_gradients.
        _remember(("value",), self, q, out[0])
        _remember(("gradient",), self, q, out[1])
        return out


@eqx.filter_jit
def _solve_compiled(closure: LoopClosure, q, f0):
    return closure.solve(q, f0, throw=False)


@eqx.filter_custom_jvp
def _implicit_value(closure, q):
    return closure.solve(q).f


@_implicit_value.def_jvp
def _implicit_value_jvp(primals, tangents):
    closure, q = primals
    t_closure, t_q = tangents
    return _implicit_tangent(closure, q, _implicit_value(closure, q), t_closure, t_q)


@eqx.filter_custom_jvp
def _implicit_at(closure, q, f):
    """``f``, a solution of ``g(f, q) = 0`` computed elsewhere, with the derivatives
    of the implicit function ``f(q, params)`` (``f`` itself carries none)."""
    return f


@_implicit_at.def_jvp
def _implicit_at_jvp(primals, tangents):
    closure, q, f = primals
    t_closure, t_q, _ = tangents
    return _implicit_tangent(closure, q, _implicit_at(closure, q, f), t_closure, t_q)


def _solve_factored(matvec, inverse, b):
    """``A⁻¹ b`` for the linear map ``matvec(x) = A x`` (on vectors), using
    ``inverse = A⁻¹`` computed beforehand for the value; differentiable in A (through
    matvec's closure) and in b as a linear solve (``jax.lax.custom_linear_solve``).
    A matrix b is solved column by column."""
    inverse = jax.lax.stop_gradient(inverse)
    if b.ndim == 2:
        return jax.vmap(lambda col: _solve_factored(matvec, inverse, col), in_axes=1, out_axes=1)(b)
    return jax.lax.custom_linear_solve(matvec, b, lambda _, rhs: inverse @ rhs, lambda _, rhs: inverse.T @ rhs)


def _implicit_tangent(closure, q, f, t_closure, t_q):
    """``df = -(∂g/∂f)⁻¹ (∂g/∂q dq + ∂g/∂p dp)`` at the solution ``f``."""
    params = closure.params
    t_params = None if t_closure is None else t_closure.params
    if t_params is not None:
        t_params = jax.tree.map(lambda t, p: jnp.zeros_like(p) if t is None else t, t_params, params,
                                is_leaf=lambda x: x is None)
    t_q = jnp.zeros_like(q) if t_q is None else t_q
    if t_params is None:
        _, dg = jax.jvp(lambda qq: closure.fn(f, qq, params), (q,), (t_q,))
    else:
        _, dg = jax.jvp(lambda qq, pp: closure.fn(f, qq, pp), (q, params), (t_q, t_params))
    gf = jax.jacfwd(closure.fn)(f, q, params)
    return f, -jnp.linalg.solve(gf, dg)


# Per-trace sharing of loop solves between the joints of one loop. A model holds one
# copy of the closure per joint (pytrees do not share), so the joints of a loop would
# each solve it; joint_values, joint_gradients, ... call every joint with the same q
# object, and the first solve is reused for the others. Keys: the closure's static
# identity and id(q); a hit also requires the very same q object (kept alive by the
# entry) and, for concrete parameters, equal parameter values. With traced parameters
# the copies are assumed tied (they are, unless a user edits one joint's copy).
_SHARE: dict = {}
_SHARE_MAX = 16


def _params_match(a, b) -> bool:
    la, lb = jax.tree.leaves(a), jax.tree.leaves(b)
    if len(la) != len(lb):
        return False
    for x, y in zip(la, lb):
        if x is y:
            continue
        if _is_concrete(x) and _is_concrete(y):
            if np.shape(x) != np.shape(y) or not np.array_equal(np.asarray(x), np.asarray(y)):
                return False
        elif _is_concrete(x) != _is_concrete(y):
            return False
        elif getattr(x, "_trace", None) is not getattr(y, "_trace", None):
            return False
    return True


def _key(tag, closure, q):
    return (tag, id(q), closure.fn, closure.name, closure.guess, closure.branch)


def _shared(tag, closure, q, compute, extra=None):
    if not closure.share:
        return compute()
    key = _key(tag, closure, q)
    hit = _SHARE.get(key)
    if hit is not None and hit[0] is q and hit[3] is extra and _params_match(hit[1], (closure.params, closure.start)):
        return hit[2]
    out = compute()
    _remember(tag, closure, q, out, extra)
    return out


def _remember(tag, closure, q, out, extra=None):
    if not closure.share:
        return
    if len(_SHARE) >= _SHARE_MAX:
        _SHARE.pop(next(iter(_SHARE)))
    _SHARE[_key(tag, closure, q)] = (q, (closure.params, closure.start), out, extra)


# ---------------------------------------------------------------------------
# The seed's alternatives.
# ---------------------------------------------------------------------------


def _projection_solve(gbar: Array, rhs: Array, k: int) -> Array:
    """Solve ``Σ_j ḡ_j ⊗ x_j = rhs`` for ``x_j`` (k,) by the projections of Eq. 116-119.

    ``ḡ_j`` is column j of ``gbar`` (m, m); ``rhs`` has length m k.
    """
    m = gbar.shape[0]
    eye_m = jnp.eye(m, dtype=gbar.dtype)
    eye_k = jnp.eye(k, dtype=gbar.dtype)
    # gamma[i] holds γ_{i+1} for i = 1..m (index i-1), with γ_{m+1} = I (Eq. 116-117).
    gammas = [None] * (m + 2)
    gammas[m + 1] = eye_m
    for i in range(m, 1, -1):
        g_i = gbar[:, i - 1]
        gam = gammas[i + 1]
        norm2 = jnp.sum((gam @ g_i) ** 2)
        sigma = eye_m - jnp.outer(g_i, g_i) @ gam / norm2  # Eq. 116
        gammas[i] = gam @ sigma  # Eq. 117
    eta = jnp.zeros(m * k, dtype=gbar.dtype)  # η^(0), Eq. 119
    xs = []
    for i in range(1, m + 1):
        g_i = gbar[:, i - 1]
        gam = gammas[i + 1]
        norm2 = jnp.sum((gam @ g_i) ** 2)
        x_i = jnp.kron((g_i @ gam)[None, :], eye_k) @ (rhs - eta) / norm2  # Eq. 118
        eta = eta + jnp.kron(g_i, x_i)  # Eq. 119
        xs.append(x_i)
    return jnp.stack(xs)


def projection_derivatives(closure: LoopClosure, q: ArrayLike, f: ArrayLike | None = None):
    """Gradient and Hessian of the dependent variables by the seed's analytical
    projection method (Eq. 100-120).

    First order (Eq. 102): ``Σ_j ḡ_j ⊗ ∇f_j = -∂G/∂q`` with ``ḡ_j = ∂G/∂f_j``,
    solved by the projections ``σ_i``, ``γ_i`` of Eq. 116-119. Second order
    (Eq. 120): ``Σ_j ḡ_j ⊗ vec(H_j) = Γ``; the seed leaves Γ unspecified; from
    differentiating Eq. 101 once more (chain rule with ``∂g/∂f`` depending on f and q),

    ``Γ_i = -[Σ_jk g_{i,f_j f_k} ∇f_j ⊗ ∇f_k + Σ_j (∇f_j ⊗ g_{i,f_j q} + g_{i,q f_j} ⊗ ∇f_j) + vec(g_{i,qq})]``.

    Returns ``(f, grad (m, nq), hess (m, nq, nq))``.
    """
    q = jnp.atleast_1d(_as_float_array(q))
    f = closure(q) if f is None else jnp.asarray(f)
    m, nq = closure.m, closure.nq
    gf, gq = closure.jacobians(f, q)
    dgdq = gq.reshape(m * nq)  # ∂G/∂q, stacked ∇g_i (Eq. 102-103)
    grads = _projection_solve(gf, -dgdq, nq)  # (m, nq)
    hess_ff = jax.jacfwd(jax.jacfwd(closure.residual, 0), 0)(f, q)  # (m, m, m)
    hess_fq = jax.jacfwd(jax.jacfwd(closure.residual, 0), 1)(f, q)  # (m, m, nq)
    hess_qq = jax.jacfwd(jax.jacfwd(closure.residual, 1), 1)(f, q)  # (m, nq, nq)
    gamma = []
    for i in range(m):
        term = jnp.zeros(nq * nq, dtype=q.dtype)
        for j in range(m):
            for k in range(m):
                term = term + hess_ff[i, j, k] * jnp.kron(grads[j], grads[k])
            term = term + jnp.kron(grads[j], hess_fq[i, j]) + jnp.kron(hess_fq[i, j], grads[j])
        gamma.append(-(term + hess_qq[i].reshape(nq * nq)))
    hess = _projection_solve(gf, jnp.concatenate(gamma), nq * nq).reshape(m, nq, nq)
    return f, grads, hess


def molecule_derivatives(closure: LoopClosure, q: ArrayLike, step: float = 1e-4):
    """Gradient and Hessian by central differences on a computational molecule (seed Fig. 2).

    The loop is solved at the centre ``q`` and at ``q ± h e_a`` and
    ``q ± h e_a ± h e_b`` (a < b), every solve warm-started from the centre's
    solution so that it stays on the branch: ``1 + 2 nq + 2 nq (nq - 1)``
    abscissae (9 for nq = 2). Truncation error O(h²); round-off O(ε/h²) in the Hessian.
    Returns ``(f, grad (m, nq), hess (m, nq, nq))``.
    """
    q = jnp.atleast_1d(_as_float_array(q))
    nq = closure.nq
    f0 = closure.solve(q).f
    h = jnp.asarray(step, dtype=q.dtype)
    eye = jnp.eye(nq, dtype=q.dtype)

    def at(dq):
        return closure.solve(q + dq, f0).f

    plus = jnp.stack([at(h * eye[a]) for a in range(nq)], axis=1)  # (m, nq)
    minus = jnp.stack([at(-h * eye[a]) for a in range(nq)], axis=1)
    grad = (plus - minus) / (2 * h)
    hess = jnp.zeros((closure.m, nq, nq), dtype=q.dtype)
    for a in range(nq):
        hess = hess.at[:, a, a].set((plus[:, a] - 2 * f0 + minus[:, a]) / h**2)
        for b in range(a + 1, nq):
            pp = at(h * (eye[a] + eye[b]))
            pm = at(h * (eye[a] - eye[b]))
            mp = at(h * (-eye[a] + eye[b]))
            mm = at(-h * (eye[a] + eye[b]))
            mixed = (pp - pm - mp + mm) / (4 * h**2)
            hess = hess.at[:, a, b].set(mixed).at[:, b, a].set(mixed)
    return f0, grad, hess


class TensorSpline(AbstractJointFunction):
    """Tensor-product natural cubic spline of two coordinates, ``f(q) = s(q[i0], q[i1])``.

    Interpolates ``values[a, b]`` at ``(x0[a], x1[b])``: a natural spline in ``q[i0]``
    through each column, evaluated at ``q[i0]``, then a natural spline in ``q[i1]``
    through those values (so the second fit happens at every evaluation; it is a
    dense solve of size len(x1)). Pre-modeling for two coordinates.
    """

    indices: tuple[int, int] = eqx.field(static=True)
    columns: CubicSpline  # batched over the x1 grid (vmapped fits)
    x1: Float[Array, " n1"]

    def __init__(self, indices, x0, x1, values):
        self.indices = (int(indices[0]), int(indices[1]))
        x0, x1, values = _as_float_array(x0), _as_float_array(x1), _as_float_array(values)
        self.columns = eqx.filter_jit(eqx.filter_vmap(natural_spline_fit, in_axes=(None, None, 1)))(0, x0, values)
        self.x1 = x1

    def coordinate_indices(self):
        return self.indices

    def __call__(self, q):
        a = jnp.reshape(q[self.indices[0]], (1,))
        along = eqx.filter_vmap(lambda s: s(a))(self.columns)  # (n1,)
        return natural_spline_fit(0, self.x1, along)(jnp.reshape(q[self.indices[1]], (1,)))


def natural_spline_fit(index: int, x: Array, y: Array) -> CubicSpline:
    """Natural cubic spline through ``(x, y)``: ``CubicSpline.fit(index, x, y, "natural")``
    (traceable, so it can be vmapped over columns of samples)."""
    return CubicSpline.fit(index, x, y, "natural")


class PremodelResult(eqx.Module):
    """Pre-modeled joint functions and their fit error.

    - `functions`: one joint function per dependent variable (CubicSpline,
      FourierSeries, QuinticSpline or TensorSpline).
    - `grid`: the swept coordinate values; `values`: the solved variables there.
    - `fit_error`: max |fit - solve| between grid points (m,): at the midpoints, and
      for one coordinate at the quarter points too.
    - `derivative_error`: one coordinate only (else None): max |fit - loop| of the
      first and second derivatives at those points (m, 2), the loop's from
      :meth:`LoopClosure.derivatives` (what velocities and accelerations inherit).
    """

    functions: tuple
    grid: Any
    values: Array
    fit_error: Array
    derivative_error: Array | None = None


def _secular_slopes(x: np.ndarray, values) -> np.ndarray:
    """Per variable, the slope of its secular term over one period ``[x_0, x_n]``: a
    revolving variable (one that gains whole turns per period, e.g. a relative angle to
    a crank) gets ``2π·turns/period``, and its periodic rest is fitted; the others 0
    (up to their solve error)."""
    v = np.asarray(values)
    return 2 * np.pi * np.round((v[-1] - v[0]) / (2 * np.pi)) / (x[-1] - x[0])


@eqx.filter_jit
def _sweep(closure: LoopClosure, points):
    """Solve along a path of points, warm-starting each solve from the previous (a
    module-level jit: one compilation per loop and shape)."""
    def body(f, qk):
        s = closure.solve(qk, f)
        return s.f, s.f
    f_start = closure.solve(points[0]).f
    return jax.lax.scan(body, f_start, points)[1]


@eqx.filter_jit
def _derivatives_along(closure: LoopClosure, q, f):
    """:meth:`LoopClosure.derivatives` at many points (a module-level jit: one
    compilation per loop and shape, not one per :func:`premodel` call)."""
    return jax.vmap(closure.derivatives)(q, f)


@eqx.filter_jit
def _fit_rates_along(functions, q):
    """``(f, df/dq, d²f/dq²)`` of each one-coordinate fit at many points (points, m, 3)."""
    return jnp.stack([jax.vmap(lambda p, fn=fn: jnp.stack(fn.rates(p, jnp.ones_like(p))))(q)
                      for fn in functions], axis=1)


def premodel(closure: LoopClosure, lower: ArrayLike, upper: ArrayLike, step: float | Sequence[float],
             kind: str = "spline", order: int = 8, omega: float | None = None,
             periodic: bool = False) -> PremodelResult:
    """The seed's pre-modeling approach: sweep ``q`` over ``[lower, upper]`` with a fixed
    `step`, solve the loop at every point (warm-started from the previous one, so the
    sweep follows one branch), and fit explicit smooth functions.

    - nq = 1: ``kind="spline"`` (natural :class:`~jaxmb.CubicSpline`),
      ``kind="fourier"`` (:class:`~jaxmb.FourierSeries` of `order` with fundamental
      `omega`, default ``2π/(upper - lower)``) or ``kind="quintic"``
      (:class:`~jaxmb.QuinticSpline` through the solved values and their exact first
      and second derivatives, :meth:`LoopClosure.derivatives`; C², and the cheapest
      to evaluate). ``periodic=True`` makes the quintic repeat ``[lower, upper]``
      (one revolution of a crank), with a secular term for a variable that gains
      whole turns over it, as the Fourier fit does.
    - nq = 2: :class:`TensorSpline` on the grid.

    The fit error is measured against fresh solves at the midpoints of the grid (nq =
    1: and at the quarter points, with the derivatives' errors against
    :meth:`LoopClosure.derivatives` in `derivative_error`).
    """
    lower = np.atleast_1d(np.asarray(lower, dtype=float))
    upper = np.atleast_1d(np.asarray(upper, dtype=float))
    steps = np.broadcast_to(np.atleast_1d(np.asarray(step, dtype=float)), lower.shape)
    nq = closure.nq
    if lower.shape != (nq,) or upper.shape != (nq,):
        raise LoopClosureError(f"premodel: lower/upper must have {nq} entries.")
    if periodic and kind != "quintic":
        raise LoopClosureError(f"premodel: periodic=True applies to kind='quintic' (a Fourier fit is periodic "
                               f"by construction, a natural spline cannot be), got kind={kind!r}.")
    axes = [np.linspace(lo, hi, int(round((hi - lo) / s)) + 1) for lo, hi, s in zip(lower, upper, steps)]

    def sweep(points):
        return _sweep(closure, jnp.asarray(points))

    if nq == 1:
        x = axes[0]
        values = sweep(x[:, None])
        if kind == "spline":
            # jit the fits (the dense spline system is assembled element by element).
            batched = eqx.filter_jit(eqx.filter_vmap(natural_spline_fit, in_axes=(None, None, 1)))(
                0, jnp.asarray(x), values)
            fns = tuple(jax.tree.map(lambda leaf, k=k: leaf[k], batched) for k in range(closure.m))
        elif kind == "fourier":
            w = 2 * np.pi / (upper[0] - lower[0]) if omega is None else omega
            slopes = _secular_slopes(x, values) if omega is None else np.zeros(closure.m)
            fns = tuple(FourierSeries.fit(0, x, values[:, k], order, w, slopes[k]) for k in range(closure.m))
        elif kind == "quintic":
            slopes = _secular_slopes(x, values) if periodic else np.zeros(closure.m)
            _, d1, d2 = _derivatives_along(closure, jnp.asarray(x)[:, None], values)
            fns = tuple(QuinticSpline.fit(0, x, values[:, k], d1[:, k, 0], d2[:, k, 0, 0], periodic=periodic,
                                          slope=slopes[k])
                        for k in range(closure.m))
        else:
            raise LoopClosureError(f"premodel: kind must be 'spline', 'fourier' or 'quintic', got {kind!r}.")
        # The midpoints, and the quarter points: a Hermite fit's slope error vanishes at
        # the midpoints by symmetry, so they alone would understate it.
        # In increasing order, so that the warm-started sweep stays on the branch.
        mid = (x[:-1, None] + np.asarray([0.25, 0.5, 0.75]) * (x[1:] - x[:-1])[:, None]).ravel()
        f_mid = sweep(mid[:, None])
        fit = _fit_rates_along(fns, jnp.asarray(mid)[:, None])  # (points, m, 3): f, df/dq, d²f/dq²
        loop = _derivatives_along(closure, jnp.asarray(mid)[:, None], f_mid)
        err = jnp.max(jnp.abs(fit[:, :, 0] - f_mid), axis=0)
        derivative_error = jnp.stack([jnp.max(jnp.abs(fit[:, :, 1] - loop[1][:, :, 0]), axis=0),
                                      jnp.max(jnp.abs(fit[:, :, 2] - loop[2][:, :, 0, 0]), axis=0)], axis=1)
        return PremodelResult(functions=fns, grid=x, values=values, fit_error=err,
                              derivative_error=derivative_error)
    if nq == 2:
        if kind != "spline":
            raise LoopClosureError("premodel: two coordinates support kind='spline' only.")
        x0, x1 = axes
        # Boustrophedon sweep keeps consecutive points adjacent (one branch).
        pts = []
        for b, v in enumerate(x1):
            row = x0 if b % 2 == 0 else x0[::-1]
            pts.extend((u, v) for u in row)
        vals = np.asarray(sweep(np.asarray(pts)))
        values = np.empty((len(x0), len(x1), closure.m))
        n = 0
        for b in range(len(x1)):
            idx = range(len(x0)) if b % 2 == 0 else range(len(x0) - 1, -1, -1)
            for a in idx:
                values[a, b] = vals[n]
                n += 1
        fns = tuple(TensorSpline((0, 1), x0, x1, values[:, :, k]) for k in range(closure.m))
        m0, m1 = 0.5 * (x0[1:] + x0[:-1]), 0.5 * (x1[1:] + x1[:-1])
        mid = np.stack(np.meshgrid(m0, m1, indexing="ij"), -1).reshape(-1, 2)
        # Midpoints of the cells, solved warm-started from the nearest grid node.
        near = jnp.asarray(values[:-1, :-1].reshape(-1, closure.m))
        f_mid = jax.jit(jax.vmap(lambda qq, f0: closure.solve(qq, f0).f))(jnp.asarray(mid), near)
        fit = eqx.filter_jit(lambda fs, pts: jnp.stack([jax.vmap(fn)(pts) for fn in fs], axis=1))(
            fns, jnp.asarray(mid))
        err = jnp.max(jnp.abs(fit - f_mid), axis=0)
        return PremodelResult(functions=fns, grid=(x0, x1), values=jnp.asarray(values), fit_error=err)
    raise LoopClosureError(f"premodel supports one or two coordinates, the loop has {nq}.")


def premodeled(model: Model, lower: ArrayLike, upper: ArrayLike, step: float | Sequence[float],
               kind: str = "spline", order: int = 8, omega: float | None = None,
               periodic: bool = False) -> tuple[Model, Array]:
    """`model` with the implicit joint functions of every loop replaced by pre-modeled
    fits (:func:`premodel` over ``[lower, upper]``), and the fit errors (n_joints,)
    (0 for joints that were not implicit).

    The pre-modeled model is an ordinary tree with explicit joint functions: no
    loop is solved during simulation (whether that is faster depends on the fit:
    a Fourier series costs 2K sines and cosines per function and state, a quintic
    spline a gather and three short polynomials; see benchmarks/bench_andrews.py).
    For a crank that turns fully (Andrews' squeezer) ``kind="fourier"`` over one
    revolution is exact to round-off at a modest order, and ``kind="quintic",
    periodic=True`` close to it (see docs/closed_chains.md).
    """
    fit_error = np.zeros(len(model.joints))
    joints = list(model.joints)
    for closure, idx in _closures(model):
        res = premodel(closure, lower, upper, step, kind=kind, order=order, omega=omega, periodic=periodic)
        for k, i in enumerate(idx):
            joints[i] = eqx.tree_at(lambda j: j.function, joints[i], res.functions[k])
            fit_error[i] = float(res.fit_error[k])
    out = eqx.tree_at(lambda m: m.joints, model, tuple(joints))
    return out, jnp.asarray(fit_error)


# ---------------------------------------------------------------------------
# Joint functions.
# ---------------------------------------------------------------------------


class ImplicitJointFunction(AbstractJointFunction):
    """The `index`-th dependent variable of a :class:`LoopClosure`, as a joint function of q.

    The value solves the loop (Newton, warm-started by the closure's guess); the
    gradient and Hessian are the closed-form implicit derivatives; ``jax`` autodiff
    of the value is exact too (implicit function theorem).
    """

    closure: LoopClosure
    index: int = eqx.field(static=True)

    def __check_init__(self):
        if not 0 <= self.index < self.closure.m:
            raise LoopClosureError(
                f"ImplicitJointFunction: index {self.index} out of range for loop "
                f"{self.closure.name!r} with {self.closure.m} dependent variables.")

    def __call__(self, q):
        return self.closure.value(q)[self.index]

    def coordinate_indices(self):
        return tuple(range(self.closure.nq))

    def gradient(self, q):
        return self.closure.gradient(q)[self.index]

    def hessian(self, q):
        return self.closure.hessian(q)[self.index]

    def rates(self, q, qd):
        f, _, fd, fdd = self.closure.rates(q, qd)
        return f[self.index], fd[self.index], fdd[self.index]

    def rates_and_gradient(self, q, qd):
        f, jac, fd, fdd = self.closure.rates(q, qd)
        return f[self.index], fd[self.index], fdd[self.index], jac[self.index]


def implicit_joint_functions(closure: LoopClosure) -> tuple[ImplicitJointFunction, ...]:
    """One :class:`ImplicitJointFunction` per dependent variable of `closure`."""
    return tuple(ImplicitJointFunction(closure, k) for k in range(closure.m))


# ---------------------------------------------------------------------------
# Traditional route: all joint variables z with constraints Φ(z, q) = 0.
# ---------------------------------------------------------------------------


def open_tree(model: Model) -> Model:
    """The model's tree with every joint variable a coordinate: ``q_open = z``
    (n_joints,), coordinate names = joint names. Loads and bodies are kept."""
    joints = tuple(
        Joint(j.name, j.parent, j.child, j.kind, j.axis, Coordinate(i),
              parent_translation=j.parent_translation, parent_rotation=j.parent_rotation,
              child_translation=j.child_translation, child_rotation=j.child_rotation)
        for i, j in enumerate(model.joints))
    return Model(model.bodies, joints, model.joint_names, gravity=model.gravity, loads=model.loads,
                 name=model.name + "_open")


def _static_key(c: LoopClosure):
    return (c.fn, c.name, c.guess, c.branch, c.m, c.nq)


def _closure_joints(model: Model) -> list[tuple[LoopClosure, dict[int, int]]]:
    """The distinct loop closures of a model, each with ``{variable index: joint
    index}`` for those of its dependent variables that are joints of the model."""
    found: list[tuple[LoopClosure, dict[int, int]]] = []
    for i, j in enumerate(model.joints):
        fn = j.function
        if isinstance(fn, ImplicitJointFunction):
            for c, idx in found:
                if c is fn.closure or _static_key(c) == _static_key(fn.closure):
                    idx[fn.index] = i
                    break
            else:
                found.append((fn.closure, {fn.index: i}))
    return found


def _closures(model: Model):
    """The distinct loop closures of a model with, for each, the joint indices of its
    dependent variables (ordered by the closure's index); all must be joints."""
    out = []
    for c, idx in _closure_joints(model):
        if sorted(idx) != list(range(c.m)):
            raise LoopClosureError(f"Loop {c.name!r}: not all of its {c.m} dependent variables are joints "
                                   "of the model; the traditional route needs them all.")
        out.append((c, tuple(idx[k] for k in range(c.m))))
    return out


def constraint_function(model: Model) -> Callable:
    """``Φ(z, q)`` (n_joints,): the constraints of the model in all its joint variables z.

    Each loop closure contributes its m equations ``g(z[dep], q)``; each explicit
    joint j contributes its driving equation ``z_j - f_j(q)``. ``∂Φ/∂z`` is square.
    """
    loops = _closures(model)
    explicit = [i for i, j in enumerate(model.joints) if not isinstance(j.function, ImplicitJointFunction)]

    def phi(z, q):
        parts = [c.residual(z[jnp.asarray(idx)], q) for c, idx in loops]
        parts += [jnp.reshape(z[i] - model.joints[i].function(q), (1,)) for i in explicit]
        return jnp.concatenate(parts)

    return phi


def constraint_kinematics(model: Model, q, qd, qdd):
    """Joint variables and their rates by the traditional constraint-Jacobian route
    (Shabana): ``Φ_z ż = -Φ_q q'`` and ``Φ_z z̈ = -Φ_q q'' - (d/dt Φ_z) ż - (d/dt Φ_q) q'``.

    The joint variables z come from the loop solves; no gradient or Hessian of
    ``f(q)`` is formed. Returns ``(z, ż, z̈)``.
    """
    from ._kinematics import joint_values

    q, qd, qdd = (jnp.atleast_1d(_as_float_array(x)) for x in (q, qd, qdd))
    phi = constraint_function(model)
    z = jax.lax.stop_gradient(joint_values(model, q))
    pz, pq = jax.jacfwd(phi, argnums=(0, 1))(z, q)
    zd = jnp.linalg.solve(pz, -pq @ qd)
    # d/dt (Φ_z ż + Φ_q q') along (ż, q') with ż, q' held fixed: the velocity-product term.
    rate = lambda zz, qq: jax.jvp(phi, (zz, qq), (zd, qd))[1]  # noqa: E731
    gamma = jax.jvp(rate, (z, q), (zd, qd))[1]
    zdd = jnp.linalg.solve(pz, -pq @ qdd - gamma)
    return z, zd, zdd


def traditional_point_kinematics(model: Model, q, qd, qdd, body, point=(0.0, 0.0, 0.0)):
    """Position, velocity and acceleration of a body point by the traditional route:
    the open tree in all joint variables z with ``(z, ż, z̈)`` from
    :func:`constraint_kinematics`."""
    from ._kinematics import point_acceleration, point_position, point_velocity

    tree = open_tree(model)
    z, zd, zdd = constraint_kinematics(model, q, qd, qdd)
    return (point_position(tree, z, body, point), point_velocity(tree, z, zd, body, point),
            point_acceleration(tree, z, zd, zdd, body, point))
