"""OpenSim 4.6's musculotendon forces at a grid of (activation, l_MT, v_MT), for the parity tests
of jaxmb's Hill-type models (tests/test_hill_muscles.py).

Run (from the repository root, in the OpenSim venv, not jaxmb's):

    /work/osim-venv/bin/python tests/data/opensim/opensim_muscle_reference.py tests/data/opensim/hill_muscles.json

A standalone model: a 1 kg body on a SliderJoint along ground's x axis; each muscle runs from
ground's origin to the body's origin, so that its length is the slider coordinate and its
lengthening speed the coordinate's speed. The muscles have arm26's TRIlong parameters
(F_max 798.52 N, l_o 0.134 m, l_s 0.143 m, alpha_o 0.209 rad, v_max 10 l_o/s). For each
grid point the state gets the coordinate value and speed and the muscle's activation, then:

- ``Thelen2003Muscle`` (compliant): ``computeInitialFiberEquilibrium`` then ``realizeDynamics``:
  fibre length, pennation angle, fibre velocity, active and passive fibre force, tendon force.
- ``Thelen2003Muscle`` rigid tendon: ``calcInextensibleTendonActiveFiberForce(state, a)``
  (the active fibre force along the tendon that OpenSim's static optimization uses).
- Every model: ``calcInextensibleTendonActiveFiberForce(state, 1.0)``
  (``static_optimization_active_force``, static optimization's ``F_A``; it ignores the
  tendon's compliance).
- ``DeGrooteFregly2016Muscle`` with ``ignore_tendon_compliance`` true and false (explicit tendon
  dynamics; the compliant one through ``computeInitialFiberEquilibrium``): as for Thelen.
- ``Millard2012EquilibriumMuscle`` rigid (``ignore_tendon_compliance``) and compliant (through
  ``computeInitialFiberEquilibrium``, tolerance 1e-8 F_max), damped (OpenSim's default
  fiber_damping 0.1) and undamped (fiber_damping 0, the classic model), with OpenSim's default
  curves; compliant with MoBL-ARMS DELT1's curve parameters (``MILLARD_DELT1``); and compliant
  through ``computeFiberEquilibrium(state, true)`` (v_MT shared between fibre and tendon;
  ``computeInitialFiberEquilibrium`` is the static equilibrium, zero fibre velocity).

``millard_curves``: OpenSim's four Millard curve classes (``ActiveForceLengthCurve``,
``ForceVelocityCurve``, ``FiberForceLengthCurve``, ``TendonForceLengthCurve``) built from
parameter sets (OpenSim's defaults, DELT1's, and one more), ``calcValue`` and
``calcDerivative(x, 1)`` on a grid that includes both linear extrapolations.

Every array is (n_activation, n_length, n_speed); the grid itself is stored.
"""

import json
import sys

import numpy as np
import opensim as osim

PARAMS = dict(max_isometric_force=798.52, optimal_fiber_length=0.134, tendon_slack_length=0.143,
              pennation_angle_at_optimal=0.209, max_contraction_velocity=10.0)
ACTIVATIONS = [0.0, 0.05, 0.3, 0.7, 1.0]
NORM_FIBER = [0.6, 0.8, 0.95, 1.0, 1.1, 1.3, 1.5]  # rigid-tendon fibre length / l_o that sets l_MT
SPEEDS = [-0.6, -0.15, 0.0, 0.15, 0.6]  # m/s


def lengths():
    h = PARAMS["optimal_fiber_length"] * np.sin(PARAMS["pennation_angle_at_optimal"])
    lf = np.array(NORM_FIBER) * PARAMS["optimal_fiber_length"]
    return PARAMS["tendon_slack_length"] + np.sqrt(lf ** 2 - h ** 2)


