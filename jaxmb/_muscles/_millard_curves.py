"""The four curves of Millard et al. (2013)'s musculotendon model, built from their parameters
as OpenSim 4.6's ``SmoothSegmentedFunctionFactory`` builds them: segmented quintic Bezier
curves (`jaxmb._muscles._bezier`), each returned as ``(px, py, dydx0, dydx1)``, control points
``(n, 6)`` and the slopes of the linear extrapolation below and above the curve.

Every function is pure JAX in its parameters (so gradients reach them) and has a companion
``*_problems`` that lists, for concrete values, OpenSim's refusals of the same parameters.

Reference: Millard, M., Uchida, T., Seth, A., Delp, S. L. (2013). Flexing computational muscle:
modeling and simulation of musculotendon dynamics. J Biomech Eng 135(2):021005; OpenSim 4.6's
``SmoothSegmentedFunctionFactory.cpp`` (``createFiberActiveForceLengthCurve``,
``createFiberForceVelocityCurve``, ``createFiberForceLengthCurve``,
``createTendonForceLengthCurve``).
"""

import math

import jax.numpy as jnp
import numpy as np

from ._bezier import corner_control_points, corner_is_c_shaped

_ROOT_EPS = 1.4901161193847656e-08  # sqrt(SimTK::Eps)


def scale_curviness(curviness):
    """OpenSim's map of a user curviness in [0, 1] to the corner parameter: ``0.1 + 0.8 c``."""
    return 0.1 + 0.8 * curviness


def _stack(corners, curviness, xp):
    pts = [corner_control_points(*(xp.asarray(v) for v in p0 + p1), c, xp=xp)
           for (p0, p1), c in zip(corners, curviness)]
    return xp.stack([p[0] for p in pts]), xp.stack([p[1] for p in pts])


def _corner_problems(corners, what):
    bad = [i for i, (p0, p1) in enumerate(corners) if not corner_is_c_shaped(*map(float, p0), *map(float, p1))]
    return [f"{what}: its parameters give a corner {i} that is not C-shaped (the tangent lines do not meet "
            "between the corner's ends)" for i in bad]


# ---------------------------------------------------------------------------------------------
# active force-length
# ---------------------------------------------------------------------------------------------
def _active_corners(x0, x1, x3, ylow, dydx):
    x2 = 1.0
    x_delta = 0.05 * x2
    xs = x2 - x_delta
    y1 = 1.0 - dydx * (xs - x1)
    dydx01 = 1.25 * y1 / (x1 - x0)
    x01, y01 = x0 + 0.5 * (x1 - x0), 0.5 * y1
    x1s, y1s = x1 + 0.5 * (xs - x1), y1 + 0.5 * (1.0 - y1)
    x23 = (x2 + x_delta) + 0.5 * (x3 - (x2 + x_delta))
    dydx23 = -1.0 / ((x3 - x_delta) - (x2 + x_delta))
    pts = [(x0, ylow, 0.0), (x01, y01, dydx01), (x1s, y1s, dydx), (x2, 1.0, 0.0), (x23, 0.5, dydx23),
           (x3, ylow, 0.0)]
    return list(zip(pts[:-1], pts[1:]))


def active_force_length_curve(min_norm_active_fiber_length, transition_norm_fiber_length,
                              max_norm_active_fiber_length, shallow_ascending_slope, minimum_value, xp=jnp):
    """Active force-length curve (Millard et al. 2013; OpenSim's ``ActiveForceLengthCurve``):
    five corners from ``(x0, ymin)`` through the steep and shallow ascending limbs to the plateau
    ``(1, 1)`` and down to ``(x3, ymin)``, curviness 1 (OpenSim fixes it); flat (``ymin``) beyond."""
    corners = _active_corners(min_norm_active_fiber_length, transition_norm_fiber_length,
                              max_norm_active_fiber_length, minimum_value, shallow_ascending_slope)
    c = scale_curviness(1.0)
    px, py = _stack(corners, [c] * 5, xp)
    return px, py, xp.zeros_like(px[0, 0]), xp.zeros_like(px[0, 0])


def active_force_length_problems(x0, x1, x3, ylow, dydx):
    """OpenSim's refusals of active force-length parameters (messages; empty if valid)."""
    out = []
    if not (x0 >= 0 and x1 > x0 + _ROOT_EPS and 1.0 > x1 + _ROOT_EPS and x3 > 1.0 + _ROOT_EPS):
        out.append("ActiveForceLengthCurve: 0 <= min_norm_active_fiber_length < transition_norm_fiber_length < 1 < "
                   f"max_norm_active_fiber_length must hold, got {x0}, {x1}, {x3}")
        return out
    if ylow < 0:
        out.append(f"ActiveForceLengthCurve: minimum_value must be non-negative, got {ylow}")
    upper = (1.0 - ylow) / (1.0 - x1)
    if not (0 <= dydx < upper):
        out.append(f"ActiveForceLengthCurve: shallow_ascending_slope must be in [0, {upper:.6g}), got {dydx}")
    return out or _corner_problems(_active_corners(x0, x1, x3, ylow, dydx), "ActiveForceLengthCurve")


