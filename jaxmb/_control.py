"""Controllers that produce generalized forces during a simulation.

A controller may carry its own state ``z`` (e.g. the integral of a PID error), any
pytree of arrays, integrated by [`jaxmb.simulate`][jaxmb.simulate] together with ``q`` and ``q'``
(the ``controller`` field of `jaxmb.SimulationState`).
"""

import abc
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, PyTree

from ._checks import coordinate_vector, finite, flag, float_array, violated
from ._dynamics import _mass_matrix_and_forces
from ._errors import ModelError
from ._functions._base import coordinate_index
from ._muscles import (check_path_force_route, muscle_lengths_and_moment_arms, musculotendon_activation_rates,
                       musculotendon_states)
from ._muscles._muscle_forces import _groups
from ._typing import RealLike


class AbstractController(eqx.Module):
    """A feedback law ``tau = torque(t, q, q', z)`` with its own state ``z``, integrated as
    ``z' = state_derivative(t, q, q', z)`` together with the mechanics.

    Concrete controllers are final and implement the three abstract methods (equinox's
    abstract/final pattern). `z` is any pytree of arrays (an array of size 0 for a
    controller without state); [`jaxmb.simulate`][jaxmb.simulate] weighs it in its step-size
    control like ``q`` and ``q'``.
    """

    @abc.abstractmethod
    def init(self, q0: Float[Array, " nq"], qd0: Float[Array, " nq"]) -> PyTree[Array]:
        """The controller state at the start, a pytree of arrays in the dtype of `q0`.

        **Arguments:**

        - `q0`, `qd0`: the initial coordinates and rates (nq,), rad or m, rad/s or m/s.
        """

    @abc.abstractmethod
    def torque(self, t, q: Float[Array, " nq"], qd: Float[Array, " nq"], z: PyTree[Array]) -> Float[Array, " nq"]:
        """The generalized force (N m or N per coordinate, (nq,)) applied at the coordinates.

        **Arguments:**

        - `t`: the time, s.
        - `q`, `qd`: the coordinates and rates (nq,).
        - `z`: the controller state (the pytree `init` returns).
        """

    @abc.abstractmethod
    def state_derivative(self, t, q: Float[Array, " nq"], qd: Float[Array, " nq"],
                         z: PyTree[Array]) -> PyTree[Array]:
        """``z'``: a pytree of the structure, shapes and dtypes of `z`."""


def _gains(controller: str, name: str, value, shape: tuple[int, ...], per: str) -> Array:
    """A controller's gain (or target) as a float array broadcast to `shape`, checked:
    broadcastable, and finite where concrete (a ``ValueError`` naming the argument)."""
    x = float_array(value, float, what=f"{controller}: {name}")
    try:
        gain = jnp.broadcast_to(x, shape)
    except ValueError:
        raise ValueError(f"{controller}: {name} must be a scalar or have shape {shape} ({per}), "
                         f"got {x.shape}.") from None
    # checked before the broadcast, which an enclosing jit traces
    if violated(np.isfinite, x):
        raise ValueError(f"{controller}: {name} must be finite, got {np.asarray(x)}.")
    return gain


