"""The traditional baseline: a closed-chain model as an index-1 DAE in all its joint variables.

The model's open tree (every joint variable z a coordinate, [`jaxmb.constraints.open_tree`][jaxmb.constraints.open_tree])
with the loop-closure equations ``Φ(z) = 0`` enforced by Lagrange multipliers:

    [ M(z)  Φ_zᵀ ] [ z̈ ]   [ Q(z) - bias(z, ż)                       ]
    [ Φ_z    0   ] [ λ ] = [ -(Φ_z ż)_z ż - 2 α Φ_z ż - β² Φ(z)   ]

(index 1 by differentiating the constraints twice, Baumgarte stabilisation with
parameters α, β; α = β = 0 is the plain index-1 system, which drifts). Integrated
with diffrax (`simulate_dae`).
The embedded ODE (Ehsani 2016: the loops as joint functions of q) needs none of this and
does not drift.
"""

from __future__ import annotations

from collections.abc import Callable

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._dynamics import _mass_matrix_and_forces, bias_forces, mass_matrix
from .._functions import Coordinate
from .._loop_closure import ImplicitJointFunction, LoopClosureError
from .._model import Model
from .._solvers import _solver_by_name, _TracedOnce
from ._model_loops import _closures
from ._traditional import open_tree
from .._typing import RealLike


def loop_constraints(model: Model) -> Callable[[Array], Array]:
    """The loop-closure equations ``Φ(z) = 0`` of `model` in all its joint variables.

    ``Φ(z) = [g_1(z[dep_1], q), ..., g_L(z[dep_L], q)]`` stacks the residuals of the
    model's loop closures, with ``q`` read off ``z`` (Hairer and Wanner's constraint
    function of the index-1 formulation).

    **Arguments:**

    - `model`: a closed-chain `Model` whose explicit joints are all `Coordinate`s
      (so that ``q`` is a sub-vector of ``z``), as for the five-bar and Andrews' squeezer.

    **Returns:**

    The function ``phi(z)``: ``z`` (n_joints,) in rad or m, returning the stacked
    residuals (n_constraints,) in the loops' own units (m for position closures).

    **Raises:**

    `LoopClosureError` if a joint has any other function, or a coordinate drives no joint.
    """
    loops = _closures(model)
    q_index = {}
    for i, j in enumerate(model.joints):
        fn = j.function
        if isinstance(fn, Coordinate):
            q_index[fn.index] = i
        elif not isinstance(fn, ImplicitJointFunction):
            raise LoopClosureError(
                f"loop_constraints: joint {j.name!r} has a {type(fn).__name__} function; the DAE "
                "baseline needs coordinates and implicit joints only.")
    if sorted(q_index) != list(range(model.nq)):
        raise LoopClosureError("loop_constraints: every coordinate must be some joint's variable.")
    qsel = jnp.asarray([q_index[k] for k in range(model.nq)])

    def phi(z):
        q = z[qsel]
        return jnp.concatenate([c.residual(z[jnp.asarray(idx)], q) for c, idx in loops])

    return phi


def stabilised_constraints(phi: Callable[[Array], Array], z, zd, alpha: float, beta: float):
    """The acceleration-level constraints ``Φ_z z̈ = c`` of the index-1 DAE with Baumgarte
    stabilisation (Baumgarte 1972): ``c = -(Φ_z ż)_z ż - 2α Φ_z ż - β² Φ(z)``.

    **Arguments:**

    - `phi`: the constraint function ``Φ(z)`` (m constraints).
    - `z`, `zd`: the variables (n,) and their rates.
    - `alpha`, `beta`: the Baumgarte parameters, 1/s.

    **Returns:**

    ``(Φ_z, c)``: (m, n) and (m,).
    """
    g = jax.jacfwd(phi)(z)
    # (dG/dt) z' = ∂²Φ[z', z']: second directional derivative, no Jacobian of G formed.
    gdot_zd = jax.jvp(lambda x: jax.jvp(phi, (x,), (zd,))[1], (z,), (zd,))[1]
    return g, -gdot_zd - 2.0 * alpha * (g @ zd) - beta**2 * phi(z)


class DAEVectorField(eqx.Module):
    """``(z, ż) -> (ż, z̈)`` of the index-1 DAE with Baumgarte stabilisation."""

    tree: Model
    phi: Callable = eqx.field(static=True)
    forces: Callable | None = eqx.field(static=True)
    alpha: float = eqx.field(static=True)
    beta: float = eqx.field(static=True)

    def accelerations(self, z, zd):
        if self.forces is None:
            # The tree's loads, with M and the bias from one recursive pass (the
            # same machinery as the embedded route's forward dynamics).
            m, rhs = _mass_matrix_and_forces(self.tree, z, zd)
        else:
            m, rhs = mass_matrix(self.tree, z), self.forces(self.tree, z) - bias_forces(self.tree, z, zd)
        g, c = stabilised_constraints(self.phi, z, zd, self.alpha, self.beta)
        n, k = z.shape[0], g.shape[0]
        kkt = jnp.block([[m, g.T], [g, jnp.zeros((k, k), dtype=z.dtype)]])
        sol = jnp.linalg.solve(kkt, jnp.concatenate([rhs, c]))
        return sol[:n], sol[n:]

    def __call__(self, t, y, args):
        """On the flat state ``y = (z, ż)`` (as [`jaxmb.simulate`][jaxmb.simulate] does)."""
        n = y.shape[0] // 2
        z, zd = y[:n], y[n:]
        return jnp.concatenate([zd, self.accelerations(z, zd)[0]])


