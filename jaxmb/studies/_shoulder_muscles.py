"""The shoulder study's force sharing (Ehsani 2016, Fig. 21): the tracking's torques shared among
the musculotendon units by static optimization with compliant tendons."""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._errors import warn
from .._forces._base import unit_actuation_matrix
from .._static_optimization import _bounds, _frame
from .._static_optimization_compliant import compliant_frames


def _given_torque(model, specs, q, qd, tau, sample):
    """`compliant_frames`' ``frame_torque`` when the torques are given (its ``qdd`` slot holds them)."""
    return tau


@eqx.filter_jit
def _share(model, q, qd, tau, p, tol, max_steps):
    lo, hi = _bounds(model, (), tau.dtype)
    w = jnp.ones(len(model.muscles), tau.dtype)
    _, x, forces, _, _, balance, _, iterations, ok = compliant_frames(
        model, (), (), q, qd, tau, (), w, lo, hi, p, tol, max_steps, frame_torque=_given_torque,
        actuator_columns=unit_actuation_matrix, affine_frame=_frame)
    return x, forces, balance, iterations, ok


def compliant_static_optimization(model, ts: Float[Array, " T"], q: Float[Array, "T nq"], qd: Float[Array, "T nq"],
                                  tau: Float[Array, "T nq"], *, exponent: float = 2.0,
                                  tolerance: float | None = None) -> np.ndarray:
    """The force sharing of Ehsani (2016), section 4-4 C (Fig. 21): at every frame the
    activations minimise ``Σ a_i^p`` (p = 2, "the squared sum of the activation levels") subject
    to the balance of the given torques and the generalized tendon forces, ``R(q) F_T = tau``
    (``R`` of Eq. 193-195), and the musculotendon equations: ``F_T(a, l_MT, v_MT)`` is each
    muscle's tendon force with its fibre in equilibrium with its compliant tendon
    ([`jaxmb.static_optimization`][jaxmb.static_optimization] with ``tendon="compliant"``
    gives the method; here the torques are the tracking's, not an inverse dynamics). A
    `ForceSharing` function for [`jaxmb.studies.shoulder_muscle_forces`][jaxmb.studies.shoulder_muscle_forces].

    **Arguments:**

    - `model`: a model with muscles (e.g. MoBL-ARMS's shoulder read with
      ``muscles=studies.SHOULDER_MUSCLES``).
    - `ts`: (T,) times, s (unused: each frame is solved on its own).
    - `q`, `qd`: (T, nq) coordinates (rad) and speeds (rad/s).
    - `tau`: (T, nq) generalized forces to balance, N m.
    - `exponent`: ``p`` (2, the dissertation's).
    - `tolerance`: the torque balance relative to ``max(1, max |tau|)`` (default 1e-11 in
      float64, 1e-4 in float32).

    **Returns:**

    (T, n_muscles) tendon forces, N, in ``model.muscle_names`` order.

    **Warns:** `RuntimeWarning` naming the frames where no activations in ``[0, 1]`` balance the
    torques (their forces are the last iterate's).
    """
    q, qd, tau = jnp.asarray(q), jnp.asarray(qd), jnp.asarray(tau)
    if not model.muscles:
        raise ValueError(f"compliant_static_optimization: model {model.name!r} has no muscles; read it with "
                         "read_osim(path, muscles=studies.SHOULDER_MUSCLES, ...).")
    if tolerance is None:
        tolerance = 1e-11 if jnp.finfo(tau.dtype).eps < 1e-10 else 1e-4
    _, forces, _, _, ok = _share(model, q, qd, tau, float(exponent), float(tolerance), 50)
    bad = np.flatnonzero(~np.asarray(ok))
    if bad.size:
        warn(f"compliant_static_optimization: {bad.size} of {ok.shape[0]} frames have no activations in "
             f"[0, 1] that balance the torques (frames {bad[:10].tolist()}...); their forces are the "
             "last iterate's.", RuntimeWarning)
    return np.asarray(forces)