class PID(AbstractController):
    """PID on selected coordinates: ``tau_k = kp e + ki ∫e dt - kd q'_k`` with ``e = r - q_k``.

    Watanabe and Duarte's commented controller for the double pendulum holds the elbow
    at ``r = π/3`` with ``M12 = 30 (r - θ2) - 2 θ2' + 3 ∫(r - θ2) dt``. The derivative
    acts on the measured rate (no derivative kick).

    **Arguments:**

    - `indices`: the k controlled coordinates (an int for one), distinct, each below the
      simulated model's number of coordinates (checked by `init`).
    - `target`: ``r``, (k,) or a scalar, in the coordinates' units (rad or m).
    - `kp`, `ki`, `kd`: gains, (k,) or scalars: N·m/rad, N·m/(rad s) and N·m s/rad
      for a rotational coordinate (N/m, N/(m s), N s/m for a translational one).
    - `selection`: (nq, k), maps the k controlled torques to generalized forces
      (default: each acts at its own coordinate).

    The state ``z`` is ``∫e dt``, (k,).
    """

    indices: tuple[int, ...] = eqx.field(static=True)
    target: Float[Array, " k"]
    kp: Float[Array, " k"]
    ki: Float[Array, " k"]
    kd: Float[Array, " k"]
    selection: Float[Array, "nq k"] | None

    def __init__(self, indices, target: RealLike, kp: RealLike, ki: RealLike = 0.0, kd: RealLike = 0.0,
                 selection: RealLike | None = None):
        # int() cut 1.7 to 1; no index at all failed at the first step with JAX's indexer error
        self.indices = tuple(coordinate_index(i, "PID") for i in (indices if np.ndim(indices) else (indices,)))
        if not self.indices or len(set(self.indices)) != len(self.indices):
            raise ValueError(f"PID: indices must be one or more distinct coordinate indices >= 0, got {indices!r}.")
        k = len(self.indices)
        self.target, self.kp, self.ki, self.kd = (
            _gains("PID", name, value, (k,), "one per controlled coordinate")
            for name, value in (("target", target), ("kp", kp), ("ki", ki), ("kd", kd)))
        self.selection = None if selection is None else finite(float_array(selection, float), "PID: selection")
        if self.selection is not None and (self.selection.ndim != 2 or self.selection.shape[1] != k):
            raise ValueError(f"PID: selection must have shape (nq, {k}), one column per controlled coordinate, "
                             f"got {self.selection.shape}.")

    def init(self, q0, qd0):
        nq = jnp.shape(q0)[0]
        # Checked here, where the model's size is known: JAX's indexing would clamp a read
        # past the end and drop the write, and the run would go uncontrolled.
        if max(self.indices, default=-1) >= nq:
            raise ValueError(f"PID: indices {self.indices} must be below the model's number of coordinates, {nq}.")
        if self.selection is not None and self.selection.shape[0] != nq:
            raise ValueError(f"PID: selection must have shape ({nq}, {len(self.indices)}) for a model of {nq} "
                             f"coordinates, got {self.selection.shape}.")
        return jnp.zeros(len(self.indices), dtype=jnp.asarray(q0).dtype)

    def _error(self, q):
        return self.target.astype(q.dtype) - q[jnp.asarray(self.indices)]

    def torque(self, t, q, qd, z):
        u = self.kp * self._error(q) + self.ki * z - self.kd * qd[jnp.asarray(self.indices)]
        if self.selection is not None:
            return self.selection.astype(q.dtype) @ u
        return jnp.zeros_like(q).at[jnp.asarray(self.indices)].set(u)

    def state_derivative(self, t, q, qd, z):
        return self._error(q)


