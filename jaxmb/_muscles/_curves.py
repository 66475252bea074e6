"""Normalised musculotendon curves of Thelen (2003) and De Groote et al. (2016), as OpenSim 4.6
implements them: pure functions of normalised lengths and velocities, with their published
constants and guarded divisions.

Notation: ``l`` normalised fibre length (fibre length / optimal fibre length), ``lt``
normalised tendon length (tendon length / tendon slack length), ``v`` normalised fibre
velocity (fibre velocity / (optimal fibre length * max contraction velocity), negative when
shortening), ``a`` activation. Each curve returns a dimensionless multiplier of the maximum
isometric force.

References:

- Thelen, D. G. (2003). Adjustment of muscle mechanics model parameters to simulate dynamic
  contractions in older adults. J Biomech Eng 125:70-77.
- De Groote, F., Kinney, A. L., Rao, A. V., Fregly, B. J. (2016). Evaluation of direct
  collocation optimal control problem formulations for solving the muscle redundancy problem.
  Ann Biomed Eng 44:2922-2936 (supplement: the curves), with OpenSim 4.6's adjusted constants
  (DeGrooteFregly2016Muscle.h: the curves pass exactly through (1, 1), (-1, 0), (0, 1)).
"""

import math

import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

# ---------------------------------------------------------------------------------------------
# Thelen (2003)
# ---------------------------------------------------------------------------------------------
THELEN_KTOE = 3.0
"""Exponential shape of the tendon's toe region (Thelen 2003, Eq. 1)."""
THELEN_FTOE = 0.33
"""Normalised tendon force at the end of the toe region (Thelen 2003, Eq. 1)."""
_E3 = math.exp(3.0)
THELEN_ETOE_PER_STRAIN = 99.0 * _E3 / (166.0 * _E3 - 67.0)
"""Toe-region strain / FmaxTendonStrain: exactly 99 e^3 / (166 e^3 - 67) = 0.609... (Thelen
2003 prints the rounded 0.609; OpenSim uses the exact value, which makes the curve C1)."""


def thelen_tendon_force(lt: Float[ArrayLike, "*b"], strain_at_one: Float[ArrayLike, ""] = 0.04
                        ) -> Float[Array, "*b"]:
    """Tendon force-strain curve of Thelen (2003), Eq. 1-2, as OpenSim's ``Thelen2003Muscle::calcfse``:

    ``f = Ftoe/(e^kToe - 1) (e^(kToe eps/eToe) - 1)`` for ``0 < eps <= eToe``,
    ``f = klin (eps - eToe) + Ftoe`` beyond, 0 for a slack tendon; ``eps = lt - 1``,
    ``eToe = 0.609 e0``, ``klin = 0.67 / (e0 - eToe)`` (= 1.712/e0), so that ``f(1 + e0) = 1``.
    `strain_at_one` is ``e0`` (OpenSim's FmaxTendonStrain)."""
    e0 = jnp.asarray(strain_at_one)
    eps = jnp.asarray(lt) - 1.0
    etoe = THELEN_ETOE_PER_STRAIN * e0
    klin = (1.0 - THELEN_FTOE) / (e0 - etoe)
    toe = THELEN_FTOE / (math.exp(THELEN_KTOE) - 1.0) * (
        jnp.exp(THELEN_KTOE * jnp.clip(eps, 0.0, None) / etoe) - 1.0)
    lin = klin * (eps - etoe) + THELEN_FTOE
    return jnp.where(eps > etoe, lin, jnp.where(eps > 0.0, toe, 0.0))


def thelen_tendon_stiffness(lt: Float[ArrayLike, "*b"], strain_at_one: Float[ArrayLike, ""] = 0.04
                            ) -> Float[Array, "*b"]:
    """``d f / d lt`` of `thelen_tendon_force` (OpenSim's ``calcDfseDtlN``)."""
    e0 = jnp.asarray(strain_at_one)
    eps = jnp.asarray(lt) - 1.0
    etoe = THELEN_ETOE_PER_STRAIN * e0
    klin = (1.0 - THELEN_FTOE) / (e0 - etoe)
    toe = THELEN_FTOE / (math.exp(THELEN_KTOE) - 1.0) * (THELEN_KTOE / etoe) * jnp.exp(
        THELEN_KTOE * jnp.clip(eps, 0.0, None) / etoe)
    return jnp.where(eps > etoe, klin, jnp.where(eps > 0.0, toe, 0.0))


def thelen_active_force_length(l: Float[ArrayLike, "*b"], kshape: Float[ArrayLike, ""] = 0.45
                               ) -> Float[Array, "*b"]:
    """Active force-length curve of Thelen (2003), Eq. 4: ``exp(-(l - 1)^2 / gamma)``, ``gamma`` =
    `kshape` (OpenSim's KshapeActive, 0.45)."""
    x = jnp.asarray(l) - 1.0
    return jnp.exp(-x * x / kshape)


