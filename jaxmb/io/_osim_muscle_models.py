"""The force model and activation dynamics of an OpenSim muscle element, from its class and
properties (OpenSim 4.6's defaults for the properties the file omits).

``Thelen2003Muscle`` -> [`jaxmb.Thelen2003Muscle`][jaxmb.Thelen2003Muscle] with
[`jaxmb.FirstOrderActivation`][jaxmb.FirstOrderActivation]; ``Millard2012EquilibriumMuscle`` ->
[`jaxmb.Millard2012EquilibriumMuscle`][jaxmb.Millard2012EquilibriumMuscle] (its four curve
elements read property by property) with [`jaxmb.FirstOrderActivation`][jaxmb.FirstOrderActivation]
(none where ``ignore_activation_dynamics`` is true); ``DeGrooteFregly2016Muscle`` ->
[`jaxmb.DeGrooteFregly2016Muscle`][jaxmb.DeGrooteFregly2016Muscle] with
[`jaxmb.DeGrooteActivation`][jaxmb.DeGrooteActivation]. Other muscle classes
(Millard2012AccelerationMuscle, the deprecated ones) keep their path and parameters with no
force model.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

from .._muscles import (DeGrooteActivation, DeGrooteFregly2016Muscle, FirstOrderActivation,
                        Millard2012EquilibriumMuscle, MuscleParameters, Thelen2003Muscle)
from .._muscles._millard import CURVE_PROPERTIES
from ._xml import XmlReader

# jaxmb argument -> (OpenSim property, OpenSim 4.6 default)
_THELEN = {"tendon_strain_at_one": ("FmaxTendonStrain", 0.04), "passive_strain_at_one": ("FmaxMuscleStrain", 0.6),
           "active_shape": ("KshapeActive", 0.45), "passive_shape": ("KshapePassive", 5.0), "af": ("Af", 0.25),
           "flen": ("Flen", 1.4), "fv_extrapolation_threshold": ("fv_linear_extrap_threshold", 0.95),
           "maximum_pennation_angle": ("maximum_pennation_angle", math.acos(0.1)),
           "minimum_activation": ("minimum_activation", 0.01)}
_MILLARD = {"fiber_damping": ("fiber_damping", 0.1), "minimum_activation": ("minimum_activation", 0.01),
           "maximum_pennation_angle": ("maximum_pennation_angle", math.acos(0.1))}
_DEGROOTE = {"tendon_strain_at_one": ("tendon_strain_at_one_norm_force", 0.049),
             "passive_strain_at_one": ("passive_fiber_strain_at_one_norm_force", 0.6),
             "active_width_scale": ("active_force_width_scale", 1.0), "fiber_damping": ("fiber_damping", 0.0)}

# OpenSim 4.6's min_control where the file omits it: the constructors of these classes set
# it to the default minimum activation, 0.01, whatever the file's minimum_activation
# (MoBL-ARMS's Millard muscles, minimum_activation 0, get 0.01); 0 for the others.
MIN_CONTROL_DEFAULTS = {"Thelen2003Muscle": 0.01, "Millard2012EquilibriumMuscle": 0.01}


def _number(xml: XmlReader, f: ET.Element, tag: str, default: float) -> float:
    return float(xml.floats(f, tag, 1, (default,), blank_is_missing=True)[0])


def _flag(xml: XmlReader, f: ET.Element, tag: str) -> bool:
    found = xml.children(f, tag)
    return bool(found) and (found[0].text or "").strip().lower() == "true"


def force_model(xml: XmlReader, f: ET.Element, params: MuscleParameters):
    """(force model, activation dynamics) of the muscle element `f`, or (None, None) for a class
    jaxmb has no force model for. Invalid property values raise a
    [`jaxmb.ModelError`][jaxmb.ModelError] naming the muscle (the caller adds the file:line)."""
    common = dict(max_isometric_force=params.max_isometric_force, optimal_fiber_length=params.optimal_fiber_length,
                  tendon_slack_length=params.tendon_slack_length,
                  pennation_angle_at_optimal=params.pennation_angle_at_optimal,
                  max_contraction_velocity=params.max_contraction_velocity,
                  compliant_tendon=not _flag(xml, f, "ignore_tendon_compliance"), name=f.get("name", ""))
    if f.tag == "Thelen2003Muscle":
        kw = {k: _number(xml, f, tag, d) for k, (tag, d) in _THELEN.items()}
        act = FirstOrderActivation(_number(xml, f, "activation_time_constant", 0.015),
                                   _number(xml, f, "deactivation_time_constant", 0.05),
                                   kw["minimum_activation"])
        return Thelen2003Muscle(**common, **kw), act
    if f.tag == "Millard2012EquilibriumMuscle":
        kw = {k: _number(xml, f, tag, d) for k, (tag, d) in _MILLARD.items()}
        curves = {}
        for field, (curve, prop, default) in CURVE_PROPERTIES.items():
            found = xml.children(f, curve)
            el = found[0] if found else None
            if el is not None and xml.children(el, prop) and (xml.children(el, prop)[0].text or "").strip():
                curves[field] = _number(xml, el, prop, 0.0)
        act = None
        if not _flag(xml, f, "ignore_activation_dynamics"):
            act = FirstOrderActivation(_number(xml, f, "activation_time_constant", 0.01),
                                       _number(xml, f, "deactivation_time_constant", 0.04),
                                       kw["minimum_activation"])
        return Millard2012EquilibriumMuscle(**common, **kw, **curves), act
    if f.tag == "DeGrooteFregly2016Muscle":
        kw = {k: _number(xml, f, tag, d) for k, (tag, d) in _DEGROOTE.items()}
        kw["passive_scale"] = 0.0 if _flag(xml, f, "ignore_passive_fiber_force") else 1.0
        act = DeGrooteActivation(_number(xml, f, "activation_time_constant", 0.015),
                                 _number(xml, f, "deactivation_time_constant", 0.06),
                                 _number(xml, f, "activation_dynamics_smoothing", 0.1))
        return DeGrooteFregly2016Muscle(**common, **kw), act
    return None, None
