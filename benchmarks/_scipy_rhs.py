"""Right-hand sides of jaxmb's closed-chain equations as NumPy functions, for scipy's
integrators (`scipy.integrate.solve_ivp`): the benchmark's bridge to scipy, not library
API (they use only public jaxmb calls)."""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import jaxmb as mb


def dae_rhs_numpy(model: mb.Model, forces: Callable | None = None, alpha: float = 0.0, beta: float = 0.0):
    """The index-1 DAE's right-hand side and Jacobian, `(rhs, jac)`: jitted
    `rhs(t, y) -> (2 n_joints,)` and `jac(t, y) -> (2 n_joints, 2 n_joints)` of
    ``y = (z, ż)``; arguments as `jaxmb.constraints.dae_vector_field`'s."""
    field = mb.constraints.dae_vector_field(model, forces, alpha, beta)
    f = jax.jit(lambda y: field(0.0, y, None))
    jac = jax.jit(jax.jacfwd(f))
    return (lambda t, y: np.asarray(f(jnp.asarray(y)))), (lambda t, y: np.asarray(jac(jnp.asarray(y))))


def ode_rhs_numpy(model: mb.Model, tau: Callable | None = None):
    """The embedded (minimal) ODE ``q'' = M(q)⁻¹ (τ - N(q, q') q' + G(q))`` as
    `mb.forward_dynamics` solves it, `(rhs, jac)` of ``y = (q, q')``; `tau(t, q, q')`
    defaults to the model's loads (`mb.generalized_forces`)."""
    bare = eqx.tree_at(lambda m: m.loads, model, ())
    nq = model.nq

    @jax.jit
    def f(y):
        q, qd = y[:nq], y[nq:]
        t = mb.generalized_forces(model, q) if tau is None else tau(0.0, q, qd)
        return jnp.concatenate([qd, mb.forward_dynamics(bare, q, qd, t)])

    jac = jax.jit(jax.jacfwd(f))
    return (lambda t, y: np.asarray(f(jnp.asarray(y)))), (lambda t, y: np.asarray(jac(jnp.asarray(y))))
