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
- ``DeGrooteFregly2016Muscle`` with ``ignore_tendon_compliance`` true and false (explicit tendon
  dynamics; the compliant one through ``computeInitialFiberEquilibrium``): as for Thelen.

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


def build(kind, rigid):
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
    m.addNewPathPoint("origin", model.getGround(), osim.Vec3(0, 0, 0))
    m.addNewPathPoint("insertion", body, osim.Vec3(0, 0, 0))
    model.addForce(m)
    model.setGravity(osim.Vec3(0))
    state = model.initSystem()
    return model, state, getattr(osim, kind).safeDownCast(model.getForceSet().get("m")), joint.getCoordinate()


def run(kind, rigid):
    model, state, m, coord = build(kind, rigid)
    shape = (len(ACTIVATIONS), len(NORM_FIBER), len(SPEEDS))
    keys = ("muscle_length", "fiber_length", "pennation_angle", "fiber_velocity", "active_fiber_force",
            "passive_fiber_force", "tendon_force", "active_along_tendon_rigid")
    out = {k: np.full(shape, np.nan) for k in keys}
    for i, a in enumerate(ACTIVATIONS):
        for j, l in enumerate(lengths()):
            for k, v in enumerate(SPEEDS):
                coord.setValue(state, float(l), False)
                coord.setSpeedValue(state, float(v))
                m.setActivation(state, float(a))
                model.realizeVelocity(state)
                out["muscle_length"][i, j, k] = m.getLength(state)
                if kind == "Thelen2003Muscle" and rigid:
                    out["active_along_tendon_rigid"][i, j, k] = m.calcInextensibleTendonActiveFiberForce(state, a)
                    continue
                if not rigid:
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
    with open(path, "w") as fh:
        json.dump(data, fh)


if __name__ == "__main__":
    main(sys.argv[1])
