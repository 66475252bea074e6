"""Reference values of OpenSim's GCVSpline, for tests/test_osim_functions.py.

Run with the OpenSim venv (OpenSim is not a jaxmb dependency):

    /work/osim-venv/bin/python tests/data/opensim/opensim_gcvspline_reference.py tests/data/opensim/gcvspline.json

Each case builds an ``OpenSim.GCVSpline`` from XML (``half_order``,
``error_variance``, ``x``, ``y``) and records ``calcValue`` and the first and second
``calcDerivative`` at the knots, between them and up to 1 beyond the data range,
plus ``getCoefficients()`` (GCVSPL's coefficients).
"""

import json
import sys
import tempfile

import numpy as np
import opensim as osim


def make_spline(x, y, half_order, error_variance):
    xs = " ".join(repr(float(v)) for v in x)
    ys = " ".join(repr(float(v)) for v in y)
    xml = (f'<GCVSpline name="f"><half_order>{half_order}</half_order>'
           f"<error_variance>{float(error_variance)!r}</error_variance>"
           f"<x>{xs}</x><y>{ys}</y></GCVSpline>")
    with tempfile.NamedTemporaryFile("w", suffix=".xml", delete=False) as f:
        f.write('<?xml version="1.0" encoding="UTF-8" ?>\n'
                f'<OpenSimDocument Version="40000">\n{xml}\n</OpenSimDocument>\n')
        path = f.name
    return osim.GCVSpline.safeDownCast(osim.OpenSimObject.makeObjectFromFile(path))


def cases():
    rng = np.random.default_rng(20240611)
    out = []
    # the data of the former broken-corpus file gcvspline_quintic.osim
    x6 = [-2.0, -1.0, 0.0, 1.0, 2.0, 3.0]
    y6 = [0.0, 0.01, 0.02, 0.01, 0.0, 0.0]
    for m in (1, 2, 3):
        out.append(("corpus_data", x6, y6, m, 0.0))
    # non-uniform abscissae, a smooth curve plus noise
    x = np.sort(rng.uniform(0.0, 3.0, 11))
    y = np.sin(2.0 * x) + 0.1 * rng.normal(size=11)
    for m in (1, 2, 3):
        out.append(("nonuniform", x.tolist(), y.tolist(), m, 0.0))
    # strongly clustered abscissae (spacings from 0.01 to 1)
    x = np.cumsum(np.concatenate([[-1.2], [0.01, 0.02, 0.5, 1.0, 0.05, 0.3, 0.8, 0.02]]))
    y = 0.03 * np.cos(3.0 * x) + 0.01 * x
    for m in (2, 3):
        out.append(("clustered", x.tolist(), y.tolist(), m, 0.0))
    # heptic, and a longer quintic like a joint-angle curve in radians
    x = np.cumsum(rng.uniform(0.05, 1.0, 9))
    out.append(("heptic", x.tolist(), np.cos(x).tolist(), 4, 0.0))
    x = np.linspace(-1.5, 2.2, 25)
    out.append(("quintic_25", x.tolist(), (0.02 * np.sin(2.5 * x) + 0.005 * x**2).tolist(), 3, 0.0))
    # smoothing: known error variance (mode 3) and generalized cross-validation (mode 2)
    x = np.sort(rng.uniform(0.0, 3.0, 15))
    y = np.sin(2.0 * x) + 0.1 * rng.normal(size=15)
    out.append(("smooth_variance", x.tolist(), y.tolist(), 3, 0.01))
    out.append(("smooth_variance", x.tolist(), y.tolist(), 2, 0.01))
    out.append(("smooth_gcv", x.tolist(), y.tolist(), 2, -1.0))
    out.append(("smooth_gcv", x.tolist(), y.tolist(), 3, -1.0))
    return out


def main(path):
    records = []
    first, second = osim.StdVectorInt([0]), osim.StdVectorInt([0, 0])
    for name, x, y, m, variance in cases():
        spline = make_spline(x, y, m, variance)
        xa = np.asarray(x)
        mid = 0.5 * (xa[1:] + xa[:-1])
        t = np.concatenate([xa, mid, np.linspace(xa[0] - 1.0, xa[-1] + 1.0, 41)])
        args = [osim.Vector(1, float(v)) for v in t]
        coef = spline.getCoefficients()
        records.append({
            "name": name, "half_order": m, "error_variance": variance, "x": list(x), "y": list(y),
            "t": t.tolist(),
            "value": [spline.calcValue(a) for a in args],
            "d1": [spline.calcDerivative(first, a) for a in args],
            "d2": [spline.calcDerivative(second, a) for a in args],
            "coefficients": [coef.get(i) for i in range(coef.getSize())],
        })
    doc = {"opensim_version": osim.GetVersionAndDate(),
           "command": "/work/osim-venv/bin/python tests/data/opensim/opensim_gcvspline_reference.py " + path,
           "cases": records}
    with open(path, "w") as f:
        json.dump(doc, f, indent=None)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
