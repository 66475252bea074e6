"""OpenSim 4.6 reference for the ForceSet's non-muscle elements (jaxmb._forces).

Builds a small model (ground -PinJoint-> b1 -GimbalJoint-> b2 -SliderJoint-> b3; each
mobilizer's generalized speeds are its coordinates' rates, as jaxmb's ``q'``) with one element of each kind jaxmb reads, writes it as
``forces_model.osim`` and records, at a few states, each element's generalized force:
with every force disabled but that one (``Force::setAppliesForce``), OpenSim's
``InverseDynamicsSolver`` gives ``tau_k = M·0 + bias - G - Q_k``, and ``Q_k = tau_0 - tau_k``
where ``tau_0`` has every force disabled. Actuators are driven by
``ScalarActuator::overrideActuation`` with the actuation ``optimal_force · u``.

Run from the repository root:

    /work/osim-venv/bin/python tests/data/opensim/opensim_forces_reference.py tests/data/opensim

It writes ``forces_model.osim`` and ``forces_reference.npz`` (states ``q``, ``qd``,
controls ``u`` per actuator, ``Q`` (n_states, n_forces, nq), force and coordinate names,
OpenSim's version).
"""

import os
import sys

import numpy as np
import opensim as osim

V = osim.Vec3


def build():
    m = osim.Model()
    m.setName("forces")
    m.setGravity(V(0, -9.80665, 0))
    b1 = osim.Body("b1", 1.0, V(0.1, 0.2, 0.0), osim.Inertia(0.1, 0.2, 0.15))
    b2 = osim.Body("b2", 2.0, V(0.0, 0.3, 0.1), osim.Inertia(0.1, 0.2, 0.15))
    b3 = osim.Body("b3", 0.5, V(0.05, 0.0, 0.0), osim.Inertia(0.1, 0.2, 0.15))
    for b in (b1, b2, b3):
        m.addBody(b)
    j1 = osim.PinJoint("j1", m.getGround(), V(0.1, 0, 0), V(0.2, 0.1, 0), b1, V(0), V(0))
    j1.upd_coordinates(0).setName("q0")
    j2 = osim.GimbalJoint("j2", b1, V(0, 0.5, 0), V(0.1, 0, 0.2), b2, V(0), V(0))
    for i, n in enumerate(("r1", "r2", "r3")):
        j2.upd_coordinates(i).setName(n)
    j3 = osim.SliderJoint("j3", b2, V(0.2, 0, 0.1), V(0, 0, 0.3), b3, V(0), V(0))
    j3.upd_coordinates(0).setName("s")
    for j in (j1, j2, j3):
        m.addJoint(j)
    for c in ("q0", "r1", "r2", "r3", "s"):
        coord = m.updCoordinateSet().get(c)
        coord.setRangeMin(-10.0)
        coord.setRangeMax(10.0)

    ca = osim.CoordinateActuator("r2")
    ca.setName("reserve_r2")
    ca.setOptimalForce(10.0)
    m.addForce(ca)
    pa = osim.PointActuator("b2")
    pa.setName("point_b2")
    pa.set_point(V(0.1, 0.2, 0.3))
    pa.set_direction(V(1, 1, 0))
    pa.setOptimalForce(5.0)
    m.addForce(pa)
    pg = osim.PointActuator("b3")
    pg.setName("point_b3_global")
    pg.set_point(V(0.3, 0.7, 0.1))
    pg.set_point_is_global(True)
    pg.set_direction(V(0, 1, 2))
    pg.set_force_is_global(True)
    pg.setOptimalForce(2.0)
    m.addForce(pg)
    ta = osim.TorqueActuator(b3, b1, V(1, 1, 0.5), False)
    ta.setName("torque_b3_b1")
    ta.setOptimalForce(3.0)
    m.addForce(ta)
    clf = osim.CoordinateLimitForce("r1", 10.0, 50.0, -20.0, 40.0, 0.1, 5.0)
    clf.setName("limit_r1")
    m.addForce(clf)
    clt = osim.CoordinateLimitForce("s", 0.3, 800.0, -0.05, 600.0, 3.0, 0.02)
    clt.setName("limit_s")
    m.addForce(clt)
    sp = osim.PointToPointSpring(m.getGround(), V(0, 1, 0), b3, V(0.1, 0, 0), 50.0, 0.3)
    sp.setName("spring")
    m.addForce(sp)
    f1 = osim.PhysicalOffsetFrame("f1", b1, osim.Transform(V(0.1, 0.0, 0.05)))
    f1.set_orientation(V(0.1, 0.2, 0.3))
    b1.addComponent(f1)
    f3 = osim.PhysicalOffsetFrame("f3", b3, osim.Transform(V(0.0, 0.2, 0.0)))
    f3.set_orientation(V(-0.2, 0.1, 0.4))
    b3.addComponent(f3)
    bu = osim.BushingForce("bushing", f1, f3, V(10, 20, 30), V(1, 2, 3), V(1, 2, 3), V(0.1, 0.2, 0.3))
    m.addForce(bu)
    lig = osim.Ligament()
    lig.setName("ligament")
    path = lig.updGeometryPath()
    path.appendNewPathPoint("p0", m.getGround(), V(0.0, 1.0, 0.2))
    path.appendNewPathPoint("p1", b2, V(0.05, 0.1, 0.0))
    path.appendNewPathPoint("p2", b3, V(0.1, 0.0, 0.0))
    lig.set_resting_length(0.5)
    lig.set_pcsa_force(200.0)
    curve = osim.SimmSpline()
    for x, y in ((0.0, 0.0), (1.0, 0.0), (1.1, 0.05), (1.3, 0.3), (1.6, 0.8), (2.5, 2.0)):
        curve.addPoint(x, y)
    lig.setForceLengthCurve(curve)
    m.addForce(lig)
    ex = osim.ExpressionBasedCoordinateForce("q0", "-3*q^2-0.5*qdot+sin(q)/(1+exp(-q))")
    ex.setName("expression_q0")
    m.addForce(ex)
    m.finalizeConnections()
    return m


