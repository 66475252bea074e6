"""Static optimization's frames solved by an augmented Lagrangian around an optax optimiser.

Each frame's problem is ``min Σ w_i |x_i|^p`` subject to ``B x = b``, ``lo ≤ x ≤ hi``
(``p ≥ 2``). Its variables and constraints are first rescaled: ``y = √w ⊙ x`` and
``A = L⁻¹ B W^{-1/2}``, ``b̃ = L⁻¹ b`` with ``L Lᵀ = B W⁻¹ Bᵀ`` (Cholesky), so that
``A Aᵀ = I``; for ``p = 2`` the objective is ``|y|²`` and the augmented Lagrangian

    φ_ρ(y; μ) = Σ w_i^(1-p/2) |y_i|^p - μᵀ(A y - b̃) + ρ/2 |A y - b̃|²

has a Hessian with eigenvalues 2 and 2 + ρ only. Its box-constrained minimiser is sought by
projected steps of ``optax.sgd`` with Nesterov momentum (Nesterov 1983; step ``1/L``,
momentum ``(√κ - 1)/(√κ + 1)`` for the condition number ``κ = (2 + ρ)/2``) followed by
``optax.projections.projection_box``, and the multipliers are updated outside,
``μ ← μ - ρ (A y - b̃)`` (Hestenes 1969; Powell 1969; Nocedal and Wright 2006, Section 17.4,
the bound-constrained formulation). The rescaling makes ``A Aᵀ = I`` for all variables, but
at a solution about half of them sit at a bound, and the free columns' ``A_F A_Fᵀ`` has
eigenvalues ``σ`` down to about 1e-3 (gait2392's walk); the multipliers' error shrinks by
``2/(2 + ρσ)`` an outer step, so ρ is large (500) and the inner problem's condition number
``(2 + ρ)/2`` is met by momentum (its steps grow as ``√κ``, not ``κ``). The frames
are solved in order by a `lax.scan` whose carry, the previous frame's ``(x, λ)``, starts the
next frame (warm start). Derivatives come from the implicit-function theorem applied to the
KKT conditions in their natural-residual form (`jax.lax.custom_root`):

    x - clip(x - (∇f(x) - Bᵀλ), lo, hi) = 0,    B x - b = 0.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import optax
from jax.flatten_util import ravel_pytree

__all__ = ["solve_frames_optax"]

_RHO = 500.0  # the penalty, in the rescaled problem (the multipliers' error shrinks 2/(2+ρσ) an outer step)
_INNER = 32  # projected momentum steps per multiplier update
_KAPPA = (2.0 + _RHO) / 2.0  # the inner problem's condition number for p = 2
_MOMENTUM = (_KAPPA ** 0.5 - 1.0) / (_KAPPA ** 0.5 + 1.0)


def _gradient(x, w, p):
    """``∇ Σ w |x|^p``."""
    return p * w * jnp.sign(x) * jnp.abs(x) ** (p - 1.0)


def _kkt(z, B, b, w, lo, hi, p):
    """The KKT conditions' natural residual at ``z = (x, λ)`` (zero at a KKT point)."""
    x, lam = z
    return x - jnp.clip(x - (_gradient(x, w, p) - B.T @ lam), lo, hi), B @ x - b