def dae_vector_field(model: Model, forces: Callable | None = None, alpha: float = 0.0,
                     beta: float = 0.0) -> DAEVectorField:
    """The vector field of the index-1 DAE of a closed-chain `model` on its open tree.

    Solves the Lagrange-multiplier system with Baumgarte stabilisation
    (Hairer and Wanner; Baumgarte 1972)

    ``[M Φ_zᵀ; Φ_z 0] [z̈; λ] = [Q - bias; -(Φ_z ż)_z ż - 2α Φ_z ż - β² Φ]``.

    **Arguments:**

    - `model`: a closed-chain `Model` (see `loop_constraints` for the requirements).
    - `forces`: `forces(tree, z) -> (n_joints,)`, the generalized applied forces in
      ``z`` (N·m or N); default: the open tree's own loads, springs included.
    - `alpha`, `beta`: the Baumgarte parameters (1/s); 0 gives the plain index-1
      system, which drifts.

    **Returns:**

    A callable `field(t, y, args) -> (2 n_joints,)` on the flat state ``y = (z, ż)``
    (rad or m, rad/s or m/s), giving ``(ż, z̈)``; `field.accelerations(z, ż)`
    returns ``(z̈, λ)``.
    """
    return DAEVectorField(open_tree(model), loop_constraints(model), forces, float(alpha), float(beta))


class DAESolution(eqx.Module):
    """The result of `simulate_dae`: `ts` (T,) s; `z`, `zd` (T, n_joints) joint variables
    and rates; `drift` (T,) ``= max |Φ(z)|``; diffrax's `stats`."""

    ts: Array
    z: Array
    zd: Array
    drift: Array
    stats: dict


def simulate_dae(model: Model, z0: RealLike, zd0: RealLike, t1: float, *, t0: float = 0.0,
                 ts: RealLike | None = None, alpha: float = 0.0, beta: float = 0.0,
                 rtol: float = 1e-8, atol: float = 1e-8, solver: str | diffrax.AbstractSolver | None = None,
                 max_steps: int = 1_000_000, forces: Callable | None = None) -> DAESolution:
    """Integrate the index-1 DAE of a closed-chain `model` in all its joint variables.

    The traditional baseline (Hairer and Wanner's index-1 formulation with Baumgarte
    stabilisation, see `dae_vector_field`) against which the embedded ODE of
    Ehsani (2016) is compared; reports the constraint drift ``max |Φ(z)|``.

    **Arguments:**

    - `model`: a closed-chain `Model` (see `loop_constraints`).
    - `z0`, `zd0`: consistent initial joint variables and rates (n_joints,), rad or m
      and rad/s or m/s (see `consistent_velocities`).
    - `t1`: the final time (s); `t0` the initial time (s, default 0).
    - `ts`: the save times (T,) in s; default ``[t1]``.
    - `alpha`, `beta`: the Baumgarte parameters (1/s).
    - `rtol`, `atol`: the step-size controller's tolerances.
    - `solver`: a name as in [`jaxmb.simulate`][jaxmb.simulate] (``"dopri8"``, the default, or
      ``"tsit5"``, ``"dopri5"``, ``"kvaerno5"``) or any diffrax solver.
    - `max_steps`: the step budget of `diffrax.diffeqsolve`.
    - `forces`: as in `dae_vector_field`.

    **Returns:**

    A `DAESolution` with `ts` (T,) s, `z` and `zd` (T, n_joints), `drift` (T,) in the
    constraints' units, and diffrax's `stats`.
    """
    field = dae_vector_field(model, forces, alpha, beta)
    z0 = jnp.asarray(z0, dtype=float)
    zd0 = jnp.asarray(zd0, dtype=z0.dtype)
    saveat = diffrax.SaveAt(ts=jnp.asarray([t1] if ts is None else ts, dtype=z0.dtype))
    solver = _solver_by_name("dopri8" if solver is None else solver, "simulate_dae")
    sol = diffrax.diffeqsolve(diffrax.ODETerm(_TracedOnce(field)), solver, t0=t0, t1=t1, dt0=None,
                              y0=jnp.concatenate([z0, zd0]), saveat=saveat,
                              stepsize_controller=diffrax.PIDController(rtol=rtol, atol=atol),
                              max_steps=max_steps)
    n = z0.shape[0]
    z, zd = sol.ys[:, :n], sol.ys[:, n:]
    drift = jax.vmap(lambda x: jnp.max(jnp.abs(field.phi(x))))(z)
    return DAESolution(ts=sol.ts, z=z, zd=zd, drift=drift, stats=sol.stats)


def consistent_velocities(model: Model, z: RealLike, zd_guess: RealLike) -> Float[Array, " n"]:
    """Project joint rates onto the velocity constraint ``Φ_z ż = 0`` (least change).

    ``ż = ż_guess - Φ_zᵀ (Φ_z Φ_zᵀ)⁻¹ Φ_z ż_guess``, the closest consistent rates in
    the Euclidean norm.

    **Arguments:**

    - `model`: a closed-chain `Model` (see `loop_constraints`).
    - `z`: joint variables on the constraint manifold (n_joints,), rad or m.
    - `zd_guess`: rates to project (n_joints,), rad/s or m/s.

    **Returns:**

    The consistent rates (n_joints,), rad/s or m/s.
    """
    phi = loop_constraints(model)
    g = jax.jacfwd(phi)(z)
    return zd_guess - g.T @ jnp.linalg.solve(g @ g.T, g @ zd_guess)