def thelen_passive_force_length(l: Float[ArrayLike, "*b"], strain_at_one: Float[ArrayLike, ""] = 0.6,
                                kshape: Float[ArrayLike, ""] = 5.0) -> Float[Array, "*b"]:
    """Passive force-length curve of Thelen (2003), Eq. 3, zero below optimal length as in
    OpenSim: ``(exp(kPE (l - 1)/e0) - 1) / (exp(kPE) - 1)`` for ``l > 1``, so ``f(1 + e0) = 1``.
    `strain_at_one` is ``e0`` (FmaxMuscleStrain, 0.6), `kshape` is ``kPE`` (KshapePassive, 5)."""
    x = jnp.clip(jnp.asarray(l) - 1.0, 0.0, None)
    return (jnp.exp(kshape * x / strain_at_one) - 1.0) / (jnp.exp(kshape) - 1.0)


def thelen_passive_stiffness(l, strain_at_one=0.6, kshape=5.0):
    """``d f / d l`` of `thelen_passive_force_length` (OpenSim's ``calcDfpeDlceN``)."""
    l = jnp.asarray(l)
    x = jnp.clip(l - 1.0, 0.0, None)
    d = kshape / strain_at_one * jnp.exp(kshape * x / strain_at_one) / (jnp.exp(kshape) - 1.0)
    return jnp.where(l > 1.0, d, 0.0)


def thelen_force_velocity(v: Float[ArrayLike, "*b"], a: Float[ArrayLike, "*b"], af: Float[ArrayLike, ""] = 0.25,
                          flen: Float[ArrayLike, ""] = 1.4, threshold: Float[ArrayLike, ""] = 0.95
                          ) -> Float[Array, "*b"]:
    """Force-velocity multiplier of Thelen (2003), Eq. 6-7, with OpenSim's linear extrapolation,
    inverted in closed form.

    Thelen's Eq. 6 gives the normalised velocity ``v = (0.25 + 0.75 a) (F - a fl) / b`` of the
    active force ``F = a fl fv``, with ``b = a fl + F/Af`` when shortening and
    ``b = (2 + 2/Af)(a fl Flen - F)/(Flen - 1)`` when lengthening (Eq. 7); OpenSim extends it
    linearly below ``F = 0`` and above ``F = threshold Flen a fl`` and clips ``fv`` at 0
    (``Thelen2003Muscle::calcdlceN``, ``calcfvInv``). Each branch is linear-fractional in ``F``
    and proportional to ``a fl``, so its inverse ``fv(v; a)`` is closed form:
    ``fv = (k + v)/(k - v/Af)`` shortening, ``fv = (k + c Flen v)/(k + c v)`` lengthening,
    ``k = 0.25 + 0.75 a``, ``c = (2 + 2/Af)/(Flen - 1)``.

    **Arguments:** `v` normalised fibre velocity, `a` activation (already clamped to OpenSim's
    minimum), `af` (Af), `flen` (Flen), `threshold` (fv_linear_extrap_threshold).

    **Returns:** ``fv`` (>= 0).
    """
    v = jnp.asarray(v)
    k = 0.25 + 0.75 * jnp.asarray(a)
    c = (2.0 + 2.0 / af) / (flen - 1.0)
    v_neg = jnp.clip(v, -k, 0.0)
    shortening = (k + v_neg) / (k - v_neg / af)
    v_e0 = k * (threshold * flen - 1.0) / (c * flen * (1.0 - threshold))  # end of Eq. 7's range
    v_pos = jnp.clip(v, 0.0, v_e0)
    lengthening = (k + c * flen * v_pos) / (k + c * v_pos)
    b0 = c * flen * (1.0 - threshold)  # b / (a fl) at the threshold
    slope = k / b0 + k * (threshold * flen - 1.0) * c / (b0 * b0)  # dv / dfv there
    extrapolated = threshold * flen + (v - v_e0) / slope
    return jnp.where(v <= 0.0, jnp.where(v > -k, shortening, 0.0), jnp.where(v < v_e0, lengthening, extrapolated))


# ---------------------------------------------------------------------------------------------
# De Groote et al. (2016), constants as in OpenSim 4.6's DeGrooteFregly2016Muscle
# ---------------------------------------------------------------------------------------------
DEGROOTE_B = ((0.8150671134243542, 1.055033428970575, 0.162384573599574, 0.063303448465465),
              (0.433004984392647, 0.716775413397760, -0.029947116970696, 0.200356847296188),
              (0.1, 1.0, 0.353553390593274, 0.0))
