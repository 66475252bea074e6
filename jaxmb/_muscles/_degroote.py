"""De Groote et al. (2016)'s smooth musculotendon model, as OpenSim 4.6's
``DeGrooteFregly2016Muscle`` computes it."""

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from ._curves import (DEGROOTE_C, degroote_active_force_length, degroote_force_velocity,
                      degroote_passive_force_length, degroote_tendon_force, degroote_tendon_stiffness_parameter)
from ._musculotendon import (AbstractMusculotendonModel, bounded_parameter, init_common, positive_parameters,
                            real_parameters)


class DeGrooteFregly2016Muscle(AbstractMusculotendonModel):
    """De Groote et al. (2016)'s smooth Hill-type model, as OpenSim's ``DeGrooteFregly2016Muscle``;
    every curve is smooth (C-infinity), which makes it the model of choice for gradient-based
    work.

    Curves (De Groote et al. 2016, Ann Biomed Eng 44:2922-2936, supplement Eq. S1-S4, with
    OpenSim's adjusted constants): active force-length (three Gaussian-like terms), passive
    force-length (exponential, zero at 0.2 optimal lengths), tendon force-length
    (exponential), force-velocity (an inverse hyperbolic sine). The fibre force adds OpenSim's
    damping ``beta v/(v_max l_o) F_max`` (`fiber_damping`, 0 by default) to the passive force.
    Activation is used as given (no minimum).

    With `compliant_tendon` True, the fibre length solves the equilibrium that OpenSim's
    ``computeInitialFiberEquilibrium`` solves (by bisection on the normalised tendon force
    there): tendon force = fibre force along the tendon with zero tendon velocity (the
    derivative of the tendon-force state set to 0), so that the fibre velocity is
    ``v = v_MT cos(phi)``. OpenSim's explicit form then reads the fibre velocity back from the
    tendon-force state by inverting the force-velocity curve, which gives the same velocity at
    equilibrium when `fiber_damping` is 0.

    **Arguments** (OpenSim's property in parentheses; defaults are OpenSim 4.6's):

    - `max_isometric_force` (N), `optimal_fiber_length` (m), `tendon_slack_length` (m),
      `pennation_angle_at_optimal` (rad), `max_contraction_velocity` (optimal lengths/s).
    - `tendon_strain_at_one` (tendon_strain_at_one_norm_force, 0.049),
      `passive_strain_at_one` (passive_fiber_strain_at_one_norm_force, 0.6),
      `active_width_scale` (active_force_width_scale, 1), `fiber_damping` (0),
      `passive_scale` (1; 0 is OpenSim's ignore_passive_fiber_force).
    - `compliant_tendon`: False is OpenSim's ignore_tendon_compliance.
    - `name`: for error messages.

    **Raises:** [`jaxmb.ModelError`][jaxmb.ModelError] for non-positive forces, lengths or
    strains, a width scale below 1 or negative damping (as OpenSim refuses them).
    """

    max_isometric_force: Float[Array, ""]
    optimal_fiber_length: Float[Array, ""]
    tendon_slack_length: Float[Array, ""]
    pennation_angle_at_optimal: Float[Array, ""]
    max_contraction_velocity: Float[Array, ""]
    tendon_strain_at_one: Float[Array, ""]
    passive_strain_at_one: Float[Array, ""]
    active_width_scale: Float[Array, ""]
    fiber_damping: Float[Array, ""]
    passive_scale: Float[Array, ""]
    compliant_tendon: bool = eqx.field(static=True)

    def __init__(self, max_isometric_force: Float[ArrayLike, ""] = 1000.0,
                 optimal_fiber_length: Float[ArrayLike, ""] = 0.1, tendon_slack_length: Float[ArrayLike, ""] = 0.2,
                 pennation_angle_at_optimal: Float[ArrayLike, ""] = 0.0,
                 max_contraction_velocity: Float[ArrayLike, ""] = 10.0, *, tendon_strain_at_one=0.049,
                 passive_strain_at_one=0.6, active_width_scale=1.0, fiber_damping=0.0, passive_scale=1.0,
                 compliant_tendon: bool = True, name: str = "DeGrooteFregly2016Muscle"):
        init_common(self, max_isometric_force, optimal_fiber_length, tendon_slack_length, pennation_angle_at_optimal,
                    max_contraction_velocity, compliant_tendon, name)
        real_parameters(self, name, tendon_strain_at_one=tendon_strain_at_one,
                        passive_strain_at_one=passive_strain_at_one, active_width_scale=active_width_scale,
                        fiber_damping=fiber_damping, passive_scale=passive_scale)
        positive_parameters(self, ("tendon_strain_at_one", "passive_strain_at_one"), f"muscle {name!r}")
        bounded_parameter(self, "active_width_scale", 1.0, np.inf, f"muscle {name!r}")
        bounded_parameter(self, "fiber_damping", 0.0, np.inf, f"muscle {name!r}")

    def _activation(self, a):
        return a

    def _fiber_multipliers(self, a, l_norm, v_norm):
        fl = degroote_active_force_length(l_norm, self.active_width_scale)
        fpe = self.passive_scale * degroote_passive_force_length(l_norm, self.passive_strain_at_one)
        fv = degroote_force_velocity(v_norm)
        return fl, fpe, fv, self.fiber_damping * v_norm

    def _tendon_multiplier(self, lt_norm):
        return degroote_tendon_force(lt_norm, self.tendon_strain_at_one)

    def _tendon_length_at_five(self):
        c1, c2, c3 = DEGROOTE_C
        return jnp.log((5.0 + c3) / c1) / degroote_tendon_stiffness_parameter(self.tendon_strain_at_one) + c2

    def _minimum_fiber_length_along_tendon(self):
        return jnp.zeros_like(self.optimal_fiber_length)

    def _clamp_fiber_state(self, x, v, active, passive, fv):
        return v, active, passive, fv

    def _opensim_rigid_tendon_cosine(self, fiber_length, cos_phi):
        # OpenSim 4.6 returns the active fibre force itself, not its part along the tendon.
        return jnp.ones_like(cos_phi)

    def _equilibrium_fiber_velocity(self, a, l, l_mt, v_mt):
        h = self.fiber_width()
        return v_mt * jnp.sqrt(jnp.clip(1.0 - (h / l) ** 2, 1e-30, 1.0))
