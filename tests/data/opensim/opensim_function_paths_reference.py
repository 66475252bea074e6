"""OpenSim 4.6 reference for muscle paths given as functions of the coordinates
(``FunctionBasedPath`` with ``MultivariatePolynomialFunction``; jaxmb's `FunctionBasedPath`).

1. ``MultivariatePolynomialFunction`` alone: random coefficients for dimensions 1 to 4
   and orders 1 to 5, its value and first partial derivatives at random arguments
   (``calcValue``, ``calcDerivative``), so that jaxmb's reading of the coefficients'
   order is checked monomial by monomial.
2. arm26 with every muscle's GeometryPath fitted by OpenSim's ``PolynomialPathFitter``
   (to a two-coordinate reference motion of 101 frames, 10 samples per frame, orders up
   to 5) and replaced by the fitted ``FunctionBasedPath`` (``ModOpReplacePathsWithFunctionBasedPaths``),
   written as ``arm26_function_paths.osim``; at random in-range states its muscles'
   lengths, lengthening speeds and moment arms (``computeMomentArm`` per coordinate).

Run from the repository root:

    /work/osim-venv/bin/python tests/data/opensim/opensim_function_paths_reference.py ../shared/models/arm26.osim tests/data/opensim

It writes ``arm26_function_paths.osim`` and ``function_paths.npz``.
"""

import math
import os
import sys
import tempfile

import numpy as np
import opensim as osim


def polynomials(rng):
    rows = []
    for dim in range(1, 5):
        for order in range(1, 6):
            n = math.comb(dim + order, order)
            coefficients = rng.normal(size=n)
            f = osim.MultivariatePolynomialFunction(osim.Vector(coefficients.tolist()), dim, order)
            for x in rng.uniform(-1.5, 1.5, (4, dim)):
                v = osim.Vector(x.tolist())
                grad = [f.calcDerivative(osim.StdVectorInt([j]), v) for j in range(dim)]
                rows.append((dim, order, coefficients, x, f.calcValue(v), np.array(grad)))
    return rows


def fitted_model(model_file, out_dir):
    model = osim.Model(model_file)
    model.initSystem()
    coords = [c.getAbsolutePathString() + "/value" for c in model.getCoordinateSet()]
    table = osim.TimeSeriesTable()
    table.setColumnLabels(coords)
    for t in np.linspace(0.0, 1.0, 101):
        table.appendRow(t, osim.RowVector([0.3 + 0.5 * np.sin(2 * np.pi * t), 1.0 + 0.8 * np.sin(4 * np.pi * t)]))
    table.addTableMetaDataString("inDegrees", "no")
    work = tempfile.mkdtemp()
    fitter = osim.PolynomialPathFitter()
    fitter.setModel(osim.ModelProcessor(model))
    fitter.setCoordinateValues(osim.TableProcessor(table))
    fitter.setOutputDirectory(work)
    fitter.setMaximumPolynomialOrder(5)
    fitter.setNumSamplesPerFrame(10)
    fitter.setNumParallelThreads(1)
    fitter.run()
    name = os.path.splitext(os.path.basename(model_file))[0]
    processor = osim.ModelProcessor(model_file)
    processor.append(osim.ModOpReplacePathsWithFunctionBasedPaths(os.path.join(work, f"{name}_FunctionBasedPathSet.xml")))
    fitted = processor.process()
    fitted.initSystem()
    path = os.path.join(out_dir, f"{name}_function_paths.osim")
    fitted.printToXML(path)
    return path


def path_reference(path, rng, n_states=20):
    model = osim.Model(path)
    state = model.initSystem()
    coords = [model.getCoordinateSet().get(i) for i in range(model.getCoordinateSet().getSize())]
    muscles = [model.getMuscles().get(i) for i in range(model.getMuscles().getSize())]
    lo = np.array([c.getRangeMin() for c in coords])
    hi = np.array([c.getRangeMax() for c in coords])
    q = rng.uniform(lo, hi, (n_states, len(coords)))
    qd = rng.normal(size=(n_states, len(coords)))
    L, V = np.zeros((n_states, len(muscles))), np.zeros((n_states, len(muscles)))
    R = np.zeros((n_states, len(coords), len(muscles)))
    for n in range(n_states):
        for c, v, w in zip(coords, q[n], qd[n]):
            c.setValue(state, v, False)
            c.setSpeedValue(state, w)
        model.assemble(state)
        model.realizeVelocity(state)
        for k, m in enumerate(muscles):
            L[n, k] = m.getLength(state)
            V[n, k] = m.getLengtheningSpeed(state)
            for i, c in enumerate(coords):
                R[n, i, k] = m.computeMomentArm(state, c)
    return dict(q=q, qd=qd, lengths=L, speeds=V, moment_arms=R,
                coordinate_names=np.array([c.getName() for c in coords]),
                muscle_names=np.array([m.getName() for m in muscles]))


def main(model_file, out_dir):
    rng = np.random.default_rng(0)
    rows = polynomials(rng)
    path = fitted_model(model_file, out_dir)
    ref = path_reference(path, rng)
    np.savez_compressed(
        os.path.join(out_dir, "function_paths.npz"),
        poly_dim=np.array([r[0] for r in rows]), poly_order=np.array([r[1] for r in rows]),
        poly_coefficients=np.array([np.pad(r[2], (0, 126 - r[2].size)) for r in rows]),
        poly_x=np.array([np.pad(r[3], (0, 4 - r[3].size)) for r in rows]),
        poly_value=np.array([r[4] for r in rows]),
        poly_gradient=np.array([np.pad(r[5], (0, 4 - r[5].size)) for r in rows]),
        **ref, opensim_version=osim.GetVersionAndDate(),
        command="/work/osim-venv/bin/python tests/data/opensim/opensim_function_paths_reference.py " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
