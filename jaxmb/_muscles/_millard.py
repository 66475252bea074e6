"""Millard et al. (2013)'s musculotendon model, as OpenSim 4.6's
``Millard2012EquilibriumMuscle`` computes it."""

import math

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from .._errors import ModelError
from .._safe import sqrt0
from ._bezier import SegmentedQuinticCurve
from .._checks import float_array, is_concrete
from ._millard_curves import (FIBER_DEFAULTS, TENDON_DEFAULTS, active_force_length_curve,
                              active_force_length_problems, fiber_force_length_curve, fiber_force_length_problems,
                              force_velocity_curve, force_velocity_problems, tendon_force_length_curve,
                              tendon_force_length_problems)
from ._musculotendon import SIGNIFICANT_REAL, AbstractMusculotendonModel, init_common, real_parameters

MIN_NONZERO_DAMPING = 0.001
"""OpenSim's ``MIN_NONZERO_DAMPING_COEFFICIENT``: a smaller fibre damping is the undamped model."""
_CURVE_FIELDS = (
    # jaxmb field, OpenSim curve, OpenSim property, OpenSim 4.6 default (None: derived)
    ("active_min_norm_fiber_length", "ActiveForceLengthCurve", "min_norm_active_fiber_length", 0.47 - 0.0259),
    ("active_transition_norm_fiber_length", "ActiveForceLengthCurve", "transition_norm_fiber_length", 0.73),
    ("active_max_norm_fiber_length", "ActiveForceLengthCurve", "max_norm_active_fiber_length", 1.8123),
    ("active_shallow_ascending_slope", "ActiveForceLengthCurve", "shallow_ascending_slope", 0.8616),
    ("active_minimum_value", "ActiveForceLengthCurve", "minimum_value", 0.1),
    ("fv_concentric_slope_at_vmax", "ForceVelocityCurve", "concentric_slope_at_vmax", 0.0),
    ("fv_concentric_slope_near_vmax", "ForceVelocityCurve", "concentric_slope_near_vmax", 0.25),
    ("fv_isometric_slope", "ForceVelocityCurve", "isometric_slope", 5.0),
    ("fv_eccentric_slope_at_vmax", "ForceVelocityCurve", "eccentric_slope_at_vmax", 0.0),
    ("fv_eccentric_slope_near_vmax", "ForceVelocityCurve", "eccentric_slope_near_vmax", 0.15),
    ("fv_max_eccentric_multiplier", "ForceVelocityCurve", "max_eccentric_velocity_force_multiplier", 1.4),
    ("fv_concentric_curviness", "ForceVelocityCurve", "concentric_curviness", 0.6),
    ("fv_eccentric_curviness", "ForceVelocityCurve", "eccentric_curviness", 0.9),
    ("passive_strain_at_zero_force", "FiberForceLengthCurve", "strain_at_zero_force", 0.0),
    ("passive_strain_at_one_norm_force", "FiberForceLengthCurve", "strain_at_one_norm_force", 0.7),
    ("passive_stiffness_at_low_force", "FiberForceLengthCurve", "stiffness_at_low_force", None),
    ("passive_stiffness_at_one_norm_force", "FiberForceLengthCurve", "stiffness_at_one_norm_force", None),
    ("passive_curviness", "FiberForceLengthCurve", "curviness", None),
    ("tendon_strain_at_one_norm_force", "TendonForceLengthCurve", "strain_at_one_norm_force", 0.049),
    ("tendon_stiffness_at_one_norm_force", "TendonForceLengthCurve", "stiffness_at_one_norm_force", None),
    ("tendon_norm_force_at_toe_end", "TendonForceLengthCurve", "norm_force_at_toe_end", None),
    ("tendon_curviness", "TendonForceLengthCurve", "curviness", None),
)
CURVE_PROPERTIES = {f: (curve, prop, default) for f, curve, prop, default in _CURVE_FIELDS}
"""jaxmb field -> (OpenSim curve element, property, OpenSim 4.6 default or None if derived)."""


