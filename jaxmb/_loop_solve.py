"""Newton solves of loop-closure equations and the implicit derivatives of their solutions.

The machinery behind [`jaxmb.LoopClosure`][jaxmb.LoopClosure] (which calls these with itself as
`closure`): optimistix's Newton with the implicit function theorem
(``optx.ImplicitAdjoint``), the continuation from the reference assembly, a Newton
iteration that keeps its last inverse of ``∂g/∂f`` for the rates of the loop, and
custom JVP rules ``df = -(∂g/∂f)⁻¹ (∂g/∂q dq + ∂g/∂p dp)`` (Ehsani 2016, Eq. 101).
"""

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import optimistix as optx

# The most steps a continuation takes, whatever the distance from q_ref.
_MAX_CONTINUATION = 100_000


class _Residual(eqx.Module):
    """``(f, (q, params)) -> g``; a module (not a lambda) so that optimistix's
    compilation cache recognises the same loop across calls."""

    fn: Callable = eqx.field(static=True)

    def __call__(self, f, args):
        return self.fn(f, args[0], args[1])


def tolerances(closure, dtype, rtol=None, atol=None) -> tuple[float, float]:
    """Newton's ``(rtol, atol)`` (default: the loop's), raised to what `dtype` can
    resolve: in float32 the default 1e-12 is below round-off, and Newton would never
    stop; in float64 the defaults are left as they are."""
    floor = 16 * float(jnp.finfo(dtype).eps)
    return (max(closure.rtol if rtol is None else rtol, floor), max(closure.atol if atol is None else atol, floor))


def newton(closure, q, y0, rtol=None, atol=None, max_steps=None) -> optx.Solution:
    """optimistix's Newton on ``g(·, q) = 0`` from `y0`; derivatives of the solution by
    the implicit function theorem. Never raises (``throw=False``): see the result."""
    rtol, atol = tolerances(closure, y0.dtype, rtol, atol)
    solver = optx.Newton(rtol=rtol, atol=atol)
    return optx.root_find(_Residual(closure.fn), solver, y0, args=(q, closure.params),
                          max_steps=closure.max_steps if max_steps is None else max_steps,
                          adjoint=optx.ImplicitAdjoint(), throw=False)


def continuation(closure, q):
    """The dependent variables at ``q`` by continuation along the straight path from
    ``q_ref``: at least ``n_continuation`` steps, and steps of at most
    ``continuation_step`` in every coordinate, each a short Newton solve from the
    previous. No derivative flows through it (that of the solution comes from the
    implicit function theorem), so the loop sees no tangents, its params' included."""
    loop = jax.lax.stop_gradient(closure)
    q = jax.lax.stop_gradient(q)
    f, q_ref = loop.f_ref.astype(q.dtype), loop.q_ref.astype(q.dtype)
    n = closure.n_continuation
    if closure.continuation_step is not None:
        far = jnp.max(jnp.abs(q - q_ref)) / closure.continuation_step
        # A non-finite q fails in Newton afterwards, with its message, not in an endless loop.
        n = jnp.where(jnp.isfinite(far), jnp.clip(jnp.ceil(far), n, _MAX_CONTINUATION), n).astype(int)

    def step(s, f):
        qs = (q_ref + (s / n).astype(q.dtype) * (q - q_ref)).astype(q.dtype)
        return newton(loop, qs, f, rtol=1e-8, atol=1e-8, max_steps=20).value

    return jax.lax.fori_loop(1, n, step, f)


def factored_newton(closure, q, y0):
    """Newton from `y0` that keeps its last ``∂g/∂f`` and ``(∂g/∂f)⁻¹``.

    Each iteration inverts the m x m ``∂g/∂f`` once (one LU, its triangular solves on
    the identity); the loop stops, like optimistix's Newton, when the step is below
    ``atol + rtol |f|`` in every component, which from a good guess (a closed form, a
    pre-modeled fit, the previous state of a simulation) is after one iteration. The
    last inverse, taken one (converged, so round-off sized) step before the returned
    ``f``, serves every linear solve of the loop's rates as a matrix product (LAPACK
    calls dominate at these sizes on CPU). Values only: returns stop-gradient
    ``(f, ∂g/∂f, (∂g/∂f)⁻¹, converged)``."""
    q = jax.lax.stop_gradient(q)
    params = jax.lax.stop_gradient(closure.params)
    g = lambda f: closure.fn(f, q, params)  # noqa: E731
    rtol, atol = tolerances(closure, q.dtype)

    def step(f):
        jacobian = jax.jacfwd(g)(f)
        inverse = jnp.linalg.inv(jacobian)
        d = inverse @ g(f)
        return f - d, jacobian, inverse, d

    def small(f, d):
        return jnp.all(jnp.abs(d) <= atol + rtol * jnp.abs(f))

    def cond(c):
        f, _, _, d, k = c
        return ~small(f, d) & (k < closure.max_steps) & jnp.all(jnp.isfinite(f))

    def body(c):
        return (*step(c[0]), c[4] + 1)

    f, jacobian, inverse, d, _ = jax.lax.while_loop(cond, body, (*step(jax.lax.stop_gradient(y0)), 1))
    return f, jacobian, inverse, small(f, d)


@eqx.filter_jit
def solve_compiled(closure, q, f0):
    """``closure.solve(q, f0, throw=False)`` compiled and cached (for eager calls: op by
    op, the continuation's and Newton's loops would compile anew on every call)."""
    return closure.solve(q, f0, throw=False)


@eqx.filter_custom_jvp
def implicit_value(closure, q):
    """``closure.solve(q).f`` with the hand-written implicit-function JVP rule."""
    return closure.solve(q).f


@implicit_value.def_jvp
def _implicit_value_jvp(primals, tangents):
    closure, q = primals
    t_closure, t_q = tangents
    return implicit_tangent(closure, q, implicit_value(closure, q), t_closure, t_q)


@eqx.filter_custom_jvp
def implicit_at(closure, q, f):
    """``f``, a solution of ``g(f, q) = 0`` computed elsewhere, with the derivatives
    of the implicit function ``f(q, params)`` (``f`` itself carries none)."""
    return f


@implicit_at.def_jvp
def _implicit_at_jvp(primals, tangents):
    closure, q, f = primals
    t_closure, t_q, _ = tangents
    return implicit_tangent(closure, q, implicit_at(closure, q, f), t_closure, t_q)


def solve_factored(matvec, inverse, b):
    """``A⁻¹ b`` for the linear map ``matvec(x) = A x`` (on vectors), using
    ``inverse = A⁻¹`` computed beforehand for the value; differentiable in A (through
    matvec's closure) and in b as a linear solve (``jax.lax.custom_linear_solve``).
    A matrix b is solved column by column."""
    inverse = jax.lax.stop_gradient(inverse)
    if b.ndim == 2:
        return jax.vmap(lambda col: solve_factored(matvec, inverse, col), in_axes=1, out_axes=1)(b)
    return jax.lax.custom_linear_solve(matvec, b, lambda _, rhs: inverse @ rhs, lambda _, rhs: inverse.T @ rhs)


def implicit_tangent(closure, q, f, t_closure, t_q):
    """``df = -(∂g/∂f)⁻¹ (∂g/∂q dq + ∂g/∂p dp)`` at the solution ``f`` (Ehsani 2016, Eq. 101)."""
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