# ---------------------------------------------------------------------------------------------
# force-velocity
# ---------------------------------------------------------------------------------------------
def _velocity_corners(fmax_e, dydx_c, dydx_near_c, dydx_iso, dydx_e, dydx_near_e):
    y_near_c = 0.5 * dydx_near_c * 0.1 + 0.5 * dydx_c * 0.1
    y_near_e = fmax_e - 0.5 * dydx_near_e * 0.1 - 0.5 * dydx_e * 0.1
    pts = [(-1.0, 0.0, dydx_c), (-0.9, y_near_c, dydx_near_c), (0.0, 1.0, dydx_iso), (0.9, y_near_e, dydx_near_e),
           (1.0, fmax_e, dydx_e)]
    return list(zip(pts[:-1], pts[1:]))


def force_velocity_curve(concentric_slope_at_vmax, concentric_slope_near_vmax, isometric_slope,
                         eccentric_slope_at_vmax, eccentric_slope_near_vmax, max_eccentric_velocity_force_multiplier,
                         concentric_curviness, eccentric_curviness, xp=jnp):
    """Force-velocity curve (Millard et al. 2013; OpenSim's ``ForceVelocityCurve``): four
    corners through ``(-1, 0)``, ``(-0.9, .)``, ``(0, 1)``, ``(0.9, .)``, ``(1, fmaxE)`` with the
    given slopes; linear beyond ``[-1, 1]`` with the slopes at vmax."""
    corners = _velocity_corners(max_eccentric_velocity_force_multiplier, concentric_slope_at_vmax,
                                concentric_slope_near_vmax, isometric_slope, eccentric_slope_at_vmax,
                                eccentric_slope_near_vmax)
    cc, ce = scale_curviness(concentric_curviness), scale_curviness(eccentric_curviness)
    px, py = _stack(corners, [cc, cc, ce, ce], xp)
    return px, py, xp.asarray(concentric_slope_at_vmax) * 1.0, xp.asarray(eccentric_slope_at_vmax) * 1.0


def force_velocity_problems(dydx_c, dydx_near_c, dydx_iso, dydx_e, dydx_near_e, fmax_e, conc_curv, ecc_curv):
    """OpenSim's refusals of force-velocity parameters (messages; empty if valid)."""
    out = []
    if not fmax_e > 1.0:
        out.append(f"ForceVelocityCurve: max_eccentric_velocity_force_multiplier must be greater than 1, got {fmax_e}")
        return out
    if not (0.0 <= dydx_c < 1.0):
        out.append(f"ForceVelocityCurve: concentric_slope_at_vmax must be in [0, 1), got {dydx_c}")
    if not (dydx_c < dydx_near_c <= 1.0) or dydx_near_c < _ROOT_EPS:
        out.append("ForceVelocityCurve: concentric_slope_near_vmax must be positive, greater than "
                   f"concentric_slope_at_vmax and at most 1, got {dydx_near_c}")
    if not dydx_iso > 1.0:
        out.append(f"ForceVelocityCurve: isometric_slope must be greater than 1, got {dydx_iso}")
    if not (0.0 <= dydx_e < fmax_e - 1.0):
        out.append(f"ForceVelocityCurve: eccentric_slope_at_vmax must be in [0, {fmax_e - 1:.6g}), got {dydx_e}")
    if not (dydx_e <= dydx_near_e < fmax_e - 1.0) or dydx_near_e < _ROOT_EPS:
        out.append("ForceVelocityCurve: eccentric_slope_near_vmax must be positive, at least eccentric_slope_at_vmax "
                   f"and less than {fmax_e - 1:.6g}, got {dydx_near_e}")
    for name, c in (("concentric_curviness", conc_curv), ("eccentric_curviness", ecc_curv)):
        if not 0.0 <= c <= 1.0:
            out.append(f"ForceVelocityCurve: {name} must be in [0, 1], got {c}")
    return out or _corner_problems(_velocity_corners(fmax_e, dydx_c, dydx_near_c, dydx_iso, dydx_e, dydx_near_e),
                                   "ForceVelocityCurve")


# ---------------------------------------------------------------------------------------------
# passive (fibre) force-length
# ---------------------------------------------------------------------------------------------
def _fiber_corners(e_zero, e_iso, k_low, k_iso, xp=np):
    x_zero, x_iso = 1.0 + e_zero, 1.0 + e_iso
    delta = xp.minimum(0.1 / k_iso, 0.1 * (x_iso - x_zero))
    x_low = x_zero + delta
    y_low = k_low * (x_low - (x_zero + 0.5 * delta))
    pts = [(x_zero, 0.0, 0.0), (x_low, y_low, k_low), (x_iso, 1.0, k_iso)]
    return list(zip(pts[:-1], pts[1:]))