class Millard2012EquilibriumMuscle(AbstractMusculotendonModel):
    """Millard et al. (2013)'s Hill-type model, as OpenSim 4.6's ``Millard2012EquilibriumMuscle``.

    The four curves are segmented quintic Bezier curves (Millard et al. 2013, J Biomech Eng
    135:021005, Fig. 2-3 and appendix) built from OpenSim's curve parameters exactly as OpenSim's
    ``SmoothSegmentedFunctionFactory`` builds them: active force-length ``f_L`` (five corners),
    force-velocity ``f_V`` (four), passive fibre force-length ``f_PE`` (two) and tendon
    force-length ``f_T`` (two), each extrapolated linearly beyond its ends. The fibre force is
    ``F_M = F_max (a f_L f_V + f_PE + beta v/(v_max l_o))`` (Millard et al. 2013, Eq. 8, the
    damped model; ``beta`` = `fiber_damping`), pennated at constant thickness; the activation is
    clamped to ``[minimum_activation, 1]``, and the fibre to OpenSim's shortest length
    ``max(min_norm_active_fiber_length l_o, h / sin(maximum_pennation_angle))``, where (fibre
    shortening further) OpenSim sets the fibre forces and velocity to zero, as here.

    The curve parameters are not stored: the constructor builds the curves' control points
    once (fields `active_force_length`, `force_velocity`, `passive_force_length`,
    `tendon_force_length`, array leaves; NumPy for concrete parameters, `jax.numpy` where they are
    traced). `jax.grad` reaches the forces, lengths, angles, damping and control points; for the
    derivative with respect to a curve parameter, construct the model inside the differentiated
    function.

    OpenSim's parameter updates are applied where the curves are built: with a rigid tendon or
    the damped model (`fiber_damping` >= 0.001) the active curve's minimum is 0 and the
    force-velocity slopes at +-vmax are 0; with a compliant tendon and no damping (the classic
    model, Millard et al. 2013, Eq. 6) the minimum is at least 0.1 and the slopes at vmax at least
    half the slopes near vmax, and `minimum_activation` must be at least 0.01. With a rigid tendon
    a negative fibre force is set to 0 (OpenSim's damping absorbs it).

    With `compliant_tendon` True, the fibre length solves the equilibrium of OpenSim's
    ``computeInitialFiberEquilibrium`` (``estimateMuscleFiberState``): ``F_M cos(phi) = F_max
    f_T(l_T/l_s)`` at zero fibre velocity (``f_V = 1``, no damping force: the tendon takes all of
    ``v_MT``), whatever ``v_MT``. That is what OpenSim 4.6 computes: its
    ``computeInitialFiberEquilibrium`` asks for the static equilibrium, and
    ``computeFiberEquilibrium(state, true)`` passes its flag on as ``staticSolution``, so it is
    static too.

    **Arguments** (OpenSim's property in parentheses; defaults are OpenSim 4.6's):

    - `max_isometric_force` (N), `optimal_fiber_length` (m), `tendon_slack_length` (m),
      `pennation_angle_at_optimal` (rad), `max_contraction_velocity` (optimal lengths/s).
    - `fiber_damping` (0.1), `minimum_activation` (0.01), `maximum_pennation_angle` (rad, acos(0.1)).
    - `active_*`: ActiveForceLengthCurve's `min_norm_active_fiber_length` (0.4441),
      `transition_norm_fiber_length` (0.73), `max_norm_active_fiber_length` (1.8123),
      `shallow_ascending_slope` (0.8616), `minimum_value` (0.1).
    - `fv_*`: ForceVelocityCurve's `concentric_slope_at_vmax` (0), `concentric_slope_near_vmax`
      (0.25), `isometric_slope` (5), `eccentric_slope_at_vmax` (0), `eccentric_slope_near_vmax`
      (0.15), `max_eccentric_velocity_force_multiplier` (1.4), `concentric_curviness` (0.6),
      `eccentric_curviness` (0.9).
    - `passive_*`: FiberForceLengthCurve's `strain_at_zero_force` (0), `strain_at_one_norm_force`
      (0.7), and the optional `stiffness_at_low_force`, `stiffness_at_one_norm_force`,
      `curviness` (all None: OpenSim's fitted 0.2, 2/(e1 - e0), 0.75).
    - `tendon_*`: TendonForceLengthCurve's `strain_at_one_norm_force` (0.049) and the optional
      `stiffness_at_one_norm_force`, `norm_force_at_toe_end`, `curviness` (all None: OpenSim's
      fitted 1.375/e0, 2/3, 0.5).
    - `compliant_tendon`: False is OpenSim's ``ignore_tendon_compliance``.
    - `name`: for error messages.

    **Raises:** [`jaxmb.ModelError`][jaxmb.ModelError] naming the muscle and the property for
    every parameter OpenSim refuses (non-positive force or lengths, curve parameters out of their
    ranges, corners that are not C-shaped, a minimum activation below 0.01 in the classic model).
    """

    max_isometric_force: Float[Array, ""]
    optimal_fiber_length: Float[Array, ""]
    tendon_slack_length: Float[Array, ""]
    pennation_angle_at_optimal: Float[Array, ""]
    max_contraction_velocity: Float[Array, ""]
    fiber_damping: Float[Array, ""]
    minimum_activation: Float[Array, ""]
    maximum_pennation_angle: Float[Array, ""]
    active_force_length: SegmentedQuinticCurve
    force_velocity: SegmentedQuinticCurve
    passive_force_length: SegmentedQuinticCurve
    tendon_force_length: SegmentedQuinticCurve
    compliant_tendon: bool = eqx.field(static=True)
    damped: bool = eqx.field(static=True)

    def __init__(self, max_isometric_force: Float[ArrayLike, ""] = 1000.0,
                 optimal_fiber_length: Float[ArrayLike, ""] = 0.1, tendon_slack_length: Float[ArrayLike, ""] = 0.2,
                 pennation_angle_at_optimal: Float[ArrayLike, ""] = 0.0,
                 max_contraction_velocity: Float[ArrayLike, ""] = 10.0, *, fiber_damping=0.1,
                 minimum_activation=0.01, maximum_pennation_angle=math.acos(0.1),
                 compliant_tendon: bool = True, name: str = "Millard2012EquilibriumMuscle", **curve_parameters):
        init_common(self, max_isometric_force, optimal_fiber_length, tendon_slack_length, pennation_angle_at_optimal,
                    max_contraction_velocity, compliant_tendon, name)
        unknown = sorted(set(curve_parameters) - set(CURVE_PROPERTIES))
        if unknown:
            raise TypeError(f"Millard2012EquilibriumMuscle: unknown arguments {unknown}; the curve parameters are "
                            f"{sorted(CURVE_PROPERTIES)}.")
        real_parameters(self, name, fiber_damping=fiber_damping, minimum_activation=minimum_activation,
                        maximum_pennation_angle=maximum_pennation_angle)
        p = {f: float_array(curve_parameters.get(f, d)) for f, (_, _, d) in CURVE_PROPERTIES.items()
             if curve_parameters.get(f, d) is not None}
        self._fitted_defaults(p, name)
        if is_concrete(self.fiber_damping):
            self.damped = bool(float(self.fiber_damping) >= MIN_NONZERO_DAMPING)
        else:
            self.damped = True
        self._check(p, name)
        # NumPy builds the control points of concrete parameters (fast at import); jax.numpy
        # where they are traced, so that gradients reach the curve parameters
        xp = np if is_concrete(p) else jnp
        q = {f: (np.asarray(v, dtype=np.float64) if xp is np else v) for f, v in p.items()}
        ylow, con_at, ecc_at = self._in_use(q["active_minimum_value"], q["fv_concentric_slope_at_vmax"],
                                            q["fv_eccentric_slope_at_vmax"], q["fv_concentric_slope_near_vmax"],
                                            q["fv_eccentric_slope_near_vmax"], xp.maximum,
                                            xp.minimum)
        built = (
            active_force_length_curve(q["active_min_norm_fiber_length"], q["active_transition_norm_fiber_length"],
                                      q["active_max_norm_fiber_length"], q["active_shallow_ascending_slope"], ylow,
                                      xp=xp),
            force_velocity_curve(con_at, q["fv_concentric_slope_near_vmax"], q["fv_isometric_slope"], ecc_at,
                                 q["fv_eccentric_slope_near_vmax"], q["fv_max_eccentric_multiplier"],
                                 q["fv_concentric_curviness"], q["fv_eccentric_curviness"], xp=xp),
            fiber_force_length_curve(q["passive_strain_at_zero_force"], q["passive_strain_at_one_norm_force"],
                                     q["passive_stiffness_at_low_force"], q["passive_stiffness_at_one_norm_force"],
                                     q["passive_curviness"], xp=xp),
            tendon_force_length_curve(q["tendon_strain_at_one_norm_force"], q["tendon_stiffness_at_one_norm_force"],
                                      q["tendon_norm_force_at_toe_end"], q["tendon_curviness"], xp=xp))
        dtype = self.optimal_fiber_length.dtype
        (self.active_force_length, self.force_velocity, self.passive_force_length,
         self.tendon_force_length) = (SegmentedQuinticCurve(*(jnp.asarray(a, dtype=dtype) for a in c)) for c in built)

    @staticmethod
    def _fitted_defaults(p, name):
        """OpenSim's fitted passive and tendon curves where all their optional properties are absent."""
        for fields, defaults in (
                (("passive_stiffness_at_low_force", "passive_stiffness_at_one_norm_force", "passive_curviness"),
                 lambda: FIBER_DEFAULTS(p["passive_strain_at_zero_force"], p["passive_strain_at_one_norm_force"])),
                (("tendon_stiffness_at_one_norm_force", "tendon_norm_force_at_toe_end", "tendon_curviness"),
                 lambda: TENDON_DEFAULTS(p["tendon_strain_at_one_norm_force"]))):
            present = [f in p for f in fields]
            if all(present):
                continue
            if any(present):
                raise ModelError(f"muscle {name!r}: give all of {[CURVE_PROPERTIES[f][1] for f in fields]} of its "
                                 f"{CURVE_PROPERTIES[fields[0]][0]} or none of them (OpenSim's fitted curve).")
            p.update({f: float_array(v) for f, v in zip(fields, defaults())})

    def _check(self, p, name):
        leaves = [self.pennation_angle_at_optimal, self.maximum_pennation_angle, self.fiber_damping,
                  self.minimum_activation] + list(p.values())
        if not is_concrete(leaves) or any(jnp.ndim(x) for x in leaves):
            return  # traced or stacked (e.g. under jax.vmap): not checked
        g = {f: float(v) for f, v in p.items()}
        problems = []
        if not 0.0 <= float(self.maximum_pennation_angle) <= math.pi / 2:
            problems.append(f"maximum_pennation_angle must be in [0, pi/2], got {float(self.maximum_pennation_angle)}")
        if float(self.fiber_damping) < 0.0:
            problems.append(f"fiber_damping must be non-negative, got {float(self.fiber_damping)}")
        if self.compliant_tendon and not self.damped and float(self.minimum_activation) < 0.01:
            problems.append("minimum_activation must be at least 0.01 with a compliant tendon and no fiber_damping "
                            f"(the classic model is singular at a = 0), got {float(self.minimum_activation)}")
        elif float(self.minimum_activation) < 0.0:
            problems.append(f"minimum_activation must be non-negative, got {float(self.minimum_activation)}")
        ylow, con_at, ecc_at = self._in_use(g["active_minimum_value"], g["fv_concentric_slope_at_vmax"],
                                            g["fv_eccentric_slope_at_vmax"], g["fv_concentric_slope_near_vmax"],
                                            g["fv_eccentric_slope_near_vmax"], max, min)
        problems += active_force_length_problems(g["active_min_norm_fiber_length"],
                                                 g["active_transition_norm_fiber_length"],
                                                 g["active_max_norm_fiber_length"], ylow,
                                                 g["active_shallow_ascending_slope"])
        problems += force_velocity_problems(con_at, g["fv_concentric_slope_near_vmax"], g["fv_isometric_slope"], ecc_at,
                                            g["fv_eccentric_slope_near_vmax"], g["fv_max_eccentric_multiplier"],
                                            g["fv_concentric_curviness"], g["fv_eccentric_curviness"])
        problems += fiber_force_length_problems(g["passive_strain_at_zero_force"],
                                                g["passive_strain_at_one_norm_force"],
                                                g["passive_stiffness_at_low_force"],
                                                g["passive_stiffness_at_one_norm_force"], g["passive_curviness"])
        problems += tendon_force_length_problems(g["tendon_strain_at_one_norm_force"],
                                                 g["tendon_stiffness_at_one_norm_force"],
                                                 g["tendon_norm_force_at_toe_end"], g["tendon_curviness"])
        if problems:
            raise ModelError(f"muscle {name!r}: " + "; ".join(problems) + " (OpenSim 4.6 refuses these too).")

    # -- curves, with OpenSim's parameter updates -------------------------------------------
    def _in_use(self, ylow, con_at, ecc_at, con_near, ecc_near, mx, mn):
        """OpenSim's updates (``extendFinalizeFromProperties``) of the active curve's minimum and
        the force-velocity slopes at vmax (`mx`, `mn`: the maximum, minimum of two numbers);
        a negative value is kept (and refused by the curve's checks), as in OpenSim."""
        if self.compliant_tendon and not self.damped:  # the classic model
            return mx(ylow, 0.1), mx(con_at, 0.5 * con_near), mx(ecc_at, 0.5 * ecc_near)
        return mn(ylow, 0.0), mn(con_at, 0.0), mn(ecc_at, 0.0)

    def curves(self) -> tuple[SegmentedQuinticCurve, ...]:
        """The four curves as OpenSim uses them (after its parameter updates): active
        force-length, force-velocity, passive force-length, tendon force-length; each called
        on a normalised length or velocity gives ``(value, slope)``."""
        return self.active_force_length, self.force_velocity, self.passive_force_length, self.tendon_force_length

    def _damping(self):
        return self.fiber_damping if self.damped else jnp.zeros_like(self.fiber_damping)

    # -- the family's hooks -----------------------------------------------------------------
    def _activation(self, a):
        lo = self.minimum_activation if self.compliant_tendon and not self.damped else jnp.clip(
            self.minimum_activation, 0.0, 1.0)
        return jnp.clip(a, lo, 1.0)

    def _fiber_multipliers(self, a, l_norm, v_norm):
        fl, _ = self.active_force_length(l_norm)
        fpe, _ = self.passive_force_length(l_norm)
        fv, _ = self.force_velocity(v_norm)
        return fl, fpe, fv, self._damping() * v_norm

    def _tendon_multiplier(self, lt_norm):
        return self.tendon_force_length(lt_norm)[0]

    def _tendon_length_at_five(self):
        t = self.tendon_force_length  # linear beyond the toe's end
        return t.px[-1, 5] + (5.0 - t.py[-1, 5]) / t.slope_above

    def minimum_fiber_length(self) -> Float[Array, ""]:
        """OpenSim's shortest fibre (m): the largest of the active curve's start
        ``min_norm_active_fiber_length l_o`` and the pennation limit ``h / sin(maximum_pennation_angle)``
        (``0.01 l_o`` for a maximum pennation of 0)."""
        lo = self.optimal_fiber_length
        sin_max = jnp.sin(self.maximum_pennation_angle)
        pennated = jnp.where(self.maximum_pennation_angle > SIGNIFICANT_REAL,
                             self.fiber_width() / jnp.where(sin_max > 0.0, sin_max, 1.0), 0.01 * lo)
        return jnp.maximum(SIGNIFICANT_REAL, jnp.maximum(self.active_force_length.px[0, 0] * lo, pennated))

    def _minimum_fiber_length_along_tendon(self):
        lmin, h = self.minimum_fiber_length(), self.fiber_width()
        return sqrt0(jnp.maximum(lmin * lmin - h * h, 0.0))

    def _opensim_rigid_tendon_cosine(self, fiber_length, cos_phi):
        # OpenSim 4.6's calcActiveFiberForceAlongTendon takes the pennation angle of the
        # normalised fibre length l / l_o read as metres (MuscleFixedWidthPennationModel's
        # calcPennationAngle of lceN): sin(phi*) = h / (l / l_o), the maximum angle below the
        # shortest fibre or past the largest sine. About 1 for l_o well under 1 m.
        l_norm = fiber_length / self.optimal_fiber_length
        sin_phi = self.fiber_width() / l_norm
        sin_max = jnp.sin(self.maximum_pennation_angle)
        inside = (l_norm > self.minimum_fiber_length()) & (sin_phi < sin_max)
        phi = jnp.where(inside, jnp.arcsin(jnp.where(inside, sin_phi, 0.0)), self.maximum_pennation_angle)
        return jnp.cos(phi)

    def _equilibrium_fiber_velocity(self, a, l, l_mt, v_mt):
        # OpenSim 4.6's equilibrium is static whatever v_MT: computeInitialFiberEquilibrium asks
        # for it, and computeFiberEquilibrium(s, true) passes its flag as `staticSolution`.
        return jnp.zeros_like(l * v_mt)

    def _clamp_fiber_state(self, x, v, active, passive, fv):
        x_min = self._minimum_fiber_length_along_tendon()
        if self.compliant_tendon:
            clamped = ((x <= x_min) & (v <= 0.0)) | (x < x_min)
        else:  # OpenSim: the tendon shorter than slack stops the fibre (v = 0), then clamps it
            clamped = x <= x_min
        zero = jnp.zeros_like(active)
        if not self.compliant_tendon:  # OpenSim: a negative fibre force of a rigid tendon is cancelled by damping
            passive = jnp.where(active + passive < 0.0, -active, passive)
        return (jnp.where(clamped, 0.0, v), jnp.where(clamped, zero, active), jnp.where(clamped, zero, passive),
                jnp.where(clamped, 1.0, fv))
