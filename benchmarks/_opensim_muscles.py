#!/usr/bin/env python3
"""OpenSim 4.6's own muscle geometry on a model, timed per state: run by ``bench_muscles.py``
in a Python that has ``opensim`` (``--opensim-python``), never imported by jaxmb.

    PY benchmarks/_opensim_muscles.py MODEL.osim STATES.npz OUT.json [--repeats 3] [--h 1e-6]
                                      [--function-paths PATHS.xml]

STATES.npz holds ``coordinate_names`` (k,) and ``q`` (n, k): jaxmb's states, set here
coordinate by coordinate (``Coordinate.setValue`` without assembling, so that a coupled
coordinate keeps its default; the timing does not depend on it). Two routes to every
muscle's length and the k x n_muscles moment arms, as an OpenSim user would take them:

- ``compute_moment_arm``: ``realizePosition``, ``Muscle.getLength`` of every muscle and
  ``Muscle.computeMomentArm`` of every muscle about each of the k coordinates;
- ``central_differences``: ``realizePosition`` and the lengths at the state and at
  q_j ± h for each coordinate j (2k + 1 realizations), R = -(L(q + h) - L(q - h)) / 2h.

Each route is timed over all states (the best of ``--repeats`` passes), wall and
process CPU time, setting the state included (it is part of both routes' work).

With ``--function-paths``, the muscles' paths are first replaced by the FunctionBasedPaths
of that path set (``ModOpReplacePathsWithFunctionBasedPaths``, as Moco users do with
``PolynomialPathFitter``'s output; jaxmb writes one with `jaxmb.io.write_function_paths`).
"""

import argparse
import json
import time

import numpy as np
import opensim as osim


def main():
    p = argparse.ArgumentParser()
    p.add_argument("model")
    p.add_argument("states")
    p.add_argument("out")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--h", type=float, default=1e-6, help="central-difference step (rad or m)")
    p.add_argument("--function-paths", default="", help="a Set_FunctionBasedPath_ file replacing the paths")
    a = p.parse_args()
    osim.Logger.setLevelString("error")
    d = np.load(a.states)
    names = [str(n) for n in d["coordinate_names"]]
    Q = d["q"]
    if a.function_paths:
        processor = osim.ModelProcessor(a.model)
        processor.append(osim.ModOpReplacePathsWithFunctionBasedPaths(a.function_paths))
        model = processor.process()
    else:
        model = osim.Model(a.model)
    state = model.initSystem()
    cs = model.getCoordinateSet()
    coords = [cs.get(n) for n in names]
    ms = model.getMuscles()
    muscles = [ms.get(i) for i in range(ms.getSize())]

    def set_q(q):
        for c, x in zip(coords, q):
            c.setValue(state, float(x), False)
        model.realizePosition(state)

    def lengths():
        return [m.getLength(state) for m in muscles]

    def compute_moment_arm(q):
        set_q(q)
        L = lengths()
        R = [[m.computeMomentArm(state, c) for m in muscles] for c in coords]
        return L, R

    def central_differences(q):
        set_q(q)
        L = lengths()
        R = []
        for j in range(len(coords)):
            qp, qm = np.array(q), np.array(q)
            qp[j] += a.h
            qm[j] -= a.h
            set_q(qp)
            Lp = lengths()
            set_q(qm)
            Lm = lengths()
            R.append([-(x - y) / (2 * a.h) for x, y in zip(Lp, Lm)])
        return L, R

    out = {"n_states": len(Q), "n_muscles": len(muscles), "nq": len(coords), "h": a.h,
           "opensim_version": osim.GetVersion()}
    for name, fn in (("compute_moment_arm", compute_moment_arm), ("central_differences", central_differences)):
        best_wall = best_cpu = np.inf
        for _ in range(a.repeats):
            w0, c0 = time.perf_counter(), time.process_time()
            for q in Q:
                fn(q)
            best_wall = min(best_wall, time.perf_counter() - w0)
            best_cpu = min(best_cpu, time.process_time() - c0)
        out[name] = {"wall_s_per_state": best_wall / len(Q), "cpu_s_per_state": best_cpu / len(Q)}
    with open(a.out, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
