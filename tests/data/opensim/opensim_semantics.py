#!/usr/bin/env python3
"""Probe OpenSim semantics that matter to a re-implementation (jaxmb's .osim
loader) and print the observations; the results are written up in
tests/data/opensim/README.md.  Needs the ``opensim`` package (separate venv):

    /work/osim-venv/bin/python tests/data/opensim/opensim_semantics.py ../shared/models

1. SimmSpline: compared with a numpy Forsythe-Malcolm-Moler ("fmm") cubic
   spline, for n = 2, 3, 4, 7 knots, inside and outside the knot range.
2. PiecewiseLinearFunction, LinearFunction, Constant, MultiplierFunction.
3. CustomJoint SpatialTransform: rotation order / axes and translations,
   checked on gait2354's ground_pelvis and knee_r joints against numpy.
4. ConditionalPathPoint range end points (inclusive or not); MovingPathPoint
   clamping of its coordinate to the coordinate's range.
5. Counts of MovingPathPoint / ConditionalPathPoint / wrap objects per model.
"""

import collections
import os
import sys

import numpy as np
import opensim as osim


def fmm_coefficients(x, y):
    """Forsythe, Malcolm & Moler (1977) SPLINE: y_i + b dx + c dx^2 + d dx^3."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    n = len(x)
    b, c, d = np.zeros(n), np.zeros(n), np.zeros(n)
    if n < 3:
        b[:] = (y[1] - y[0]) / (x[1] - x[0])
        return b, c, d
    nm1 = n - 1
    d[0] = x[1] - x[0]
    c[1] = (y[1] - y[0]) / d[0]
    for i in range(1, nm1):
        d[i] = x[i + 1] - x[i]
        b[i] = 2.0 * (d[i - 1] + d[i])
        c[i + 1] = (y[i + 1] - y[i]) / d[i]
        c[i] = c[i + 1] - c[i]
    # end conditions: third derivatives at x[0], x[n-1] from divided differences
    b[0] = -d[0]
    b[nm1] = -d[n - 2]
    c[0] = c[nm1] = 0.0
    if n > 3:
        c[0] = c[2] / (x[3] - x[1]) - c[1] / (x[2] - x[0])
        c[nm1] = c[n - 2] / (x[nm1] - x[n - 3]) - c[n - 3] / (x[n - 2] - x[n - 4])
        c[0] = c[0] * d[0] ** 2 / (x[3] - x[0])
        c[nm1] = -c[nm1] * d[n - 2] ** 2 / (x[nm1] - x[n - 4])
    for i in range(1, n):  # forward elimination
        t = d[i - 1] / b[i - 1]
        b[i] -= t * d[i - 1]
        c[i] -= t * c[i - 1]
    c[nm1] /= b[nm1]  # back substitution
    for i in range(n - 2, -1, -1):
        c[i] = (c[i] - d[i] * c[i + 1]) / b[i]
    b[nm1] = (y[nm1] - y[n - 2]) / d[n - 2] + d[n - 2] * (c[n - 2] + 2.0 * c[nm1])
    for i in range(nm1):
        b[i] = (y[i + 1] - y[i]) / d[i] - d[i] * (c[i + 1] + 2.0 * c[i])
        d[i] = (c[i + 1] - c[i]) / d[i]
        c[i] = 3.0 * c[i]
    c[nm1] = 3.0 * c[nm1]
    d[nm1] = d[n - 2]
    return b, c, d


def fmm_eval(x, y, b, c, d, t):
    """Inside: the cubic of the interval; outside: linear with the end slope."""
    x = np.asarray(x, float)
    t = np.asarray(t, float)
    out = np.empty_like(t)
    for k, tk in enumerate(t):
        if tk < x[0]:
            out[k] = y[0] + b[0] * (tk - x[0])
        elif tk > x[-1]:
            out[k] = y[-1] + b[-1] * (tk - x[-1])
        else:
            i = min(np.searchsorted(x, tk, side="right") - 1, len(x) - 2)
            dx = tk - x[i]
            out[k] = y[i] + dx * (b[i] + dx * (c[i] + dx * d[i]))
    return out


def f_eval(f, t, deriv=0):
    out = []
    for tk in t:
        v = osim.Vector(1, float(tk))
        out.append(f.calcValue(v) if deriv == 0 else
                   f.calcDerivative(osim.StdVectorInt([0] * deriv), v))
    return np.array(out)


def spline_tests():
    print("== SimmSpline vs numpy FMM spline (linear extrapolation with end slope)")
    rng = np.random.default_rng(1)
    cases = {
        "n=2": ([-1.5708, 3.14159], [1.5708, -3.14159]),
        "n=3": ([-0.174533, 0.0, 0.436332], [-0.261799, 0.0, 0.436332]),
        "n=4": ([0.0, 0.3, 1.1, 1.6], [0.2, -0.1, 0.4, 0.0]),
        "n=7 random": (np.sort(rng.uniform(-2, 2, 7)), rng.normal(size=7)),
    }
    for name, (x, y) in cases.items():
        f = osim.SimmSpline()
        for xi, yi in zip(x, y):
            f.addPoint(float(xi), float(yi))
        b, c, d = fmm_coefficients(x, y)
        lo, hi = x[0], x[-1]
        w = hi - lo
        t_in = np.linspace(lo, hi, 101)
        t_out = np.array([lo - 0.5 * w, lo - 1e-3, hi + 1e-3, hi + 0.5 * w])
        err_in = np.abs(f_eval(f, t_in) - fmm_eval(x, y, b, c, d, t_in)).max()
        err_out = np.abs(f_eval(f, t_out) - fmm_eval(x, y, b, c, d, t_out)).max()
        d1 = f_eval(f, t_out, 1)
        d2 = f_eval(f, t_out, 2)
        print(f"  {name}: max|osim - fmm| inside {err_in:.1e}, outside {err_out:.1e}; "
              f"slope outside {np.round(d1, 6)} (end slopes b0={b[0]:.6f}, "
              f"bn={b[-1]:.6f}); 2nd derivative outside {np.round(d2, 12)}")
        # knots reproduced? second derivative continuity at interior knots?
        print(f"     knots reproduced: {np.abs(f_eval(f, x) - y).max():.1e}; "
              f"2nd deriv at ends (inside) {f_eval(f, [lo + 1e-9, hi - 1e-9], 2)}")
        if name == "n=3":
            # is the n=3 case a single parabola?
            p = np.polyfit(x, y, 2)
            print(f"     n=3 equals interpolating parabola: "
                  f"{np.abs(f_eval(f, t_in) - np.polyval(p, t_in)).max():.1e}")


def function_tests():
    print("== other functions")
    pl = osim.PiecewiseLinearFunction()
    for xi, yi in [(0.0, 0.0), (1.0, 2.0), (3.0, 3.0)]:
        pl.addPoint(xi, yi)
    t = [-1.0, 0.5, 2.0, 4.0]
    print(f"  PiecewiseLinearFunction (0,0),(1,2),(3,3) at {t}: {f_eval(pl, t)}, "
          f"d/dx {f_eval(pl, t, 1)}")
    lf = osim.LinearFunction(2.0, 0.5)
    print(f"  LinearFunction(2.0, 0.5) (coefficients = [slope, intercept]) at 3: "
          f"{f_eval(lf, [3.0])}")
    inner = osim.LinearFunction(2.0, 0.5)
    inner.thisown = False  # the MultiplierFunction takes ownership
    mf = osim.MultiplierFunction(inner, 3.0)
    print(f"  MultiplierFunction(LinearFunction(2, 0.5), 3) at 3: {f_eval(mf, [3.0])}, "
          f"d/dx {f_eval(mf, [3.0], 1)} (= scale * f(x): argument not scaled)")
    cf = osim.Constant(4.0)
    print(f"  Constant(4) at 1: {f_eval(cf, [1.0])}")


def rot(axis, angle):
    a = np.asarray(axis, float)
    a = a / np.linalg.norm(a)
    K = np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])
    return np.eye(3) + np.sin(angle) * K + (1 - np.cos(angle)) * K @ K


def to44(T):
    X = np.eye(4)
    for i in range(3):
        for j in range(3):
            X[i, j] = T.R().get(i, j)
        X[i, 3] = T.p().get(i)
    return X


def joint_tests(models_dir):
    print("== CustomJoint SpatialTransform")
    m = osim.Model(os.path.join(models_dir, "gait2354_simbody.osim"))
    s = m.initSystem()
    rng = np.random.default_rng(2)
    for jname in ["ground_pelvis", "hip_r", "knee_r"]:
        j = osim.CustomJoint.safeDownCast(m.getJointSet().get(jname))
        st = j.getSpatialTransform()
        axes = [[st.getTransformAxis(i).getAxis().get(k) for k in range(3)] for i in range(6)]
        coords = [j.get_coordinates(i) for i in range(j.numCoordinates())]
        for c in coords:
            cc = m.getCoordinateSet().get(c.getName())
            lo, hi = cc.getRangeMin(), cc.getRangeMax()
            cc.setValue(s, rng.uniform(lo, hi) if cc.getMotionType() != 2 else 0.3, False)
        m.realizePosition(s)
        vals = []
        for i in range(6):
            ta = st.getTransformAxis(i)
            f = ta.getFunction()
            names = ta.getCoordinateNamesInArray()
            x = osim.Vector(names.getSize(), 0.0)
            for k in range(names.getSize()):
                x.set(k, m.getCoordinateSet().get(names.get(k)).getValue(s))
            vals.append(f.calcValue(x) if names.getSize() else f.calcValue(osim.Vector(1, 0.0)))
        # X_GF (parent offset frame in ground), X_GM (child offset frame in ground)
        X_GF = to44(j.getParentFrame().getTransformInGround(s))
        X_GM = to44(j.getChildFrame().getTransformInGround(s))
        X_FM = np.linalg.inv(X_GF) @ X_GM
        R_body = rot(axes[0], vals[0]) @ rot(axes[1], vals[1]) @ rot(axes[2], vals[2])
        R_space = rot(axes[2], vals[2]) @ rot(axes[1], vals[1]) @ rot(axes[0], vals[0])
        p = sum(vals[3 + i] * np.asarray(axes[3 + i]) / np.linalg.norm(axes[3 + i])
                for i in range(3))
        print(f"  {jname}: axes {axes}")
        print(f"     R_FM vs R1(a1)R2(a2)R3(a3) [body-fixed, successive]: "
              f"{np.abs(X_FM[:3, :3] - R_body).max():.1e}; vs R3 R2 R1 [parent-fixed]: "
              f"{np.abs(X_FM[:3, :3] - R_space).max():.1e}")
        print(f"     p_FM vs sum t_i * axis_i (in parent/F frame): "
              f"{np.abs(X_FM[:3, 3] - p).max():.1e}; vs R_FM @ that: "
              f"{np.abs(X_FM[:3, 3] - R_body @ p).max():.1e}")


def conditional_test(models_dir):
    print("== ConditionalPathPoint range end points")
    m = osim.Model(os.path.join(models_dir, "gait2354_simbody.osim"))
    s = m.initSystem()
    for mu in [m.getMuscles().get(i) for i in range(m.getMuscles().getSize())]:
        pps = mu.getGeometryPath().getPathPointSet()
        for i in range(pps.getSize()):
            if pps.get(i).getConcreteClassName() == "ConditionalPathPoint":
                cp = osim.ConditionalPathPoint.safeDownCast(pps.get(i))
                c = m.getCoordinateSet().get(cp.getCoordinate().getName())
                r0, r1 = cp.get_range(0), cp.get_range(1)
                res = []
                offs = [1e-4, 2e-5, 1.1e-5, 0.9e-5, 1e-6, 0.0]
                for v in [r0 - o for o in offs] + [r1 + o for o in offs[::-1]]:
                    c.setValue(s, v, False)
                    m.realizePosition(s)
                    res.append(bool(cp.isActive(s)))
                print(f"  {mu.getName()}/{cp.getName()} on {c.getName()} range [{r0}, {r1}]: "
                      f"active at r0 - {offs}, r1 + {offs[::-1]}: {res}")
                return


def moving_point_clamp_test(models_dir):
    print("== MovingPathPoint: coordinate clamped to its range?")
    m = osim.Model(os.path.join(models_dir, "gait2354_simbody.osim"))
    s = m.initSystem()
    c = m.getCoordinateSet().get("knee_angle_r")
    mp = osim.MovingPathPoint.safeDownCast(
        m.getMuscles().get("rect_fem_r").getGeometryPath().getPathPointSet().get("rect_fem_r-P3"))
    fx = mp.get_x_location()
    print(f"  knee_angle_r range [{c.getRangeMin()}, {c.getRangeMax()}], clamped="
          f"{c.getDefaultClamped()}")
    for v in [0.1, c.getRangeMax(), 0.2, 0.3, c.getRangeMin(), -2.2]:
        c.setValue(s, v, False)
        m.realizePosition(s)
        print(f"  q={v:+.6f}: location x {mp.getLocation(s).get(0):.6f}, "
              f"f_x(q) {fx.calcValue(osim.Vector(1, v)):.6f}")


def counts(models_dir):
    print("== path point / wrap counts")
    for f in ["arm26.osim", "gait2354_simbody.osim", "MOBL_ARMS_fixed_41.osim"]:
        m = osim.Model(os.path.join(models_dir, f))
        m.initSystem()
        pts = collections.Counter()
        pathwraps = collections.Counter()
        moving_coords = collections.Counter()
        cond_coords = collections.Counter()
        nm = m.getMuscles().getSize()
        wrapped = 0
        for k in range(nm):
            gp = m.getMuscles().get(k).getGeometryPath()
            pps = gp.getPathPointSet()
            for i in range(pps.getSize()):
                cn = pps.get(i).getConcreteClassName()
                pts[cn] += 1
                if cn == "MovingPathPoint":
                    mp = osim.MovingPathPoint.safeDownCast(pps.get(i))
                    for c in (mp.getXCoordinate(), mp.getYCoordinate(), mp.getZCoordinate()):
                        moving_coords[c.getName()] += 1
                elif cn == "ConditionalPathPoint":
                    cp = osim.ConditionalPathPoint.safeDownCast(pps.get(i))
                    cond_coords[cp.getCoordinate().getName()] += 1
            ws = gp.getWrapSet()
            wrapped += ws.getSize() > 0
            for i in range(ws.getSize()):
                pathwraps[ws.get(i).getWrapObject().getConcreteClassName()] += 1
        objs = collections.Counter()
        for b in [m.getBodySet().get(i) for i in range(m.getBodySet().getSize())] + [m.getGround()]:
            wos = b.getWrapObjectSet()
            for i in range(wos.getSize()):
                objs[wos.get(i).getConcreteClassName()] += 1
        # non-muscle paths (e.g. Ligament)
        others = collections.Counter()
        fs = m.getForceSet()
        for i in range(fs.getSize()):
            if osim.Muscle.safeDownCast(fs.get(i)) is None:
                others[fs.get(i).getConcreteClassName()] += 1
        print(f"  {f}: {nm} muscles ({wrapped} with wrapping); path points {dict(pts)}; "
              f"MovingPathPoint coordinates (x,y,z counted separately) {dict(moving_coords)}; "
              f"ConditionalPathPoint coordinates {dict(cond_coords)}; wrap objects on bodies "
              f"{dict(objs)}; PathWrap uses by muscles {dict(pathwraps)}; non-muscle forces "
              f"{dict(others)}")


if __name__ == "__main__":
    osim.Logger.setLevelString("error")
    d = sys.argv[1] if len(sys.argv) > 1 else "../shared/models"
    print("OpenSim", osim.__version__)
    spline_tests()
    function_tests()
    joint_tests(d)
    conditional_test(d)
    moving_point_clamp_test(d)
    counts(d)
