"""Static optimization's constraint as moments or accelerations, hard or penalised.

OpenSim's Static Optimization matches accelerations, ``M⁻¹(q) (B x - b) = 0``; jaxmb's
constraint is the torque balance ``B x = b`` (moment matching, as the custom static
optimizations of Crowninshield and Brand 1981 and of the OpenSim MATLAB scripts do). With
``M`` invertible and no kinematic constraints, the two are the same set of ``x``: a frame
where they can be met has the same solution. They differ where the balance cannot be met
and is penalised instead of imposed:

    min Σ w_i |x_i|^p + c Σ_k |e_k|^p,   e = E (B x - b),   lo ≤ x ≤ hi,

with ``E = I`` (moments: residual torques, N m or N) or ``E = M⁻¹`` (accelerations: the
accelerations the residual would cause, rad/s² or m/s²). The penalised problem is the
original one in the variables ``(x, e)`` with the constraint ``E B x - e = E b``, ``e``
unbounded with weight ``c``: the same per-frame solvers apply.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ._dynamics import mass_matrix

MATCHING = ("moments", "accelerations")


def matching_problem(model, q, B, b, w, lo, hi, matching: str, residual_weight):
    """The frames' ``(B, b, w, lo, hi)`` of the constraint `matching` (`MATCHING`), penalised
    with weight `residual_weight` (``c``) unless it is None. ``B`` (k, nq, n), ``b`` (k, nq)."""
    if matching == "accelerations":
        solve = jax.vmap(lambda qi, Bi, bi: jnp.linalg.solve(mass_matrix(model, qi), jnp.column_stack([Bi, bi])))
        Eb = solve(q, B, b)
        B, b = Eb[:, :, :-1], Eb[:, :, -1]
    if residual_weight is None:
        return B, b, w, lo, hi
    k, nq, _ = B.shape
    eye = jnp.broadcast_to(jnp.eye(nq, dtype=B.dtype), (k, nq, nq))
    inf = jnp.full(nq, jnp.inf, B.dtype)
    c = jnp.broadcast_to(jnp.asarray(residual_weight, B.dtype), (nq,))
    return (jnp.concatenate([B, -eye], axis=2), b, jnp.concatenate([w, c]), jnp.concatenate([lo, -inf]),
            jnp.concatenate([hi, inf]))