def main(out_dir):
    m = build()
    osim_path = os.path.join(out_dir, "forces_model.osim")
    m.printToXML(osim_path)
    m = osim.Model(osim_path)  # what jaxmb reads
    s = m.initSystem()
    coords = [m.getCoordinateSet().get(i) for i in range(m.getCoordinateSet().getSize())]
    forces = [m.getForceSet().get(i) for i in range(m.getForceSet().getSize())]
    actuators = [(i, osim.ScalarActuator.safeDownCast(f)) for i, f in enumerate(forces)
                 if osim.ScalarActuator.safeDownCast(f) is not None]
    rng = np.random.default_rng(0)
    states = [
        (np.array([0.3, 0.25, -0.4, 0.2, 0.32]), np.array([0.5, 0.2, -0.1, 0.3, 0.1])),
        (np.array([-0.2, -0.36, 0.3, -0.5, -0.06]), np.array([-0.3, 0.4, 0.2, -0.1, -0.2])),
        (np.array([0.1, 0.18, 0.1, 0.3, 0.4]), np.array([0.1, -0.5, 0.3, 0.2, 0.05])),
    ]
    controls = rng.uniform(-1, 1, (len(states), len(actuators)))
    solver = osim.InverseDynamicsSolver(m)
    nu = s.getNU()
    out_q = np.zeros((len(states), len(forces), len(coords)))

    def tau(s):
        return np.array([solver.solve(s, osim.Vector(nu, 0.0)).get(i) for i in range(nu)])

    for n, (q, qd) in enumerate(states):
        for c, v, w in zip(coords, q, qd):
            c.setValue(s, float(v), False)
            c.setSpeedValue(s, float(w))
        m.assemble(s)
        for k, (i, a) in enumerate(actuators):
            a.overrideActuation(s, True)
            a.setOverrideActuation(s, float(controls[n, k] * a.getOptimalForce()))
        for f in forces:
            f.setAppliesForce(s, False)
        m.realizeVelocity(s)
        base = tau(s)
        for i, f in enumerate(forces):
            f.setAppliesForce(s, True)
            m.realizeVelocity(s)
            out_q[n, i] = base - tau(s)
            f.setAppliesForce(s, False)
        check = np.array([c.getValue(s) for c in coords])
        assert np.allclose(check, q, atol=1e-14), (check, q)
    np.savez(os.path.join(out_dir, "forces_reference.npz"),
             q=np.array([s_[0] for s_ in states]), qd=np.array([s_[1] for s_ in states]), u=controls,
             Q=out_q, force_names=np.array([f.getName() for f in forces]),
             actuator_names=np.array([a.getName() for _, a in actuators]),
             coordinate_names=np.array([c.getName() for c in coords]),
             opensim_version=np.array(osim.GetVersionAndDate()),
             command=np.array("/work/osim-venv/bin/python tests/data/opensim/opensim_forces_reference.py "
                              "tests/data/opensim"))
    print("wrote", osim_path, "and forces_reference.npz;", len(forces), "forces,", len(states), "states")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__)))