"""(b1i, b2i, b3i, b4i) of the three Gaussian-like terms of the active force-length curve
(De Groote et al. 2016, supplement Eq. S1; b11 adjusted by OpenSim so that f(1) = 1)."""
DEGROOTE_KPE = 4.0
"""Passive force-length exponential shape (De Groote et al. 2016, Eq. S2)."""
DEGROOTE_C = (0.2, 1.0, 0.2)
"""(c1, c2, c3) of the tendon curve (Eq. S3; OpenSim uses c2 = 1, c3 = 0.2 so that f(1) = 0)."""
DEGROOTE_D = (-0.3211346127989808, -8.149, -0.374, 0.8825327733249912)
"""(d1, d2, d3, d4) of the force-velocity curve (Eq. S4; d1, d4 adjusted by OpenSim so that the
curve passes through (-1, 0) and (0, 1))."""
DEGROOTE_MIN_FIBER_LENGTH = 0.2
"""Normalised fibre length at which the passive curve is zero (OpenSim's minimum)."""


def _gaussian(x, b1, b2, b3, b4):
    s = b3 + b4 * x
    return b1 * jnp.exp(-0.5 * (x - b2) ** 2 / (s * s))


def degroote_active_force_length(l: Float[ArrayLike, "*b"], width_scale: Float[ArrayLike, ""] = 1.0
                                 ) -> Float[Array, "*b"]:
    """Active force-length curve of De Groote et al. (2016), Eq. S1: the sum of three terms
    ``b1 exp(-(x - b2)^2 / (2 (b3 + b4 x)^2))``, with ``x = (l - 1)/width_scale + 1``
    (OpenSim's active_force_width_scale, 1 in the paper)."""
    x = (jnp.asarray(l) - 1.0) / width_scale + 1.0
    return sum(_gaussian(x, *b) for b in DEGROOTE_B)


def degroote_passive_force_length(l: Float[ArrayLike, "*b"], strain_at_one: Float[ArrayLike, ""] = 0.6
                                  ) -> Float[Array, "*b"]:
    """Passive force-length curve of De Groote et al. (2016), Eq. S2, shifted by OpenSim to be
    zero at ``l = 0.2``: ``(exp(kPE (l - 1)/e0) - o) / (exp(kPE) - o)``, ``o = exp(kPE (0.2 - 1)/e0)``,
    ``kPE = 4``, ``e0`` = `strain_at_one` (passive_fiber_strain_at_one_norm_force, 0.6)."""
    offset = jnp.exp(DEGROOTE_KPE * (DEGROOTE_MIN_FIBER_LENGTH - 1.0) / strain_at_one)
    return (jnp.exp(DEGROOTE_KPE * (jnp.asarray(l) - 1.0) / strain_at_one) - offset) / (
        math.exp(DEGROOTE_KPE) - offset)


def degroote_tendon_stiffness_parameter(strain_at_one: Float[ArrayLike, ""] = 0.049) -> Float[Array, ""]:
    """``kT`` of the tendon curve from the tendon strain at one normalised force (OpenSim:
    ``log((1 + c3)/c1) / (1 + strain - c2)``; kT = 35 in De Groote et al. 2016)."""
    c1, c2, c3 = DEGROOTE_C
    return math.log((1.0 + c3) / c1) / (1.0 + jnp.asarray(strain_at_one) - c2)


def degroote_tendon_force(lt: Float[ArrayLike, "*b"], strain_at_one: Float[ArrayLike, ""] = 0.049
                          ) -> Float[Array, "*b"]:
    """Tendon force-length curve of De Groote et al. (2016), Eq. S3: ``c1 exp(kT (lt - c2)) - c3``."""
    c1, c2, c3 = DEGROOTE_C
    return c1 * jnp.exp(degroote_tendon_stiffness_parameter(strain_at_one) * (jnp.asarray(lt) - c2)) - c3


def degroote_force_velocity(v: Float[ArrayLike, "*b"]) -> Float[Array, "*b"]:
    """Force-velocity curve of De Groote et al. (2016), Eq. S4:
    ``d1 log(d2 v + d3 + sqrt((d2 v + d3)^2 + 1)) + d4`` (= ``d1 asinh(d2 v + d3) + d4``)."""
    d1, d2, d3, d4 = DEGROOTE_D
    return d1 * jnp.arcsinh(d2 * jnp.asarray(v) + d3) + d4


def degroote_force_velocity_inverse(fv: Float[ArrayLike, "*b"]) -> Float[Array, "*b"]:
    """Inverse of `degroote_force_velocity`: ``v = (sinh((fv - d4)/d1) - d3)/d2`` (the
    supplement omits ``- d3``; OpenSim's correction)."""
    d1, d2, d3, d4 = DEGROOTE_D
    return (jnp.sinh((jnp.asarray(fv) - d4) / d1) - d3) / d2


__all__ = ["thelen_tendon_force", "thelen_tendon_stiffness", "thelen_active_force_length",
           "thelen_passive_force_length", "thelen_passive_stiffness", "thelen_force_velocity",
           "degroote_active_force_length", "degroote_passive_force_length", "degroote_tendon_force",
           "degroote_tendon_stiffness_parameter", "degroote_force_velocity",
           "degroote_force_velocity_inverse"]