class ComputedTorque(AbstractController):
    """Computed-torque tracking: ``tau = ID(q, q', q''_ref + kd (q'_ref - q') + kp (q_ref - q))``.

    ``ID`` is the value of [`jaxmb.inverse_dynamics`][jaxmb.inverse_dynamics], ``M(q) q'' + bias(q, q')``
    (Ehsani 2016, Eq. 200), formed from ``M`` and the bias as the forward dynamics forms
    them, so that a simulation of the controller's own model evaluates them once per
    right-hand side; with an exact model the error ``e = q_ref - q`` obeys
    ``e'' + kd e' + kp e = 0``.

    **Arguments:**

    - `model`: the model used for inverse dynamics (it may differ from the simulated one).
    - `reference`: a callable ``t -> (q_ref, qd_ref, qdd_ref)``, each (nq,) (checked where
      traced, a `ModelError` naming it): rad or m,
      rad/s or m/s, rad/s² or m/s²; a function, or an equinox Module whose arrays
      (the trajectory's parameters) stay leaves of the controller, so that one
      compiled simulation serves every trajectory of a kind (and ``vmap`` over them).
    - `kp`, `kd`: gains, (nq,) or scalars, in 1/s² and 1/s.

    It has no state (an array of size 0).
    """

    model: object
    reference: Callable
    kp: Float[Array, " nq"]
    kd: Float[Array, " nq"]

    def __init__(self, model, reference, kp: RealLike, kd: RealLike):
        if not callable(reference):
            raise TypeError(f"ComputedTorque: reference must be a callable t -> (q_ref, qd_ref, qdd_ref), got "
                            f"{type(reference).__name__}.")
        out = jax.eval_shape(reference, jnp.zeros(()))  # shapes only: checked again where it is traced
        if not (isinstance(out, (tuple, list)) and len(out) == 3):
            got = f"{len(out)} values" if isinstance(out, (tuple, list)) else type(out).__name__
            raise ValueError(f"ComputedTorque: reference(t) must return the three arrays (q_ref, qd_ref, qdd_ref), "
                             f"got {got}.")
        self.model = model
        self.reference = reference
        self.kp, self.kd = (_gains("ComputedTorque", name, value, (model.nq,), "one per coordinate")
                            for name, value in (("kp", kp), ("kd", kd)))

    def init(self, q0, qd0):
        return jnp.zeros((0,), dtype=jnp.asarray(q0).dtype)

    def torque(self, t, q, qd, z):
        q = coordinate_vector(self.model, q, "ComputedTorque", "q")
        qd = coordinate_vector(self.model, qd, "ComputedTorque", "qd", dtype=q.dtype)
        q_ref, qd_ref, qdd_ref = (coordinate_vector(self.model, x, "ComputedTorque", f"reference(t)'s {name}",
                                                    dtype=q.dtype)
                                  for x, name in zip(self.reference(t), ("q_ref", "qd_ref", "qdd_ref")))
        qdd = qdd_ref + self.kd * (qd_ref - qd) + self.kp * (q_ref - q)
        # ``M(q) q'' + bias - Q_loads`` from the terms the recursive forward dynamics forms
        # (`inverse_dynamics`' value): simulating the controller's own model, the
        # right-hand side then evaluates M and the bias once for both (XLA merges the
        # identical computations) instead of a Newton-Euler pass next to them.
        m, forces = _mass_matrix_and_forces(self.model, q, qd)
        return m @ qdd.astype(q.dtype) - forces

    def state_derivative(self, t, q, qd, z):
        return jnp.zeros_like(z)


