"""Static optimization with compliant tendons: the force sharing of Ehsani (2016), section 4-4 C
(Fig. 21), where the musculotendon equations are constraints beside the torque balance.

At every frame the activations ``a`` and actuator controls ``u`` minimise
``Σ w_i |a_i|^p + Σ w_j |u_j|^p`` within their bounds subject to

    R(q) F_T(a, l_MT(q), v_MT(q, q')) + Q_act(q) u = τ_ID(q, q', q''),

with ``R = -dL/dq`` the moment arms (Ehsani 2016, Eq. 193-195: the generalized force of the
tendon forces is ``R F``) and ``F_T`` each muscle's tendon force with its fibre in equilibrium
with its tendon, ``F_M cos(phi) = F_max f_T(l_T / l_s)`` (`AbstractMusculotendonModel`'s
compliant state: the fibre length from its differentiable root find, the fibre velocity the
one each model's equilibrium uses). ``F_T`` includes the passive fibre force; it is
non-decreasing in each muscle's own activation, so the constraint is nonlinear but monotone.

The problem is solved by sequential linearisation: about the current ``a_k`` each tendon
force is replaced by its tangent ``F_T(a_k) + J_k (a - a_k)`` (``J_k = dF_T/da``, diagonal),
the affine problem ``B_k x = b_k`` is solved exactly by the rigid route's dual Newton
(`jaxmb._static_optimization`), and the iteration stops once the step and the nonlinear
torque balance are below the tolerance. A fixed point is a KKT point of the nonlinear problem
(its linearisation has the same constraint gradient ``R diag(J)`` there). Derivatives come
from the implicit-function theorem on the fixed point ``x = T(x, θ)``:
``dx/dθ = (I - ∂T/∂x)⁻¹ ∂T/∂θ``, applied as one differentiable correction at the solution
(``∂T/∂x`` by forward mode, which needs the tendon force's second derivatives: the
equilibrium's two final Newton steps give them exactly).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

from ._muscles import muscle_lengths_and_moment_arms, musculotendon_states

__all__ = ["MAX_ITERATIONS", "compliant_frames"]

MAX_ITERATIONS = 60
"""Linearisations per frame at most (a frame still moving after them is reported unconverged)."""


def _tendon_forces(model, a, lengths, speeds):
    """Tendon forces ``F_T(a)`` (n_muscles,) and their slopes ``dF_T/da`` (each depends on its
    own activation only: one forward-mode pass gives the Jacobian's diagonal)."""
    return jax.jvp(lambda x: musculotendon_states(model, x, lengths, speeds).tendon_force, (a,), (jnp.ones_like(a),))


def _stopped(tree):
    """`tree` with every array leaf under `jax.lax.stop_gradient`."""
    return jax.tree.map(lambda z: jax.lax.stop_gradient(z) if eqx.is_inexact_array(z) else z, tree)


def _frame(model, affine_frame, R, Q, tau, lengths, speeds, w, lo, hi, p, tol, max_steps):
    """One frame: ``(x, F_T, B, b, balance, kkt, iterations, converged)``, differentiable by the
    implicit-function theorem on the fixed point of the sequential linearisation."""
    nm = R.shape[1]
    scale = jnp.maximum(1.0, jnp.max(jnp.abs(tau)))

    def T(x, m, R_, Q_, tau_, l_, v_, w_, lo_, hi_):
        """The linearisation's solution about ``x``, and ``F_T``, ``J``, ``B``, ``b`` there, the
        nonlinear torque balance at ``x``, the KKT residual and convergence of the affine solve."""
        F, J = _tendon_forces(m, x[:nm], l_, v_)
        B = jnp.concatenate([R_ * J[None, :], Q_], axis=1)
        b = tau_ - R_ @ (F - J * x[:nm])
        x1, _, kkt, _, ok = affine_frame(B, b, w_, lo_, hi_, p, tol, max_steps)
        return x1, (F, J, B, b, jnp.max(jnp.abs(B @ x - b)), kkt, ok)

    args = (model, R, Q, tau, lengths, speeds, w, lo, hi)
    stopped = _stopped(args)

    def cond(carry):
        _, k, done, _ = carry
        return (k < MAX_ITERATIONS) & ~done

    def body(carry):
        x, k, _, _ = carry
        x1, (*_, r, _, ok) = T(x, *stopped)  # r: the torque balance at x (B x - b = R F_T(a) + Q u - τ)
        done = ok & (jnp.max(jnp.abs(x1 - x)) <= tol) & (r <= tol * scale)
        return jnp.where(done, x, x1), k + 1, done, r

    x0 = jnp.clip(jnp.concatenate([jnp.full((nm,), 0.1, tau.dtype), jnp.zeros(Q.shape[1], tau.dtype)]),
                  stopped[7], stopped[8])
    x, iterations, done, r = jax.lax.while_loop(cond, body, (x0, jnp.asarray(0), jnp.asarray(False),
                                                              jnp.asarray(jnp.inf, tau.dtype)))
    # The implicit-function theorem on x = T(x, θ): x + (I - ∂T/∂x)⁻¹ (T(x, θ) - x) has the value x
    # (to round-off) and the derivative (I - ∂T/∂x)⁻¹ ∂T/∂θ.
    x = jax.lax.stop_gradient(x)
    T_x = jax.lax.stop_gradient(jax.jacfwd(lambda z: T(z, *stopped)[0])(x))
    x1, (F, J, B, b, _, kkt, _) = T(x, *args)
    x_out = x + jnp.linalg.solve(jnp.eye(x.shape[0], dtype=x.dtype) - T_x, x1 - x)
    forces = F + J * (x_out[:nm] - x[:nm])  # F_T(a) to first order about the solution, exact derivative
    return x_out, forces, B, b, r, kkt, iterations, done


def compliant_frames(model, extra, specs, q, qd, qdd, samples, w, lo, hi, p, tol, max_steps, *, frame_torque,
                     actuator_columns, affine_frame, method="closed_form"):
    """Every frame's compliant-tendon static optimization (vmapped): ``(τ_ID, x, F_T, B, b,
    balance, kkt, iterations, converged)``, each with a leading frame axis.

    `frame_torque(model, specs, q, qd, qdd, sample)` gives ``τ_ID``, `actuator_columns(model,
    extra, q, qd)` the actuators' ``Q_act`` and `affine_frame(B, b, w, lo, hi, p, tol,
    max_steps)` solves one affine problem (the rigid route's pieces, passed in so that this
    module does not import it); `method` is `moment_arms`' (``R = -dL/dq`` or the frozen path).
    """
    def one(qi, qdi, qddi, si):
        tau = frame_torque(model, specs, qi, qdi, qddi, si)
        lengths, R = muscle_lengths_and_moment_arms(model, qi, method=method)
        speeds = -R.T @ qdi
        Q = actuator_columns(model, extra, qi, qdi) if extra else jnp.zeros((qi.shape[0], 0), qi.dtype)
        return (tau,) + _frame(model, affine_frame, R, Q, tau, lengths, speeds, w, lo, hi, p, tol, max_steps)

    return jax.vmap(one)(q, qd, qdd, samples)
