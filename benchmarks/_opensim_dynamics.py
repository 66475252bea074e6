#!/usr/bin/env python3
"""OpenSim 4.6's own dynamics on a model, timed per state: run by ``bench_dynamics.py``
in a Python that has ``opensim`` (``--opensim-python``), never imported by jaxmb.

    PY benchmarks/_opensim_dynamics.py MODEL.osim STATES.npz OUT.json [--repeats 3]

STATES.npz holds ``coordinate_names`` (k,), ``q``, ``qd``, ``qdd`` (n, k): jaxmb's states,
set here coordinate by coordinate (``Coordinate.setValue`` without assembling, so that a
coupled coordinate keeps its default; the timing does not depend on it). For each state:

- mass matrix: ``SimbodyMatterSubsystem.calcM`` after ``realizePosition``;
- inverse dynamics: ``InverseDynamicsSolver.solve(state, udot)`` after ``realizeVelocity``,
  with every element of the ForceSet switched off (as the Inverse Dynamics tool excludes
  the muscles) so that the result is ``M q'' + C - G``;
- forward dynamics: ``realizeAcceleration`` (Simbody's O(n) articulated-body recursion,
  with its constraints) and ``getUDot``.

Each is timed over all states (the best of ``--repeats`` passes), wall and process CPU
time; setting the coordinates is not counted. The first state's M and
inverse dynamics are written too, in coordinate order, for the agreement check.
"""

import argparse
import json
import time

import numpy as np
import opensim as osim


def _set_state(model, state, coords, q, qd):
    for c, qi, qdi in zip(coords, q, qd):
        c.setValue(state, float(qi), False)
        c.setSpeedValue(state, float(qdi))


def _u_index(state, coordinate):
    """The Simbody mobility (u index) of a coordinate: where a unit speed lands in U (the
    mobility order follows the multibody tree, not the coordinate set)."""
    probe = osim.State(state)
    probe.setU(osim.Vector(probe.getNU(), 0.0))
    coordinate.setSpeedValue(probe, 1.0)
    (k,) = np.nonzero([probe.getU().get(i) for i in range(probe.getNU())])[0]
    return int(k)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("model")
    p.add_argument("states")
    p.add_argument("out")
    p.add_argument("--repeats", type=int, default=3)
    a = p.parse_args()
    d = np.load(a.states)
    names = [str(n) for n in d["coordinate_names"]]
    Q, QD, QDD = d["q"], d["qd"], d["qdd"]
    model = osim.Model(a.model)
    state = model.initSystem()
    forces = model.getForceSet()
    for i in range(forces.getSize()):
        forces.get(i).setAppliesForce(state, False)
    cs = model.getCoordinateSet()
    coords = [cs.get(n) for n in names]
    matter = model.getMatterSubsystem()
    solver = osim.InverseDynamicsSolver(model)
    nu = state.getNU()
    u_of = [_u_index(state, c) for c in coords]
    udots = []
    for qdd in QDD:
        v = osim.Vector(nu, 0.0)
        for k, x in zip(u_of, qdd):
            v.set(k, float(x))
        udots.append(v)
    M = osim.Matrix(nu, nu)

    def mass_matrix(i):
        model.realizePosition(state)
        matter.calcM(state, M)

    def inverse_dynamics(i):
        model.realizeVelocity(state)
        return solver.solve(state, udots[i])

    def forward_dynamics(i):
        model.realizeAcceleration(state)
        return state.getUDot()

    out = {"nu": nu, "n_states": len(Q), "opensim_version": osim.GetVersion()}
    for name, fn in (("mass_matrix", mass_matrix), ("inverse_dynamics", inverse_dynamics),
                     ("forward_dynamics", forward_dynamics)):
        best_wall = best_cpu = np.inf
        for _ in range(a.repeats):
            wall = cpu = 0.0
            for i in range(len(Q)):
                _set_state(model, state, coords, Q[i], QD[i])
                w0, c0 = time.perf_counter(), time.process_time()
                fn(i)
                wall += time.perf_counter() - w0
                cpu += time.process_time() - c0
            best_wall, best_cpu = min(best_wall, wall), min(best_cpu, cpu)
        out[name] = {"wall_s_per_state": best_wall / len(Q), "cpu_s_per_state": best_cpu / len(Q)}
    _set_state(model, state, coords, Q[0], QD[0])
    mass_matrix(0)
    full = np.array([[M.get(i, j) for j in range(nu)] for i in range(nu)])
    tau = inverse_dynamics(0)
    out["first_state"] = {"mass_matrix": full[np.ix_(u_of, u_of)].tolist(),
                          "inverse_dynamics": [tau.get(k) for k in u_of]}
    with open(a.out, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