class MuscleExcitations(AbstractController):
    """Muscles driven by excitations (OpenSim's forward simulation with a prescribed
    controller): the state is the muscles' activations ``a``,

    ``tau = R(q) F_T(a, L(q), L'(q, q'))``,  ``a' = f(u(t), a)``,

    with ``R = -dL/dq`` the moment arms (Ehsani 2016, Eq. 195; or the frozen path's,
    `moment_arms`), ``L' = -Rᵀ q'`` the lengthening speeds, ``F_T`` each muscle's tendon force by its force model
    (`Muscle.force_model`: Thelen 2003, Millard et al. 2013, De Groote et al. 2016) and ``f``
    its activation dynamics (`Muscle.activation_dynamics`).
    A compliant tendon is taken in equilibrium at every evaluation (the fibre length
    from the force model's equilibrium, not a state of its own).

    **Arguments:**

    - `model`: the model whose muscles act (its muscles need a force model and activation
      dynamics).
    - `excitation`: a callable ``t -> u`` with ``u`` (n_muscles,) in [0, 1] (values outside
      are clipped), in `model.muscle_names` order; a function or an equinox Module (whose
      arrays stay leaves, so that ``jax.grad`` reaches them).
    - `activation0`: initial activations (n_muscles,) or a scalar (default 0.05, OpenSim's
      default activation).
    - `inextensible_tendon`: True to take every tendon as rigid.
    - `moment_arms`: ``"closed_form"`` (default, ``R = -dL/dq``: the muscles do the work
      their lengths say) or ``"frozen_path"`` (OpenSim's: the tension applied, and the speed
      measured, along the path frozen at q; [`jaxmb.moment_arms`][jaxmb.moment_arms]'
      ``method``). The two differ where a path wraps over a cylinder, ellipsoid or torus; the
      frozen path is the cheaper there.

    **Raises:** [`jaxmb.ModelError`][jaxmb.ModelError] for a model without muscles or a
    muscle without a force model or activation dynamics; ``ValueError`` when `excitation`
    does not return (n_muscles,), `activation0` has the wrong shape or an entry outside
    [0, 1] (NaN included), or `moment_arms` is unknown.
    """

    model: object
    excitation: Callable
    activation0: Float[Array, " n_muscles"]
    inextensible_tendon: bool = eqx.field(static=True)
    moment_arms: str = eqx.field(static=True)

    def __init__(self, model, excitation: Callable, activation0: RealLike = 0.05, *, inextensible_tendon: bool = False,
                 moment_arms: str = "closed_form"):
        check_path_force_route("MuscleExcitations", "moment_arms", moment_arms)
        n = len(model.muscles)
        if not n:
            raise ModelError(f"MuscleExcitations: model {model.name!r} has no muscles.")
        for part in ("force_model", "activation_dynamics"):
            _groups(model, part)  # names a muscle without one
        if not callable(excitation):
            raise TypeError(f"MuscleExcitations: excitation must be a callable t -> (n_muscles,) excitations, got "
                            f"{type(excitation).__name__}.")
        shape = jax.eval_shape(lambda t: jnp.asarray(excitation(t)), jnp.zeros(())).shape  # a list is an array too
        if shape != (n,):
            raise ValueError(f"MuscleExcitations: excitation(t) must return shape ({n},), one excitation per "
                             f"muscle of {model.name!r} ({', '.join(model.muscle_names)}), got {shape}.")
        a0 = float_array(activation0, float)
        if a0.shape not in ((), (n,)):
            raise ValueError(f"MuscleExcitations: activation0 must be a scalar or have shape ({n},), got {a0.shape}.")
        # Checked before the broadcast, which under an enclosing jit would trace a concrete value.
        if violated(lambda a: (a >= 0.0) & (a <= 1.0), a0):  # NaN too: it would pass into the forces silently
            values = np.broadcast_to(np.asarray(a0), (n,))
            bad = [f"{m} ({float(a)})" for m, a in zip(model.muscle_names, values) if not 0.0 <= a <= 1.0]
            raise ValueError(f"MuscleExcitations: activation0 must be in [0, 1]; muscles {', '.join(bad)} are not. "
                             "Give initial activations between 0 and 1.")
        self.model = model
        self.excitation = excitation
        self.activation0 = jnp.broadcast_to(a0, (n,))
        self.inextensible_tendon = flag(inextensible_tendon, "MuscleExcitations: inextensible_tendon")
        self.moment_arms = moment_arms

    def init(self, q0, qd0):
        return self.activation0.astype(jnp.asarray(q0).dtype)

    def tendon_forces(self, q: Float[Array, " nq"], qd: Float[Array, " nq"],
                      a: Float[Array, " n_muscles"]) -> tuple[Float[Array, " n_muscles"], Float[Array, "nq n_muscles"]]:
        """The tendon forces ``F_T`` (n_muscles,), N, at activations `a` and the moment arms ``R`` (nq, n_muscles), m."""
        lengths, R = muscle_lengths_and_moment_arms(self.model, q, method=self.moment_arms)
        state = musculotendon_states(self.model, jnp.clip(a, 0.0, 1.0), lengths, -(R.T @ qd),
                                     inextensible_tendon=self.inextensible_tendon)
        return state.tendon_force, R

    def torque(self, t, q, qd, z):
        force, R = self.tendon_forces(q, qd, z)
        return R @ force

    def state_derivative(self, t, q, qd, z):
        u = jnp.clip(jnp.asarray(self.excitation(t), dtype=z.dtype), 0.0, 1.0)
        return musculotendon_activation_rates(self.model, u, z)