def _al_frame(B, b, w, lo, hi, p, tol, max_steps, x0, lam0, cold):
    """One frame by the augmented Lagrangian: ``(x, λ, steps, converged)`` (no derivatives)."""
    dtype = B.dtype
    nq = B.shape[0]
    sw = jnp.sqrt(w)
    C = (B / w[None, :]) @ B.T
    L = jnp.linalg.cholesky(C + jnp.finfo(dtype).eps * jnp.trace(C) / nq * jnp.eye(nq, dtype=dtype))
    A = jsl.solve_triangular(L, B / sw[None, :], lower=True)
    bt = jsl.solve_triangular(L, b, lower=True)
    ylo, yhi = sw * lo, sw * hi
    c = w ** (1.0 - p / 2.0)
    # Cold start: the solution without bounds for p = 2 (y = Aᵀb̃, μ = 2b̃); else the previous frame's.
    y = jnp.where(cold, jnp.clip(A.T @ bt, ylo, yhi), jnp.clip(sw * x0, ylo, yhi))
    mu = jnp.where(cold, 2.0 * bt, L.T @ lam0)
    b_scale = jnp.maximum(1.0, jnp.max(jnp.abs(b)))

    def step_size(y):
        """``1 / λ_max`` of the inner Hessian (exact for p = 2; for p > 2 the curvature's
        bound on the box, or at twice the iterate's size where it is unbounded)."""
        if p == 2.0:
            return 1.0 / (2.0 + _RHO)
        reach = jnp.where(jnp.isfinite(ylo) & jnp.isfinite(yhi), jnp.maximum(jnp.abs(ylo), jnp.abs(yhi)),
                          2.0 * jnp.abs(y) + 1.0)
        return 1.0 / (jnp.max(p * (p - 1.0) * c * reach ** (p - 2.0)) + _RHO)

    def inner_value(y, mu):
        r = A @ y - bt
        return jnp.sum(c * jnp.abs(y) ** p) - mu @ r + 0.5 * _RHO * r @ r

    def status(y, mu):
        x = y / sw
        lam = jsl.solve_triangular(L.T, mu, lower=False)
        natural, balance = _kkt((x, lam), B, b, w, lo, hi, p)
        scale = jnp.maximum(1.0, jnp.max(jnp.abs(_gradient(x, w, p))))
        return (jnp.max(jnp.abs(balance)) <= tol * b_scale) & (jnp.max(jnp.abs(natural)) <= tol * scale), lam

    def outer(carry):
        y, mu, k, _ = carry
        optimiser = optax.sgd(step_size(y), momentum=_MOMENTUM, nesterov=True)
        state = optimiser.init(y)

        def inner(_, ys):
            y, state = ys
            updates, state = optimiser.update(jax.grad(inner_value)(y, mu), state, y)
            return optax.projections.projection_box(optax.apply_updates(y, updates), ylo, yhi), state

        y, _ = jax.lax.fori_loop(0, _INNER, inner, (y, state))
        mu = mu - _RHO * (A @ y - bt)
        return y, mu, k + _INNER, status(y, mu)[0]

    def cond(carry):
        return (carry[2] < max_steps) & ~carry[3]

    y, mu, steps, ok = jax.lax.while_loop(cond, outer, (y, mu, jnp.asarray(0), status(y, mu)[0]))
    return y / sw, status(y, mu)[1], steps, ok


def solve_frames_optax(B, target, w, lo, hi, p, tol, max_steps):
    """Every frame's ``(x, torque residual, kkt residual, steps, converged)`` as
    `jaxmb._static_optimization._frame` gives them, by the augmented Lagrangian (frames in
    order, each warm-started from the previous one), differentiable in ``(B, b, w, lo, hi)``."""
    n, dtype = B.shape[2], B.dtype

    def frame(carry, Bb):
        Bi, bi = Bb
        x_prev, lam_prev, cold = carry
        theta = jax.lax.stop_gradient((Bi, bi, w, lo, hi))
        x, lam, steps, ok = _al_frame(*theta, p, tol, max_steps, x_prev, lam_prev, cold)
        # The optimiser's (x, λ) as the value; derivatives by the implicit-function theorem.
        x_d, _ = jax.lax.custom_root(lambda z: _kkt(z, Bi, bi, w, lo, hi, p), (x, lam),
                                     lambda _, __: (x, lam), _tangent_solve)
        natural, _ = _kkt((x, lam), *theta, p)  # a diagnostic, not differentiated
        out = (x_d, jnp.max(jnp.abs(Bi @ x_d - bi)), jnp.max(jnp.abs(natural)), steps, ok)
        return (x, lam, jnp.asarray(False)), out

    init = (jnp.zeros(n, dtype), jnp.zeros(B.shape[1], dtype), jnp.asarray(True))
    return jax.lax.scan(frame, init, (B, target))[1]


def _tangent_solve(g, y):
    """Solve the linear map ``g(z) = y`` (the KKT conditions' linearisation) densely."""
    flat, unravel = ravel_pytree(y)
    J = jax.jacobian(lambda v: ravel_pytree(g(unravel(v)))[0])(flat)
    return unravel(jnp.linalg.solve(J, flat))
