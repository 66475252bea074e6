#!/usr/bin/env python3
"""Generate OpenSim reference data (an .npz) for jaxmb's ".osim parity" tests.

This is a *tool*, not part of jaxmb.  It needs the ``opensim`` Python package
(OpenSim 4.6 from PyPI, cp311), which jaxmb never depends on.  Run it from a
separate virtual environment, e.g.::

    python3.11 -m venv /work/osim-venv
    /work/osim-venv/bin/pip install opensim numpy
    /work/osim-venv/bin/python tests/data/opensim/opensim_reference.py \\
        ../shared/models/arm26.osim tests/data/opensim/arm26.npz

Conventions (everything SI: radians, metres, kilograms, seconds, newtons)
-------------------------------------------------------------------------
Coordinates
    ``coordinate_names``: all of the model's coordinates, in model order
    (``Model.getCoordinateSet()`` order).  "full" vectors (``*_q_full``,
    ``*_qd_full``, ``*_qdd_full``, ``*_tau_full``, rows of ``C``) use this
    order.  Each coordinate is exactly one of

    * locked      (``coordinate_locked``; ``Coordinate.getDefaultLocked``),
      held at its default value;
    * dependent   (``coordinate_dependent``; the dependent coordinate of an
      enforced ``CoordinateCouplerConstraint``):
      ``q_dep = scale_factor * f(q_indep_1, ...)``;
    * independent (``coordinate_independent``): neither of the above.

    ``independent_coordinate_indices`` gives the positions of the independent
    coordinates in ``coordinate_names``; "ind" vectors (``q_ind`` etc.) use
    that order (which is also the order of ``independent_coordinate_names``
    and the order jaxmb's ``model.coordinate_names`` must have).
    ``coordinate_motion_types``: OpenSim's Coordinate::MotionType
    (1 rotational, 2 translational, 3 coupled - a coordinate that is used
    inside a non-linear joint function; it is still an angle in these
    models).  ``coordinate_defaults``, ``coordinate_ranges`` (n, 2) [min, max].

    Full coordinate vectors are obtained from the independent ones by
    evaluating the coupler functions directly (in dependency order), i.e.
    the constraints are satisfied to machine precision (the script asserts
    Simbody's position-constraint error, ``State.getQErr``, is < 1e-10).
    ``C = d q_full / d q_ind`` and the second derivatives are evaluated
    analytically with ``Function.calcDerivative`` (chain rule).

Mobilities
    For these models (CustomJoint/WeldJoint only) every coordinate is one
    Simbody generalized coordinate q and one generalized speed u with
    qdot = u.  ``mobility_coordinate_index[k]`` is the coordinate (index
    into ``coordinate_names``) of Simbody mobility (u index) k.  The full
    mass matrix ``random_mass_matrix_mobility`` is in *mobility* order (as
    returned by ``SimbodyMatterSubsystem.calcM``); everything else "full" is
    in coordinate order.  (For arm26, gait2354 and MoBL-ARMS the two orders
    coincide; the mapping is stored anyway.)

Bodies and poses
    ``body_names``: ``Model.getBodySet()`` order (ground excluded).  A pose
    is the 4x4 homogeneous matrix ``X_GB = [[R, p], [0, 0, 0, 1]]`` of the
    body frame B in ground G (``Body.getTransformInGround``): ground-from-
    body, a point with body-frame coordinates r_B has ground coordinates
    ``R @ r_B + p``; the columns of R are the body's x, y, z axes expressed
    in ground; p is the body origin in ground.

Muscles
    ``muscle_names``: ``Model.getMuscles()`` order.  Lengths are the
    musculotendon path lengths ``Muscle.getLength(state)`` (= GeometryPath
    length, including wrapping) in metres.  Moment arms follow the sign
    ``r = -dL/dq``:

    * ``*_moment_arms_opensim``: ``Muscle.computeMomentArm(state, coord)``
      (OpenSim's MomentArmSolver; for a coordinate that drives coupled
      coordinates it accounts for the coupling).
    * ``*_moment_arms_fd``: ``-(L(q_ind + h e_j) - L(q_ind - h e_j)) / (2 h)``
      with h = ``fd_step`` (1e-6), where the dependent coordinates follow
      the independent one through the coupler functions (total derivative).
    * ``*_fd_smooth`` (bool, same shape): True where the h = 1e-6 central
      difference agrees with an h = 1e-4 one to ``fd_check_tol`` (1e-5 m)
      AND the forward and backward h = 1e-6 difference quotients agree to
      1e-5 m.  False marks points within ~1e-4 of a jump or kink of L(q)
      (ConditionalPathPoint switching, MovingPathPoints - OpenSim clamps
      their coordinate to its range, so L has a kink exactly at the range
      ends -, a wrap object engaging/releasing, quadrant changes);
      there the FD value is meaningless and a parity test should skip it.
    * OpenSim's ``computeMomentArm`` is NOT always -dL/dq (see
      tests/data/opensim/README.md): compare a re-implementation with the
      FD values; the OpenSim ones are kept for information.

Sweeps
    For each independent coordinate j (in independent order) the coordinate
    is swept over its range with every other independent coordinate at its
    default: rotational coordinates in 1-degree steps from the range min
    (``min + k*deg`` up to the max) unless that gives more than
    ``points_per_coordinate`` points, in which case ``linspace(min, max,
    points_per_coordinate)``; translational coordinates always use
    ``linspace(min, max, points_per_coordinate)``.  All sweeps are
    concatenated; ``sweep_coordinate`` (P,) gives, for each point, the index
    *into the independent coordinates* of the swept coordinate and
    ``sweep_value`` its value.  Arrays: ``sweep_q_ind`` (P, n_ind),
    ``sweep_q_full`` (P, n_coord), ``sweep_body_poses`` (P, n_body, 4, 4),
    ``sweep_muscle_lengths`` (P, n_muscle), ``sweep_moment_arms_opensim``
    and ``sweep_moment_arms_fd`` (P, n_muscle): about the swept coordinate
    only.

Random states (N = ``--random-states``)
    ``random_q_ind`` uniform in each independent coordinate's range,
    ``random_qd_ind`` uniform in [-1, 1], ``random_qdd_ind`` uniform in
    [-1, 1] (rad/s^2 or m/s^2).  Full vectors:
    ``qd_full = C qd_ind``, ``qdd_full = C qdd_ind + Cdot qd_ind`` with
    ``(Cdot qd_ind)_i = qd_ind^T (d^2 q_full_i / d q_ind^2) qd_ind``.

    * ``random_C`` (N, n_coord, n_ind) and ``random_Cdot_qd`` (N, n_coord).
    * ``random_mass_matrix_mobility`` (N, n_u, n_u): ``calcM``.
    * ``random_mass_matrix_ind`` (N, n_ind, n_ind) = ``C^T M C`` (M permuted
      to coordinate order first).
    * Inverse dynamics: ``tau_full(q, qd, qdd) = M qdd + c(q, qd) - g(q)``
      computed with ``opensim.InverseDynamicsSolver.solve(state, udot)``
      (= ``SimbodyMatterSubsystem.calcResidualForceIgnoringConstraints``
      with gravity as the only applied force: every force in the ForceSet -
      muscles, ligaments, coordinate-limit forces - is disabled with
      ``setAppliesForce(state, False)``).  c holds the Coriolis/centrifugal
      (velocity) terms and g(q) the generalized gravity forces (the force
      gravity applies at the coordinates, on the right-hand side).  So tau
      is the generalized force that must be applied at the coordinates to
      produce the accelerations; constraint forces are *not* included.
      Reduced to the independent coordinates: ``tau_ind = C^T tau_full``
      evaluated at ``(q_full, C qd_ind, C qdd_ind + Cdot qd_ind)``; this is
      ``M_ind qdd_ind + bias_ind`` with jaxmb's ``bias = N qd - G``.

      - ``random_tau_zero_acc_full`` / ``_ind``: qdd_ind = 0 (note:
        qdd_full = Cdot qd_ind, not 0), i.e. ``tau_ind`` is jaxmb's
        ``bias_forces(model, q, qd)``.
      - ``random_tau_random_acc_full`` / ``_ind``: qdd_ind = random_qdd_ind.
      - ``random_gravity_forces_full`` / ``_ind``: g(q) (qd = qdd = 0; sign:
        the generalized force of gravity, = -tau), jaxmb's
        ``gravity_forces``.
    * ``random_body_poses``, ``random_muscle_lengths`` (N, n_muscle),
      ``random_moment_arms_opensim`` / ``random_moment_arms_fd``
      (N, n_ind, n_muscle), about every independent coordinate (jaxmb's
      ``moment_arms`` layout).
    * ``gravity`` (3,): the model's gravity vector in ground, m/s^2.

Timing
    ``opensim_seconds_per_state_lengths_and_moment_arms``: mean wall time
    per random state of: set Q, ``realizePosition``, ``getLength`` for every
    muscle and ``computeMomentArm`` for every muscle x every independent
    coordinate (single thread, Python bindings; best of ``--timing-repeats``
    wall-clock means; method, CPU and load average in
    ``opensim_timing_method``).  The process CPU time per state is stored as
    ``opensim_cpu_seconds_per_state_lengths_and_moment_arms``.  Stored for
    every model.

Meta: ``opensim_version``, ``model_file``, ``model_sha256``, ``seed``,
``points_per_coordinate``, ``fd_step``, ``command``.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time

import numpy as np
import opensim as osim

FD_STEP = 1e-6
FD_CHECK_STEP = 1e-4  # second central difference, to flag non-smooth points
FD_CHECK_TOL = 1e-5  # metres
DEG = np.pi / 180.0


def _vec(v):
    return np.array(v.to_numpy(), dtype=np.float64)


def _mat(m):
    return np.array([[m.get(i, j) for j in range(m.ncol())] for i in range(m.nrow())])


def _pose(body, state):
    T = body.getTransformInGround(state)
    R = T.R()
    p = T.p()
    X = np.eye(4)
    for i in range(3):
        for j in range(3):
            X[i, j] = R.get(i, j)
        X[i, 3] = p.get(i)
    return X


class Reference:
    def __init__(self, path):
        self.model = osim.Model(path)
        self.state = self.model.initSystem()
        m, s = self.model, self.state
        cs = m.getCoordinateSet()
        self.coords = [cs.get(i) for i in range(cs.getSize())]
        self.coord_names = [c.getName() for c in self.coords]
        cidx = {n: i for i, n in enumerate(self.coord_names)}
        nc = len(self.coords)
        self.motion = np.array([int(c.getMotionType()) for c in self.coords])
        self.locked = np.array([bool(c.getDefaultLocked()) for c in self.coords])
        self.defaults = np.array([c.getDefaultValue() for c in self.coords])
        self.ranges = np.array([[c.getRangeMin(), c.getRangeMax()] for c in self.coords])

        # couplers: (dependent index, [independent indices], function, scale)
        self.couplers = []
        csets = m.getConstraintSet()
        for i in range(csets.getSize()):
            k = csets.get(i)
            if k.getConcreteClassName() != "CoordinateCouplerConstraint":
                raise NotImplementedError(f"constraint type {k.getConcreteClassName()}")
            k = osim.CoordinateCouplerConstraint.safeDownCast(k)
            if not k.isEnforced(s):
                continue
            names = k.getIndependentCoordinateNames()
            ind = [cidx[names.get(j)] for j in range(names.getSize())]
            scale = osim.PropertyHelper.getValueDouble(k.getPropertyByName("scale_factor"))
            self.couplers.append((cidx[k.getDependentCoordinateName()], ind, k.getFunction(), scale))
        self.dependent = np.zeros(nc, bool)
        for d, _, _, _ in self.couplers:
            self.dependent[d] = True
        self.independent = ~self.dependent & ~self.locked
        self.ind_idx = np.nonzero(self.independent)[0]
        self.n_ind = len(self.ind_idx)
        # dependency order of couplers
        order, done = [], set(np.nonzero(~self.dependent)[0].tolist())
        pending = list(self.couplers)
        while pending:
            ready = [c for c in pending if all(j in done for j in c[1])]
            if not ready:
                raise RuntimeError("cyclic coordinate couplers")
            for c in ready:
                order.append(c)
                done.add(c[0])
                pending.remove(c)
        self.couplers = order

        # coordinate <-> Simbody q / u indices
        self.nq, self.nu = s.getNQ(), s.getNU()
        assert self.nq == self.nu == nc, "expected one q and one u per coordinate"
        self.q_index = np.zeros(nc, int)
        self.u_index = np.zeros(nc, int)
        for i, c in enumerate(self.coords):
            st = osim.State(s)
            st.setQ(osim.Vector(self.nq, 0.0))
            st.setU(osim.Vector(self.nu, 0.0))
            c.setLocked(st, False)  # a locked coordinate keeps its value through setValue
            c.setValue(st, 0.123, False)
            c.setSpeedValue(st, 0.456)
            (qi,) = np.nonzero(_vec(st.getQ()))[0]
            (ui,) = np.nonzero(_vec(st.getU()))[0]
            self.q_index[i], self.u_index[i] = qi, ui
        self.mobility_coordinate = np.argsort(self.u_index)

        bs = m.getBodySet()
        self.bodies = [bs.get(i) for i in range(bs.getSize())]
        self.body_names = [b.getName() for b in self.bodies]
        ms = m.getMuscles()
        self.muscles = [ms.get(i) for i in range(ms.getSize())]
        self.muscle_names = [x.getName() for x in self.muscles]

        # a second state for dynamics: every force (muscles, ...) switched off
        self.dyn_state = osim.State(s)
        fs = m.getForceSet()
        for i in range(fs.getSize()):
            fs.get(i).setAppliesForce(self.dyn_state, False)
        self.id_solver = osim.InverseDynamicsSolver(m)
        g = m.getGravity()
        self.gravity = np.array([g.get(i) for i in range(3)])

    # -- kinematics of the couplers ---------------------------------------
    def full_q(self, q_ind, derivs=False):
        """q_full (and C = dq_full/dq_ind, H = d2q_full/dq_ind2)."""
        nc, ni = len(self.coords), self.n_ind
        q = self.defaults.copy()
        q[self.ind_idx] = q_ind
        C = np.zeros((nc, ni))
        H = np.zeros((nc, ni, ni))
        C[self.ind_idx, np.arange(ni)] = 1.0
        for d, ind, f, scale in self.couplers:
            x = osim.Vector(len(ind), 0.0)
            for a, j in enumerate(ind):
                x.set(a, q[j])
            q[d] = scale * f.calcValue(x)
            if derivs:
                g = np.zeros(len(ind))
                h = np.zeros((len(ind), len(ind)))
                for a in range(len(ind)):
                    g[a] = f.calcDerivative(osim.StdVectorInt([a]), x)
                    for b in range(len(ind)):
                        h[a, b] = f.calcDerivative(osim.StdVectorInt([a, b]), x)
                Ci = C[ind]  # (k, ni)
                C[d] = scale * g @ Ci
                H[d] = scale * (np.einsum("ab,ai,bj->ij", h, Ci, Ci)
                                + np.einsum("a,aij->ij", g, H[ind]))
        if derivs:
            return q, C, H
        return q

    def set_q(self, state, q_full, qd_full=None):
        Q = np.zeros(self.nq)
        Q[self.q_index] = q_full
        state.setQ(osim.Vector(Q.tolist()))
        U = np.zeros(self.nu)
        if qd_full is not None:
            U[self.u_index] = qd_full
        state.setU(osim.Vector(U.tolist()))
        self.model.realizePosition(state)
        if self.couplers:
            err = np.abs(_vec(state.getQErr())).max()
            assert err < 1e-10, f"constraint error {err}"

    def lengths(self, state):
        return np.array([mu.getLength(state) for mu in self.muscles])

    def fd_moment_arms(self, q_ind, j, h=FD_STEP, L0=None):
        """-dL/dq_j by central differences; with L0 = L(q_ind) also return
        |forward - backward| difference quotient (a kink detector)."""
        st = self.state
        qp = q_ind.copy()
        qp[j] += h
        self.set_q(st, self.full_q(qp))
        Lp = self.lengths(st)
        qm = q_ind.copy()
        qm[j] -= h
        self.set_q(st, self.full_q(qm))
        Lm = self.lengths(st)
        fd = -(Lp - Lm) / (2 * h)
        if L0 is None:
            return fd
        return fd, np.abs((Lp - L0) - (L0 - Lm)) / h

    def fd_smooth(self, q_ind, j, L0):
        """(fd at FD_STEP, bool mask of points where L is smooth enough)."""
        fd, kink = self.fd_moment_arms(q_ind, j, FD_STEP, L0)
        fd2 = self.fd_moment_arms(q_ind, j, FD_CHECK_STEP)
        return fd, (np.abs(fd - fd2) < FD_CHECK_TOL) & (kink < FD_CHECK_TOL)

    def sweep_values(self, j, npts):
        c = self.ind_idx[j]
        lo, hi = self.ranges[c]
        if self.motion[c] != 2:
            n = int(np.floor((hi - lo) / DEG + 1e-9)) + 1
            if n <= npts:
                return lo + DEG * np.arange(n)
        return np.linspace(lo, hi, npts)

    def inverse_dynamics(self, q_full, qd_full, qdd_full):
        st = self.dyn_state
        self.set_q(st, q_full, qd_full)
        self.model.realizeVelocity(st)
        udot = np.zeros(self.nu)
        udot[self.u_index] = qdd_full
        tau_u = _vec(self.id_solver.solve(st, osim.Vector(udot.tolist())))
        return tau_u[self.u_index]  # coordinate order

    def mass_matrix(self, q_full):
        st = self.dyn_state
        self.set_q(st, q_full)
        M = osim.Matrix()
        self.model.getMatterSubsystem().calcM(st, M)
        return _mat(M)


def time_lengths_and_moment_arms(ref, q_fulls, timing_repeats=5):
    """Mean wall and CPU seconds per state (best over repeats), and a method string."""
    st = ref.state
    ni = ref.n_ind
    ind_coords = [ref.coords[c] for c in ref.ind_idx]
    Qs = []
    for q_full in q_fulls:
        Q = np.zeros(ref.nq)
        Q[ref.q_index] = q_full
        Qs.append(osim.Vector(Q.tolist()))
    load0 = os.getloadavg()[0]
    best = best_cpu = np.inf
    for _ in range(timing_repeats):
        t0 = time.perf_counter()
        c0 = time.process_time()
        for Q in Qs:
            st.setQ(Q)
            ref.model.realizePosition(st)
            for mu in ref.muscles:
                mu.getLength(st)
            for c in ind_coords:
                for mu in ref.muscles:
                    mu.computeMomentArm(st, c)
        best = min(best, (time.perf_counter() - t0) / max(len(Qs), 1))
        best_cpu = min(best_cpu, (time.process_time() - c0) / max(len(Qs), 1))
    timing_method = (
        f"opensim {osim.__version__} Python bindings, single thread; for each of the "
        f"{len(Qs)} random states: State.setQ, Model.realizePosition, Muscle.getLength "
        f"for all {len(ref.muscles)} muscles, Muscle.computeMomentArm for all "
        f"{len(ref.muscles)} muscles x {ni} independent coordinates; time.perf_counter "
        f"around the loop divided by the number of states; best of {timing_repeats} "
        f"repeats (the process CPU time, time.process_time, is stored as "
        f"opensim_cpu_seconds_per_state_lengths_and_moment_arms); CPU: {_cpu_name()}, "
        f"{os.cpu_count()} logical cores, load average before timing "
        f"{load0:.2f}")

    return best, best_cpu, timing_method


def generate(path, out, points_per_coordinate=91, random_states=20, seed=0,
             timing_repeats=5, command=""):
    ref = Reference(path)
    rng = np.random.default_rng(seed)
    st = ref.state
    ni = ref.n_ind
    q0_ind = ref.defaults[ref.ind_idx].copy()

    # ---- sweeps
    S = {k: [] for k in ["coordinate", "value", "q_ind", "q_full", "body_poses",
                         "muscle_lengths", "moment_arms_opensim", "moment_arms_fd", "fd_smooth"]}
    for j in range(ni):
        coord = ref.coords[ref.ind_idx[j]]
        for v in ref.sweep_values(j, points_per_coordinate):
            q_ind = q0_ind.copy()
            q_ind[j] = v
            q_full = ref.full_q(q_ind)
            ref.set_q(st, q_full)
            S["coordinate"].append(j)
            S["value"].append(v)
            S["q_ind"].append(q_ind)
            S["q_full"].append(np.array([c.getValue(st) for c in ref.coords]))
            S["body_poses"].append([_pose(b, st) for b in ref.bodies])
            L0 = ref.lengths(st)
            S["muscle_lengths"].append(L0)
            S["moment_arms_opensim"].append(
                [mu.computeMomentArm(st, coord) for mu in ref.muscles])
            fd, ok = ref.fd_smooth(q_ind, j, L0)
            S["moment_arms_fd"].append(fd)
            S["fd_smooth"].append(ok)
    dtypes = {"coordinate": np.int64, "fd_smooth": bool}
    data = {"sweep_" + k: np.asarray(v, dtype=dtypes.get(k, np.float64)) for k, v in S.items()}
    assert np.allclose(data["sweep_q_full"],
                       [ref.full_q(q) for q in data["sweep_q_ind"]], atol=1e-12)

    # ---- random states
    lo, hi = ref.ranges[ref.ind_idx].T
    R = {k: [] for k in ["q_ind", "qd_ind", "qdd_ind", "q_full", "qd_full", "qdd_full",
                         "C", "Cdot_qd", "mass_matrix_mobility", "mass_matrix_ind",
                         "tau_zero_acc_full", "tau_zero_acc_ind",
                         "tau_random_acc_full", "tau_random_acc_ind",
                         "gravity_forces_full", "gravity_forces_ind",
                         "body_poses", "muscle_lengths", "moment_arms_opensim",
                         "moment_arms_fd", "fd_smooth"]}
    perm = ref.u_index  # coordinate i -> mobility u_index[i]
    for _ in range(random_states):
        q_ind = rng.uniform(lo, hi)
        qd_ind = rng.uniform(-1, 1, ni)
        qdd_ind = rng.uniform(-1, 1, ni)
        q_full, C, H = ref.full_q(q_ind, derivs=True)
        qd_full = C @ qd_ind
        Cdot_qd = np.einsum("kij,i,j->k", H, qd_ind, qd_ind)
        qdd_full = C @ qdd_ind + Cdot_qd
        M_u = ref.mass_matrix(q_full)
        M_c = M_u[np.ix_(perm, perm)]
        tau0 = ref.inverse_dynamics(q_full, qd_full, Cdot_qd)
        tau1 = ref.inverse_dynamics(q_full, qd_full, qdd_full)
        grav = -ref.inverse_dynamics(q_full, np.zeros_like(q_full), np.zeros_like(q_full))
        ref.set_q(st, q_full)
        R["q_ind"].append(q_ind)
        R["qd_ind"].append(qd_ind)
        R["qdd_ind"].append(qdd_ind)
        R["q_full"].append(q_full)
        R["qd_full"].append(qd_full)
        R["qdd_full"].append(qdd_full)
        R["C"].append(C)
        R["Cdot_qd"].append(Cdot_qd)
        R["mass_matrix_mobility"].append(M_u)
        R["mass_matrix_ind"].append(C.T @ M_c @ C)
        R["tau_zero_acc_full"].append(tau0)
        R["tau_zero_acc_ind"].append(C.T @ tau0)
        R["tau_random_acc_full"].append(tau1)
        R["tau_random_acc_ind"].append(C.T @ tau1)
        R["gravity_forces_full"].append(grav)
        R["gravity_forces_ind"].append(C.T @ grav)
        R["body_poses"].append([_pose(b, st) for b in ref.bodies])
        L0 = ref.lengths(st)
        R["muscle_lengths"].append(L0)
        R["moment_arms_opensim"].append(
            [[mu.computeMomentArm(st, ref.coords[c]) for mu in ref.muscles]
             for c in ref.ind_idx])
        fd_ok = [ref.fd_smooth(q_ind, j, L0) for j in range(ni)]
        R["moment_arms_fd"].append([f for f, _ in fd_ok])
        R["fd_smooth"].append([ok for _, ok in fd_ok])
    data.update({"random_" + k: np.asarray(v, dtype=bool if k == "fd_smooth" else np.float64)
                 for k, v in R.items()})

    # ---- timing of OpenSim's own lengths + moment arms
    best, best_cpu, timing_method = time_lengths_and_moment_arms(
        ref, data["random_q_full"], timing_repeats)

    data.update(
        coordinate_names=np.array(ref.coord_names),
        coordinate_motion_types=ref.motion,
        coordinate_locked=ref.locked,
        coordinate_dependent=ref.dependent,
        coordinate_independent=ref.independent,
        coordinate_defaults=ref.defaults,
        coordinate_ranges=ref.ranges,
        independent_coordinate_indices=ref.ind_idx,
        independent_coordinate_names=np.array([ref.coord_names[i] for i in ref.ind_idx]),
        coupler_dependent=np.array([c[0] for c in ref.couplers], dtype=np.int64),
        mobility_coordinate_index=ref.mobility_coordinate,
        body_names=np.array(ref.body_names),
        muscle_names=np.array(ref.muscle_names),
        gravity=ref.gravity,
        opensim_seconds_per_state_lengths_and_moment_arms=np.float64(best),
        opensim_cpu_seconds_per_state_lengths_and_moment_arms=np.float64(best_cpu),
        opensim_timing_method=np.array(timing_method),
        opensim_version=np.array(osim.__version__),
        model_file=np.array(os.path.basename(path)),
        model_sha256=np.array(hashlib.sha256(open(path, "rb").read()).hexdigest()),
        seed=np.int64(seed),
        points_per_coordinate=np.int64(points_per_coordinate),
        fd_step=np.float64(FD_STEP),
        fd_check_step=np.float64(FD_CHECK_STEP),
        fd_check_tol=np.float64(FD_CHECK_TOL),
        command=np.array(command),
    )
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    np.savez_compressed(out, **data)
    return data


def _cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("model", help=".osim model file")
    p.add_argument("output", help="output .npz file")
    p.add_argument("--points-per-coordinate", type=int, default=91,
                   help="max sweep points per independent coordinate (default 91)")
    p.add_argument("--random-states", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timing-repeats", type=int, default=5,
                   help="repeat the timing loop, keep the best (default 5)")
    p.add_argument("--timing-only", action="store_true",
                   help="only re-measure the OpenSim timing at the random states of an "
                        "existing output file and update its timing fields")
    a = p.parse_args(argv)
    osim.Logger.setLevelString("error")
    if a.timing_only:
        d = dict(np.load(a.output))
        best, best_cpu, method = time_lengths_and_moment_arms(
            Reference(a.model), d["random_q_full"], a.timing_repeats)
        d["opensim_seconds_per_state_lengths_and_moment_arms"] = np.float64(best)
        d["opensim_cpu_seconds_per_state_lengths_and_moment_arms"] = np.float64(best_cpu)
        d["opensim_timing_method"] = np.array(method)
        np.savez_compressed(a.output, **d)
        print(f"{a.output}: {best*1e3:.3f} ms/state wall, {best_cpu*1e3:.3f} ms/state CPU")
        return
    cmd = " ".join(["tests/data/opensim/opensim_reference.py"] + list(sys.argv[1:] if argv is None else argv))
    t0 = time.perf_counter()
    d = generate(a.model, a.output, a.points_per_coordinate, a.random_states, a.seed,
                 a.timing_repeats, cmd)
    print(f"{a.output}: {len(d['coordinate_names'])} coordinates "
          f"({len(d['independent_coordinate_indices'])} independent), "
          f"{len(d['body_names'])} bodies, {len(d['muscle_names'])} muscles, "
          f"{len(d['sweep_value'])} sweep points, {len(d['random_q_ind'])} random states; "
          f"OpenSim {d['opensim_seconds_per_state_lengths_and_moment_arms']*1e3:.3f} ms/state "
          f"(lengths + moment arms); {time.perf_counter() - t0:.1f} s; "
          f"{os.path.getsize(a.output)/1e6:.2f} MB")


if __name__ == "__main__":
    main()