def fiber_force_length_curve(strain_at_zero_force, strain_at_one_norm_force, stiffness_at_low_force,
                             stiffness_at_one_norm_force, curviness, xp=jnp):
    """Passive fibre force-length curve (Millard et al. 2013; OpenSim's
    ``FiberForceLengthCurve``): zero up to ``1 + e0``, two corners to ``(1 + e1, 1)`` with slope
    ``kIso``; linear beyond."""
    corners = _fiber_corners(strain_at_zero_force, strain_at_one_norm_force, stiffness_at_low_force,
                             stiffness_at_one_norm_force, xp)
    c = scale_curviness(curviness)
    px, py = _stack(corners, [c, c], xp)
    return px, py, xp.zeros_like(px[0, 0]), xp.asarray(stiffness_at_one_norm_force) * 1.0


def fiber_force_length_problems(e_zero, e_iso, k_low, k_iso, curviness):
    out = []
    if not e_iso > e_zero:
        return [f"FiberForceLengthCurve: strain_at_one_norm_force ({e_iso}) must exceed strain_at_zero_force "
                f"({e_zero})"]
    if not k_iso > 1.0 / (e_iso - e_zero):
        out.append(f"FiberForceLengthCurve: stiffness_at_one_norm_force must be greater than "
                   f"1/(strain_at_one_norm_force - strain_at_zero_force) = {1 / (e_iso - e_zero):.6g}, got {k_iso}")
    if not 0.0 < k_low < 1.0 / (e_iso - e_zero):
        out.append(f"FiberForceLengthCurve: stiffness_at_low_force must be in (0, {1 / (e_iso - e_zero):.6g}), "
                   f"got {k_low}")
    if not 0.0 <= curviness <= 1.0:
        out.append(f"FiberForceLengthCurve: curviness must be in [0, 1], got {curviness}")
    return out or _corner_problems(_fiber_corners(e_zero, e_iso, k_low, k_iso), "FiberForceLengthCurve")


# ---------------------------------------------------------------------------------------------
# tendon force-length
# ---------------------------------------------------------------------------------------------
def _tendon_corners(e_iso, k_iso, f_toe):
    x_iso = 1.0 + e_iso
    x_toe = (f_toe - 1.0) / k_iso + x_iso
    x_foot = 1.0 + (x_toe - 1.0) / 10.0
    y_mid = 0.5 * f_toe
    x_mid = (y_mid - 1.0) / k_iso + x_iso
    dydx_mid = y_mid / (x_mid - x_foot)
    x_ctrl = x_foot + 0.5 * (x_mid - x_foot)
    y_ctrl = dydx_mid * (x_ctrl - x_foot)
    pts = [(1.0, 0.0, 0.0), (x_ctrl, y_ctrl, dydx_mid), (x_toe, f_toe, k_iso)]
    return list(zip(pts[:-1], pts[1:]))


def tendon_force_length_curve(strain_at_one_norm_force, stiffness_at_one_norm_force, norm_force_at_toe_end,
                              curviness, xp=jnp):
    """Tendon force-length curve (Millard et al. 2013; OpenSim's ``TendonForceLengthCurve``):
    zero for a slack tendon (``lt <= 1``), a toe of two corners up to ``norm_force_at_toe_end``,
    then linear with slope ``kIso`` through ``(1 + e0, 1)``."""
    corners = _tendon_corners(strain_at_one_norm_force, stiffness_at_one_norm_force, norm_force_at_toe_end)
    c = scale_curviness(curviness)
    px, py = _stack(corners, [c, c], xp)
    return px, py, xp.zeros_like(px[0, 0]), xp.asarray(stiffness_at_one_norm_force) * 1.0


def tendon_force_length_problems(e_iso, k_iso, f_toe, curviness):
    out = []
    if not e_iso > 0:
        return [f"TendonForceLengthCurve: strain_at_one_norm_force must be positive, got {e_iso}"]
    if not 0.0 < f_toe < 1.0:
        out.append(f"TendonForceLengthCurve: norm_force_at_toe_end must be in (0, 1), got {f_toe}")
    if not k_iso > 1.0 / e_iso:
        out.append(f"TendonForceLengthCurve: stiffness_at_one_norm_force must be greater than "
                   f"1/strain_at_one_norm_force = {1 / e_iso:.6g}, got {k_iso}")
    if not 0.0 <= curviness <= 1.0:
        out.append(f"TendonForceLengthCurve: curviness must be in [0, 1], got {curviness}")
    return out or _corner_problems(_tendon_corners(e_iso, k_iso, f_toe), "TendonForceLengthCurve")


FIBER_DEFAULTS = lambda e0, e1: (0.2, 2.0 / (e1 - e0), 0.75)  # noqa: E731
"""OpenSim's fitted passive curve when its optional properties are absent: (stiffness_at_low_force,
stiffness_at_one_norm_force, curviness) = (0.2, 2/(e1 - e0), 0.75)."""
TENDON_DEFAULTS = lambda e0: (1.375 / e0, 2.0 / 3.0, 0.5)  # noqa: E731
"""OpenSim's fitted tendon curve when its optional properties are absent: (stiffness_at_one_norm_force,
norm_force_at_toe_end, curviness) = (1.375/e0, 2/3, 0.5)."""
DEFAULT_MAXIMUM_PENNATION = math.acos(0.1)