# jaxmb field -> OpenSim (curve, property); parameter sets keyed by jaxmb's field names
CURVE_PROPS = {
    "active_min_norm_fiber_length": ("ActiveForceLengthCurve", "min_norm_active_fiber_length"),
    "active_transition_norm_fiber_length": ("ActiveForceLengthCurve", "transition_norm_fiber_length"),
    "active_max_norm_fiber_length": ("ActiveForceLengthCurve", "max_norm_active_fiber_length"),
    "active_shallow_ascending_slope": ("ActiveForceLengthCurve", "shallow_ascending_slope"),
    "active_minimum_value": ("ActiveForceLengthCurve", "minimum_value"),
    "fv_concentric_slope_at_vmax": ("ForceVelocityCurve", "concentric_slope_at_vmax"),
    "fv_concentric_slope_near_vmax": ("ForceVelocityCurve", "concentric_slope_near_vmax"),
    "fv_isometric_slope": ("ForceVelocityCurve", "isometric_slope"),
    "fv_eccentric_slope_at_vmax": ("ForceVelocityCurve", "eccentric_slope_at_vmax"),
    "fv_eccentric_slope_near_vmax": ("ForceVelocityCurve", "eccentric_slope_near_vmax"),
    "fv_max_eccentric_multiplier": ("ForceVelocityCurve", "max_eccentric_velocity_force_multiplier"),
    "fv_concentric_curviness": ("ForceVelocityCurve", "concentric_curviness"),
    "fv_eccentric_curviness": ("ForceVelocityCurve", "eccentric_curviness"),
    "passive_strain_at_zero_force": ("FiberForceLengthCurve", "strain_at_zero_force"),
    "passive_strain_at_one_norm_force": ("FiberForceLengthCurve", "strain_at_one_norm_force"),
    "passive_stiffness_at_low_force": ("FiberForceLengthCurve", "stiffness_at_low_force"),
    "passive_stiffness_at_one_norm_force": ("FiberForceLengthCurve", "stiffness_at_one_norm_force"),
    "passive_curviness": ("FiberForceLengthCurve", "curviness"),
    "tendon_strain_at_one_norm_force": ("TendonForceLengthCurve", "strain_at_one_norm_force"),
    "tendon_stiffness_at_one_norm_force": ("TendonForceLengthCurve", "stiffness_at_one_norm_force"),
    "tendon_norm_force_at_toe_end": ("TendonForceLengthCurve", "norm_force_at_toe_end"),
    "tendon_curviness": ("TendonForceLengthCurve", "curviness"),
}
MILLARD_DELT1 = {  # MoBL-ARMS (MOBL_ARMS_fixed_41.osim) DELT1's curves; its file omits the fv curvinesses
    "active_min_norm_fiber_length": 0.4327, "active_transition_norm_fiber_length": 0.728,
    "active_max_norm_fiber_length": 1.595, "active_shallow_ascending_slope": 0.4613, "active_minimum_value": 0.0,
    "fv_concentric_slope_at_vmax": 0.0, "fv_concentric_slope_near_vmax": 0.25, "fv_isometric_slope": 5.0,
    "fv_eccentric_slope_at_vmax": 0.0, "fv_eccentric_slope_near_vmax": 0.15, "fv_max_eccentric_multiplier": 1.4,
    "passive_strain_at_zero_force": 0.0, "passive_strain_at_one_norm_force": 0.6405,
    "passive_stiffness_at_low_force": 0.0751, "passive_stiffness_at_one_norm_force": 6.3163,
    "passive_curviness": 0.6658, "tendon_strain_at_one_norm_force": 0.033,
    "tendon_stiffness_at_one_norm_force": 37.393, "tendon_norm_force_at_toe_end": 0.2255, "tendon_curviness": 0.4504,
}
MILLARD_OTHER = {  # every property away from its default, within OpenSim's ranges
    "active_min_norm_fiber_length": 0.5, "active_transition_norm_fiber_length": 0.8,
    "active_max_norm_fiber_length": 1.7, "active_shallow_ascending_slope": 0.5, "active_minimum_value": 0.05,
    "fv_concentric_slope_at_vmax": 0.05, "fv_concentric_slope_near_vmax": 0.3, "fv_isometric_slope": 4.0,
    "fv_eccentric_slope_at_vmax": 0.02, "fv_eccentric_slope_near_vmax": 0.1, "fv_max_eccentric_multiplier": 1.6,
    "fv_concentric_curviness": 0.3, "fv_eccentric_curviness": 0.5,
    "passive_strain_at_zero_force": 0.05, "passive_strain_at_one_norm_force": 0.5,
    "passive_stiffness_at_low_force": 0.3, "passive_stiffness_at_one_norm_force": 5.0, "passive_curviness": 0.4,
    "tendon_strain_at_one_norm_force": 0.04, "tendon_stiffness_at_one_norm_force": 40.0,
    "tendon_norm_force_at_toe_end": 0.5, "tendon_curviness": 0.7,
}
CURVE_GRIDS = {  # normalised argument of each curve: both extrapolations, every segment
    "ActiveForceLengthCurve": np.linspace(0.2, 2.2, 161).tolist(),
    "ForceVelocityCurve": np.linspace(-1.4, 1.4, 161).tolist(),
    "FiberForceLengthCurve": np.linspace(0.8, 2.0, 161).tolist(),
    "TendonForceLengthCurve": np.linspace(0.98, 1.12, 161).tolist(),
}


def set_curve_properties(muscle, params):
    """Set the curve properties `params` (jaxmb field names) on a Millard muscle's curves."""
    for field, value in params.items():
        curve, prop = CURVE_PROPS[field]
        getattr(getattr(muscle, f"upd_{curve}")(), f"set_{prop}")(value)


def millard_curves():
    out = {}
    for label, params in (("default", {}), ("delt1", MILLARD_DELT1), ("other", MILLARD_OTHER)):
        entry = {"parameters": params}
        for curve, xs in CURVE_GRIDS.items():
            c = getattr(osim, curve)()
            for field, value in params.items():
                if CURVE_PROPS[field][0] == curve:
                    getattr(c, f"set_{CURVE_PROPS[field][1]}")(value)
            c.ensureCurveUpToDate()  # the property setters do not rebuild the curve
            entry[curve] = {"x": xs, "value": [c.calcValue(x) for x in xs],
                            "derivative": [c.calcDerivative(x, 1) for x in xs]}
        out[label] = entry
    return out


