"""Thelen (2003)'s musculotendon model, as OpenSim 4.6's ``Thelen2003Muscle`` computes it."""

import math

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from .._errors import ModelError
from .._checks import violated
from ._curves import (THELEN_ETOE_PER_STRAIN, THELEN_FTOE, thelen_active_force_length, thelen_force_velocity,
                      thelen_passive_force_length, thelen_passive_stiffness, thelen_tendon_force,
                      thelen_tendon_stiffness)
from ._musculotendon import (SIGNIFICANT_REAL, AbstractMusculotendonModel, bounded_parameter, init_common,
                            positive_parameters, real_parameters)


class Thelen2003Muscle(AbstractMusculotendonModel):
    """Thelen (2003)'s Hill-type model, as OpenSim's ``Thelen2003Muscle``.

    Curves (Thelen 2003, J Biomech Eng 125:70-77): tendon force-strain Eq. 1-2
    (`thelen_tendon_force`), passive force-length Eq. 3, active
    force-length Eq. 4 (a Gaussian), force-velocity Eq. 6-7 with OpenSim's linear extrapolation
    (`thelen_force_velocity`). The activation that scales the
    active force is clamped to ``[minimum_activation, 1]``, and the fibre to OpenSim's minimum
    length (``h / sin(maximum_pennation_angle)``), as OpenSim does.

    With `compliant_tendon` True (OpenSim's model; it has no rigid-tendon option, and its
    rigid-tendon force is what ``calcInextensibleTendonActiveFiberForce`` and OpenSim's static
    optimization use), the fibre length solves the force equilibrium of OpenSim's
    ``computeInitialFiberEquilibrium``: the lengthening speed ``v_MT`` is shared between tendon
    and fibre in the ratio of their stiffnesses,
    ``v_T = k_M / (k_M + k_T) v_MT`` with ``k_M = d(F_M cos(phi))/dl cos(phi)`` and
    ``k_T = dF_T/dl_T`` (0 tendon velocity while the tendon is slack), ``v = (v_MT - v_T) cos(phi)``,
    and the force-velocity multiplier is evaluated at that ``v``; the stiffnesses use the
    force-velocity multiplier of a first pass at ``f_V = 1`` (OpenSim iterates the same fixed
    point). At ``v_MT = 0`` this is the static equilibrium exactly.

    **Arguments** (OpenSim's property in parentheses; defaults are OpenSim 4.6's):

    - `max_isometric_force` (N), `optimal_fiber_length` (m), `tendon_slack_length` (m),
      `pennation_angle_at_optimal` (rad), `max_contraction_velocity` (optimal lengths/s).
    - `tendon_strain_at_one` (FmaxTendonStrain, 0.04), `passive_strain_at_one`
      (FmaxMuscleStrain, 0.6), `active_shape` (KshapeActive, 0.45), `passive_shape`
      (KshapePassive, 5), `af` (Af, 0.25), `flen` (Flen, 1.4), `fv_extrapolation_threshold`
      (fv_linear_extrap_threshold, 0.95), `maximum_pennation_angle` (rad, acos(0.1)),
      `minimum_activation` (0.01).
    - `compliant_tendon`: True for the equilibrium model, False for a rigid tendon.
    - `name`: for error messages.

    **Raises:** [`jaxmb.ModelError`][jaxmb.ModelError] for a non-positive force, length,
    strain, shape, Af, or Flen <= 1 (as OpenSim refuses them).
    """

    max_isometric_force: Float[Array, ""]
    optimal_fiber_length: Float[Array, ""]
    tendon_slack_length: Float[Array, ""]
    pennation_angle_at_optimal: Float[Array, ""]
    max_contraction_velocity: Float[Array, ""]
    tendon_strain_at_one: Float[Array, ""]
    passive_strain_at_one: Float[Array, ""]
    active_shape: Float[Array, ""]
    passive_shape: Float[Array, ""]
    af: Float[Array, ""]
    flen: Float[Array, ""]
    fv_extrapolation_threshold: Float[Array, ""]
    maximum_pennation_angle: Float[Array, ""]
    minimum_activation: Float[Array, ""]
    compliant_tendon: bool = eqx.field(static=True)

    def __init__(self, max_isometric_force: Float[ArrayLike, ""] = 1000.0,
                 optimal_fiber_length: Float[ArrayLike, ""] = 0.1, tendon_slack_length: Float[ArrayLike, ""] = 0.2,
                 pennation_angle_at_optimal: Float[ArrayLike, ""] = 0.0,
                 max_contraction_velocity: Float[ArrayLike, ""] = 10.0, *,
                 tendon_strain_at_one=0.04, passive_strain_at_one=0.6, active_shape=0.45, passive_shape=5.0,
                 af=0.25, flen=1.4, fv_extrapolation_threshold=0.95, maximum_pennation_angle=math.acos(0.1),
                 minimum_activation=0.01, compliant_tendon: bool = True, name: str = "Thelen2003Muscle"):
        init_common(self, max_isometric_force, optimal_fiber_length, tendon_slack_length, pennation_angle_at_optimal,
                    max_contraction_velocity, compliant_tendon, name)
        real_parameters(self, name, tendon_strain_at_one=tendon_strain_at_one,
                        passive_strain_at_one=passive_strain_at_one, active_shape=active_shape,
                        passive_shape=passive_shape, af=af, flen=flen,
                        fv_extrapolation_threshold=fv_extrapolation_threshold,
                        maximum_pennation_angle=maximum_pennation_angle,
                        minimum_activation=minimum_activation)
        positive_parameters(self, ("tendon_strain_at_one", "passive_strain_at_one", "active_shape", "passive_shape",
                                   "af"), f"muscle {name!r}")
        if violated(lambda f: f > 1.0, self.flen):
            raise ModelError(f"muscle {name!r}: Flen must be greater than 1, got {float(np.min(np.asarray(self.flen)))}.")
        bounded_parameter(self, "maximum_pennation_angle", 0.0, math.pi / 2, f"muscle {name!r}")
        bounded_parameter(self, "minimum_activation", 0.0, 1.0, f"muscle {name!r}", high_open=True)

    def _activation(self, a):
        return jnp.clip(a, self.minimum_activation, 1.0)

    def _fiber_multipliers(self, a, l_norm, v_norm):
        fl = thelen_active_force_length(l_norm, self.active_shape)
        fpe = thelen_passive_force_length(l_norm, self.passive_strain_at_one, self.passive_shape)
        fv = thelen_force_velocity(v_norm, a, self.af, self.flen, self.fv_extrapolation_threshold)
        return fl, fpe, fv, jnp.zeros_like(fl)

    def _tendon_multiplier(self, lt_norm):
        return thelen_tendon_force(lt_norm, self.tendon_strain_at_one)

    def _tendon_length_at_five(self):
        etoe = THELEN_ETOE_PER_STRAIN * self.tendon_strain_at_one
        klin = (1.0 - THELEN_FTOE) / (self.tendon_strain_at_one - etoe)
        return 1.0 + etoe + (5.0 - THELEN_FTOE) / klin

    def _minimum_fiber_length(self):
        h = self.fiber_width()
        return jnp.where(self.maximum_pennation_angle > SIGNIFICANT_REAL,
                         h / jnp.sin(self.maximum_pennation_angle), 0.01 * self.optimal_fiber_length)

    def _minimum_fiber_length_along_tendon(self):
        return self._minimum_fiber_length() * jnp.cos(self.maximum_pennation_angle)

    def _clamp_fiber_state(self, x, v, active, passive, fv):
        return v, active, passive, fv

    def _opensim_rigid_tendon_cosine(self, fiber_length, cos_phi):
        return cos_phi  # the force along the tendon

    def _equilibrium_fiber_velocity(self, a, l, l_mt, v_mt):
        lo, fmax, ls = self.optimal_fiber_length, self.max_isometric_force, self.tendon_slack_length
        h = self.fiber_width()
        s2 = jnp.clip((h / l) ** 2, 0.0, 1.0 - 1e-15)
        cos_phi = jnp.sqrt(1.0 - s2)
        lt = l_mt - l * cos_phi
        l_norm = l / lo
        fl = thelen_active_force_length(l_norm, self.active_shape)
        dfl = -2.0 * (l_norm - 1.0) / self.active_shape * fl
        fpe = thelen_passive_force_length(l_norm, self.passive_strain_at_one, self.passive_shape)
        dfpe = thelen_passive_stiffness(l_norm, self.passive_strain_at_one, self.passive_shape)
        k_t = fmax / ls * thelen_tendon_stiffness(lt / ls, self.tendon_strain_at_one)
        dcos = s2 / (l * cos_phi)  # d cos(phi) / d l at constant thickness
        fv = jnp.ones_like(l)
        v = jnp.zeros_like(l)
        for _ in range(2):  # OpenSim's initMuscleState: stiffnesses at f_V = 1, then at the f_V found
            d_fm = fmax / lo * (a * fv * dfl + dfpe)
            fm = fmax * (a * fl * fv + fpe)
            k_m = (d_fm * cos_phi + fm * dcos) * cos_phi
            total = k_m + k_t
            split = (jnp.abs(total) > SIGNIFICANT_REAL) & (lt > ls)
            v_t = jnp.where(split, k_m / jnp.where(split, total, 1.0) * v_mt, v_mt)
            v = (v_mt - v_t) * cos_phi
            fv = thelen_force_velocity(v / (self.max_contraction_velocity * lo), a, self.af, self.flen,
                                       self.fv_extrapolation_threshold)
        return v
