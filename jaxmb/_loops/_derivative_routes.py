"""Ehsani's (2016) alternatives to implicit differentiation for the derivatives of loop variables.

The analytical projection method (Eq. 100-120, `projection_derivatives`) and
numerical differentiation on a computational molecule (Fig. 2,
`molecule_derivatives`). The library's own route is the implicit
differentiation of [`jaxmb.LoopClosure`][jaxmb.LoopClosure]; these reproduce the paper and serve
as cross-checks.
"""

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._checks import float_array
from .._loop_closure import LoopClosure
from .._typing import RealLike


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


def projection_derivatives(closure: LoopClosure, q: RealLike, f: RealLike | None = None
                           ) -> tuple[Float[Array, " m"], Float[Array, "m nq"], Float[Array, "m nq nq"]]:
    """Gradient and Hessian of the dependent variables by Ehsani's analytical
    projection method (Ehsani 2016, Eq. 100-120).

    First order (Eq. 102): ``Σ_j ḡ_j ⊗ ∇f_j = -∂G/∂q`` with ``ḡ_j = ∂G/∂f_j``,
    solved by the projections ``σ_i``, ``γ_i`` of Eq. 116-119. Second order
    (Eq. 120): ``Σ_j ḡ_j ⊗ vec(H_j) = Γ``; the paper leaves Γ unspecified; from
    differentiating Eq. 101 once more (chain rule with ``∂g/∂f`` depending on f and q),

    ``Γ_i = -[Σ_jk g_{i,f_j f_k} ∇f_j ⊗ ∇f_k + Σ_j (∇f_j ⊗ g_{i,f_j q} + g_{i,q f_j} ⊗ ∇f_j) + vec(g_{i,qq})]``.

    **Arguments:**

    - `closure`: the [`jaxmb.LoopClosure`][jaxmb.LoopClosure].
    - `q`: the coordinates (nq,), rad or m.
    - `f`: the solved dependent variables (m,); default: solved from the closure's
      reference assembly.

    **Returns:**

    `(f, grad, hess)`: the dependent variables (m,), their gradients (m, nq) and
    Hessians (m, nq, nq) with respect to ``q``.
    """
    q = jnp.atleast_1d(float_array(q))
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


def molecule_derivatives(closure: LoopClosure, q: RealLike, step: float = 1e-4
                         ) -> tuple[Float[Array, " m"], Float[Array, "m nq"], Float[Array, "m nq nq"]]:
    """Gradient and Hessian by central differences on a computational molecule (Ehsani 2016, Fig. 2).

    The loop is solved at the centre ``q`` and at ``q ± h e_a`` and
    ``q ± h e_a ± h e_b`` (a < b), every solve warm-started from the centre's
    solution so that it stays on the branch: ``1 + 2 nq + 2 nq (nq - 1)``
    abscissae (9 for nq = 2). Truncation error O(h²); round-off O(ε/h²) in the Hessian.

    **Arguments:**

    - `closure`: the [`jaxmb.LoopClosure`][jaxmb.LoopClosure].
    - `q`: the molecule's centre (nq,), rad or m.
    - `step`: the spacing ``h``, in the units of ``q``.

    **Returns:**

    `(f, grad, hess)`: the dependent variables at the centre (m,), their gradients
    (m, nq) and Hessians (m, nq, nq) with respect to ``q``.
    """
    q = jnp.atleast_1d(float_array(q))
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