def build(kind, rigid, damping=None, curves=None):
    model = osim.Model()
    body = osim.Body("slider", 1.0, osim.Vec3(0), osim.Inertia(0.01, 0.01, 0.01))
    model.addBody(body)
    joint = osim.SliderJoint("slide", model.getGround(), body)
    joint.updCoordinate().setName("x")
    joint.updCoordinate().setRangeMin(0.0)
    joint.updCoordinate().setRangeMax(1.0)
    model.addJoint(joint)
    m = getattr(osim, kind)()
    m.setName("m")
    m.setMaxIsometricForce(PARAMS["max_isometric_force"])
    m.setOptimalFiberLength(PARAMS["optimal_fiber_length"])
    m.setTendonSlackLength(PARAMS["tendon_slack_length"])
    m.setPennationAngleAtOptimalFiberLength(PARAMS["pennation_angle_at_optimal"])
    m.setMaxContractionVelocity(PARAMS["max_contraction_velocity"])
    if kind == "DeGrooteFregly2016Muscle":
        m.set_ignore_tendon_compliance(rigid)
        m.set_fiber_damping(0.0)
    if kind == "Millard2012EquilibriumMuscle":
        m.set_ignore_tendon_compliance(rigid)
        if damping is not None:
            m.set_fiber_damping(damping)
        set_curve_properties(m, curves or {})
    m.addNewPathPoint("origin", model.getGround(), osim.Vec3(0, 0, 0))
    m.addNewPathPoint("insertion", body, osim.Vec3(0, 0, 0))
    model.addForce(m)
    model.setGravity(osim.Vec3(0))
    state = model.initSystem()
    return model, state, getattr(osim, kind).safeDownCast(model.getForceSet().get("m")), joint.getCoordinate()


def run(kind, rigid, damping=None, curves=None, solve_for_velocity=False):
    model, state, m, coord = build(kind, rigid, damping, curves)
    shape = (len(ACTIVATIONS), len(NORM_FIBER), len(SPEEDS))
    keys = ("muscle_length", "fiber_length", "pennation_angle", "fiber_velocity", "active_fiber_force",
            "passive_fiber_force", "tendon_force", "active_along_tendon_rigid", "static_optimization_active_force")
    out = {k: np.full(shape, np.nan) for k in keys}
    for i, a in enumerate(ACTIVATIONS):
        for j, l in enumerate(lengths()):
            for k, v in enumerate(SPEEDS):
                coord.setValue(state, float(l), False)
                coord.setSpeedValue(state, float(v))
                m.setActivation(state, float(a))
                model.realizeVelocity(state)
                out["muscle_length"][i, j, k] = m.getLength(state)
                # What OpenSim's static optimization takes as F_A (at full activation), every model.
                out["static_optimization_active_force"][i, j, k] = m.calcInextensibleTendonActiveFiberForce(state, 1.0)
                if kind == "Thelen2003Muscle" and rigid:
                    out["active_along_tendon_rigid"][i, j, k] = m.calcInextensibleTendonActiveFiberForce(state, a)
                    continue
                if not rigid and solve_for_velocity:
                    m.computeFiberEquilibrium(state, True)
                elif not rigid:
                    m.computeInitialFiberEquilibrium(state)
                model.realizeDynamics(state)
                out["fiber_length"][i, j, k] = m.getFiberLength(state)
                out["pennation_angle"][i, j, k] = m.getPennationAngle(state)
                out["fiber_velocity"][i, j, k] = m.getFiberVelocity(state)
                out["active_fiber_force"][i, j, k] = m.getActiveFiberForce(state)
                out["passive_fiber_force"][i, j, k] = m.getPassiveFiberForce(state)
                out["tendon_force"][i, j, k] = m.getTendonForce(state)
    return {k: v.tolist() for k, v in out.items() if not np.all(np.isnan(v))}


def main(path):
    data = {"opensim_version": osim.GetVersionAndDate(), "command": " ".join(["python"] + sys.argv),
            "parameters": PARAMS, "activations": ACTIVATIONS, "norm_fiber_lengths": NORM_FIBER,
            "speeds": SPEEDS, "muscle_lengths": lengths().tolist(), "models": {}}
    for kind in ("Thelen2003Muscle", "DeGrooteFregly2016Muscle"):
        for rigid in (False, True):
            data["models"][f"{kind}/{'rigid' if rigid else 'compliant'}"] = run(kind, rigid)
    kind = "Millard2012EquilibriumMuscle"
    data["models"][f"{kind}/rigid"] = run(kind, True)
    data["models"][f"{kind}/compliant"] = run(kind, False)
    data["models"][f"{kind}/compliant_undamped"] = run(kind, False, damping=0.0)
    data["models"][f"{kind}/compliant_delt1"] = run(kind, False, curves=MILLARD_DELT1)
    data["models"][f"{kind}/compliant_velocity"] = run(kind, False, solve_for_velocity=True)
    data["millard_curves"] = millard_curves()
    with open(path, "w") as fh:
        json.dump(data, fh)


if __name__ == "__main__":
    main(sys.argv[1])
